// Inclusive-scan seed: y[i] = x[0] + ... + x[i], in fp64, each prefix rounded once to T. ONE block
// of 1024 threads (target.json) walks x in chunks of 1024 * 8 elements with a running fp64 carry:
// thread t sums its 8 consecutive elements of the chunk, a Hillis-Steele scan in shared memory
// gives every thread the sum of the threads before it, and each thread writes its 8 prefixes.
// Slow (one SM) but plainly correct and deterministic. The scratch buffer `status` (the
// template's tile status words) is not used.
constexpr int kThreads = 1024;
constexpr int kItems = 8;

extern "C" __global__ void prefixsum_v2_seed(const T* x, T* y, long long* /*status*/, long long N) {
  __shared__ double sums[kThreads];
  const int t = threadIdx.x;
  double carry = 0;  // sum of every element before the chunk
  for (long long base = 0; base < N; base += kThreads * kItems) {
    const long long first = base + static_cast<long long>(t) * kItems;
    double v[kItems];
    double own = 0;
    for (int k = 0; k < kItems; ++k) {
      v[k] = first + k < N ? static_cast<double>(to_f32(x[first + k])) : 0.0;
      own += v[k];
    }
    sums[t] = own;
    __syncthreads();
    for (int d = 1; d < kThreads; d <<= 1) {  // inclusive scan of the threads' sums
      const double left = t >= d ? sums[t - d] : 0.0;
      __syncthreads();
      sums[t] += left;
      __syncthreads();
    }
    double run = carry + (t > 0 ? sums[t - 1] : 0.0);
    for (int k = 0; k < kItems; ++k) {
      run += v[k];
      if (first + k < N) y[first + k] = from_f32<T>(static_cast<float>(run));
    }
    carry += sums[kThreads - 1];
    __syncthreads();  // sums is rewritten by the next chunk
  }
}
