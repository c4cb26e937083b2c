// Cross-entropy seed: one block of 256 threads per row. Pass 1 takes the row max, pass 2 the sum
// of expf(x - max), both with shared-memory tree reductions in fp32; thread 0 then writes
// loss = (max + logf(sum)) - x[label] -- the reference's formula, so IEEE special values agree
// (NaN or +Inf in a row, or an all -Inf row, give NaN). A label outside [0, V) gives NaN.
extern "C" __global__ void cross_entropy_seed(const T* logits, const int* labels, float* loss,
                                              long long M, long long V) {
  __shared__ float partial[256];
  const T* x = logits + blockIdx.x * V;
  float m = __int_as_float(0xff800000);  // -Inf (NVRTC has no math.h)
  for (long long c = threadIdx.x; c < V; c += blockDim.x) m = fmaxf(m, to_f32(x[c]));
  partial[threadIdx.x] = m;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) {
      partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + k]);
    }
    __syncthreads();
  }
  const float row_max = partial[0];
  __syncthreads();
  float s = 0.f;
  for (long long c = threadIdx.x; c < V; c += blockDim.x) s += expf(to_f32(x[c]) - row_max);
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const int label = labels[blockIdx.x];
    if (label < 0 || label >= V) {
      loss[blockIdx.x] = __int_as_float(0x7fffffff);  // NaN
    } else {
      loss[blockIdx.x] = (row_max + logf(partial[0])) - to_f32(x[label]);
    }
  }
}
