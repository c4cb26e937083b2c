// Memory that a forked child writes and its parent reads: an allocator of anonymous MAP_SHARED
// pages. `kiln targets --check` runs the reference in a child forked for each call
// (evaluator/forked_call.h), which writes its outputs into vectors of this kind.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

namespace kiln::eval {

template <typename T>
struct SharedPages {
  using value_type = T;
  SharedPages() = default;
  template <typename U>
  SharedPages(const SharedPages<U>&) {}  // NOLINT(google-explicit-constructor): allocator rebind

  T* allocate(size_t n) {
    void* p = mmap(nullptr, bytes(n), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { munmap(p, bytes(n)); }
  template <typename U>
  bool operator==(const SharedPages<U>&) const {
    return true;
  }

 private:
  static size_t bytes(size_t n) { return std::max<size_t>(n * sizeof(T), 1); }
};

// Outputs shared with the child that computes them.
using SharedDoubles = std::vector<double, SharedPages<double>>;

}  // namespace kiln::eval
