// docs/threats.md row 5 (work outside the timed launch): launches a child grid with <<< >>>
// (dynamic parallelism) to do the rows, so the work is not the candidate's own launch and the
// geometry kiln chose means nothing. Rejected by the static scan (host-code:<<<).
__global__ void child(const T* x, const T* w, T* y, long long N, float eps) {}

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  if (blockIdx.x == 0 && threadIdx.x == 0) child<<<M, 256>>>(x, w, y, N, eps);
}
