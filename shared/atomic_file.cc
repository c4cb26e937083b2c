// See atomic_file.h.
#include "shared/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln {

Status write_file_atomically(const std::string& path, std::string_view content, unsigned mode) {
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  // Unique per writer (mkstemp), hidden, in the same folder so that rename() is atomic.
  std::string temp = folder + "/." + name + ".XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return unavailable("cannot create a file in " + folder + ": " + std::strerror(errno));
  bool ok = ::fchmod(fd, mode) == 0;
  for (size_t done = 0; ok && done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  const int write_errno = errno;
  if (::close(fd) != 0) ok = false;
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : write_errno);
    ::unlink(temp.c_str());
    return unavailable("writing " + path + ": " + why);
  }
  return Status::ok();
}

}  // namespace kiln
