// Kernel argument values (raw bytes the launch points at).
#include "evaluator/backend.h"

#include <cstring>

namespace kiln::eval {

KernelArg KernelArg::pointer(void* p) {
  KernelArg a;
  std::memcpy(a.bytes, &p, sizeof(p));
  a.size = sizeof(p);
  return a;
}

KernelArg KernelArg::int64(int64_t v) {
  KernelArg a;
  std::memcpy(a.bytes, &v, sizeof(v));
  a.size = sizeof(v);
  return a;
}

KernelArg KernelArg::float32(float v) {
  KernelArg a;
  std::memcpy(a.bytes, &v, sizeof(v));
  a.size = sizeof(v);
  return a;
}

KernelArg KernelArg::tensor_map(const unsigned char (&map)[kTensorMapBytes]) {
  KernelArg a;
  std::memcpy(a.bytes, map, kTensorMapBytes);
  a.size = kTensorMapBytes;
  return a;
}

}  // namespace kiln::eval
