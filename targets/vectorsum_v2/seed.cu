// Vector-sum seed: y[0] = sum of x[0, N). Each thread sums a grid-stride slice in fp64, the block
// reduces its threads' sums in shared memory (a tree, fixed order) and writes one partial per
// block to the scratch buffer `partials`. The last block to finish (counted in count[0] with an
// atomic) adds the partials in block order, writes y and sets the counter back to 0, so the
// scratch is left as it was found. No floating-point atomics: the result is bitwise deterministic.
// target.json launches min(cdiv(N, 256), 1024) blocks of 256 threads (never more than N, the
// length of `partials`).
extern "C" __global__ void vectorsum_v2_seed(const T* x, T* y, double* partials, int* count,
                                             long long N, long long /*ONE*/) {
  __shared__ double sums[256];
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  double s = 0;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < N;
       i += stride) {
    s += static_cast<double>(to_f32(x[i]));
  }
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sums[threadIdx.x] += sums[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sums[0];
    __threadfence();  // the partial is visible device-wide before the block is counted
    if (atomicAdd(count, 1) == static_cast<int>(gridDim.x) - 1) {
      __threadfence();  // every block's partial is visible to this one
      double total = 0;
      for (unsigned b = 0; b < gridDim.x; ++b) total += __ldcg(partials + b);
      y[0] = from_f32<T>(static_cast<float>(total));
      *count = 0;  // leave the scratch as it was found
    }
  }
}
