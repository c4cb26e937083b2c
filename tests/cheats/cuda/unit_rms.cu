// docs/threats.md row 4 (an answer fitted to one input distribution): assumes every row's RMS is 1,
// as it is on average for N(0, 1) data, and skips the reduction: y = x * w. Off by a few percent on
// N(0, 1) rows and by orders of magnitude on scaled data; caught at once (smoke).
extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  const long long row = blockIdx.x;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    y[row * N + c] = from_f32<T>(to_f32(x[row * N + c]) * to_f32(w[c]));
  }
}
