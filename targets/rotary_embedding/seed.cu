// rotary_embedding seed: one thread per rotated pair (row (b, h, l), i < R), fp32 arithmetic:
// y[i] = x[i] c - x[i+R] s and y[i+R] = x[i+R] c + x[i] s with c, s = cos/sin[l, i]. Plain
// scalar loads and stores; the obviously correct starting point.
extern "C" __global__ void rotary_embedding_seed(const T* x, const T* cs, const T* sn, T* y,
                                                 long long B, long long H, long long L,
                                                 long long D, long long R) {
  const long long p = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= B * H * L * R) return;
  const long long row = p / R, i = p % R, l = row % L;
  const float c = to_f32(cs[l * R + i]), s = to_f32(sn[l * R + i]);
  const float a = to_f32(x[row * D + i]), b = to_f32(x[row * D + i + R]);
  y[row * D + i] = from_f32<T>(a * c - b * s);
  y[row * D + i + R] = from_f32<T>(b * c + a * s);
}
