// The shared-memory arena: memfd creation, adoption of an inherited descriptor, and mapping.
#include "evaluator/arena.h"
#include "shared/text.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace kiln::eval {
namespace {

}  // namespace

Result<Arena> Arena::create(size_t bytes) {
  if (bytes == 0) return invalid_argument("arena: size must be positive");
  int fd = memfd_create("kiln-sandbox-arena", MFD_CLOEXEC);
  if (fd < 0) return unavailable("arena: memfd_create: " + errno_text(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    return Status(StatusCode::kResourceExhausted,
                  "arena: ftruncate to " + std::to_string(bytes) + " bytes: " + errno_text(err));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return Status(StatusCode::kResourceExhausted,
                  "arena: mmap of " + std::to_string(bytes) + " bytes: " + errno_text(err));
  }
  return Arena(fd, static_cast<unsigned char*>(p), bytes);
}

Result<Arena> Arena::adopt(int fd, size_t bytes) {
  if (fd < 0) return invalid_argument("arena: invalid descriptor " + std::to_string(fd));
  if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    return invalid_argument("arena: descriptor " + std::to_string(fd) + " is not open: " +
                            errno_text(errno));
  }
  auto fail = [fd](Status s) {
    close(fd);
    return s;
  };
  if (bytes == 0) return fail(invalid_argument("arena: size must be positive"));
  struct stat st {};
  if (fstat(fd, &st) != 0) return fail(invalid_argument("arena: fstat: " + errno_text(errno)));
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) < bytes) {
    return fail(invalid_argument("arena: descriptor " + std::to_string(fd) + " holds " +
                                 std::to_string(st.st_size) + " bytes, expected at least " +
                                 std::to_string(bytes)));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail(unavailable("arena: mmap: " + errno_text(errno)));
  return Arena(fd, static_cast<unsigned char*>(p), bytes);
}

Arena::~Arena() { reset(); }

Arena::Arena(Arena&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Arena::reset() {
  if (data_ != nullptr) munmap(data_, bytes_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  data_ = nullptr;
  bytes_ = 0;
}

Status Arena::check_range(uint64_t offset, uint64_t length, std::string_view what) const {
  if (offset > bytes_ || length > bytes_ - offset) {
    return out_of_range(std::string(what) + ": range [" + std::to_string(offset) + ", " +
                        std::to_string(offset) + " + " + std::to_string(length) +
                        ") lies outside the arena of " + std::to_string(bytes_) + " bytes");
  }
  return Status::ok();
}

}  // namespace kiln::eval
