// See bounded_file.h.
#include "shared/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln {
namespace {

std::string size_text(uintmax_t bytes) {
  if (bytes >= (uintmax_t{1} << 20) && bytes % (uintmax_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<std::string> read_bounded_file(const std::string& path, const FileBounds& b) {
  const std::string what(b.what);
  struct stat st {};
  if ((b.follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    return not_found(path + ": cannot read it (" + std::strerror(errno) + ")");
  }
  if (S_ISDIR(st.st_mode))
    return invalid_argument(path + ": a folder, where " + what + " was expected");
  if (S_ISLNK(st.st_mode)) {
    return invalid_argument(path + ": a symbolic link, where " + what + " was expected");
  }
  const bool stream = S_ISFIFO(st.st_mode);
  if (!S_ISREG(st.st_mode) && !(stream && b.streams)) {
    return invalid_argument(path + ": not a regular file (a device, fifo or socket), where " +
                            what + " was expected");
  }
  const std::string too_large =
      path + ": larger than the " + size_text(b.max_bytes) + " kiln reads of " + what;
  if (!stream && static_cast<uintmax_t>(st.st_size) > b.max_bytes)
    return invalid_argument(too_large);
  // O_NONBLOCK on open only: a fifo with no writer yet must not block the open. Reads block again.
  Fd in{::open(path.c_str(), O_RDONLY | O_CLOEXEC | (stream ? O_NONBLOCK : 0))};
  if (in.fd < 0) return not_found(path + ": cannot open it (" + std::strerror(errno) + ")");
  if (stream) ::fcntl(in.fd, F_SETFL, ::fcntl(in.fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(in.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return not_found(path + ": reading it failed (" + std::strerror(errno) + ")");
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > b.max_bytes) return invalid_argument(too_large);
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace kiln
