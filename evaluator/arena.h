// The shared-memory arena: one anonymous memfd mapped MAP_SHARED by the evaluator and by its
// sandbox child, through which tensors travel (the pipe carries only small JSON requests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shared/status.h"

namespace kiln::eval {

// Move-only owner of the mapping and of the file descriptor. Contents are not synchronized: the
// request/reply protocol orders all access (the parent writes before a request and reads after
// its reply; the child touches the arena only while it handles a request).
class Arena {
 public:
  // memfd_create (close-on-exec) + ftruncate + mmap. The memory starts zeroed.
  static Result<Arena> create(size_t bytes);
  // Adopts `fd` (inherited across exec) and maps `bytes` of it; fails when the file is smaller.
  // Takes ownership of `fd` and marks it close-on-exec, in success or failure.
  static Result<Arena> adopt(int fd, size_t bytes);

  Arena() = default;
  ~Arena();
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  unsigned char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  int fd() const { return fd_; }

  // OK when [offset, offset + length) lies inside the arena (overflow-safe); else kOutOfRange
  // naming `what` ("tensor 2").
  Status check_range(uint64_t offset, uint64_t length, std::string_view what) const;

 private:
  Arena(int fd, unsigned char* data, size_t bytes) : fd_(fd), data_(data), bytes_(bytes) {}
  void reset();

  int fd_ = -1;
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kiln::eval
