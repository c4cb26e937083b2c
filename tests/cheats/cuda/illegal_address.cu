// A kernel that writes through a wild pointer (here the null page): the device faults with an
// illegal address, which poisons the CUDA context; the evaluator must report a crash and carry on
// with a fresh sandbox, not die with it.
extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  *reinterpret_cast<volatile T*>(0x10) = from_f32<T>(1.f);
}
