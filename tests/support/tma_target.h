// A small cuda target whose seed loads its input with TMA through a tensor map kiln encodes
// (target.json "tensor_maps"), for the tests of tensor maps in the evaluator and in exports:
// tma_scale computes y = 2 x over [M, N]. ALWAYS_TMA 0 takes plain loads where rows are not
// 16-byte aligned (the map is zeros there); 1 uses the map regardless.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace kiln::testing {

// y = 2 x over [M, N]; one CTA per BR x BC tile of x, loaded by TMA when rows are aligned.
inline constexpr const char* kTmaScaleKernel = R"(
extern "C" __global__ void tma_scale(const T* __restrict__ x, T* __restrict__ y, long long M,
                                     long long N, const __grid_constant__ kiln_tensor_map tx) {
  __shared__ __align__(128) T tile[BR * BC];
  __shared__ __align__(8) unsigned long long bar;
  const long long r0 = (long long)blockIdx.y * BR, c0 = (long long)blockIdx.x * BC;
  const bool tma = ALWAYS_TMA || (N * sizeof(T)) % 16 == 0;  // else kiln passed a zero map
  if (tma) {
    const unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
    const unsigned dst = (unsigned)__cvta_generic_to_shared(tile);
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(b));
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b),
                   "r"((unsigned)(BR * BC * sizeof(T))) : "memory");
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
          "l"((unsigned long long)&tx), "r"((int)c0), "r"((int)r0), "r"(b) : "memory");
    }
    unsigned done = 0;
    while (!done) {
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
          "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(b) : "memory");
    }
  }
  for (int i = threadIdx.x; i < BR * BC; i += blockDim.x) {
    const long long gr = r0 + i / BC, gc = c0 + i % BC;
    if (gr >= M || gc >= N) continue;
    y[gr * N + gc] = from_f32<T>(2.f * to_f32(tma ? tile[i] : x[gr * N + gc]));
  }
}
)";

inline constexpr const char* kTmaScaleReference = R"(
#include <cstdint>
extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double*) {
  for (int64_t i = 0; i < dims[0] * dims[1]; ++i) out[0][i] = 2 * in[0][i];
}
)";

inline nlohmann::json tma_scale_target_json(int always_tma) {
  // BC = 64 elements: 128 bytes of f16/bf16, 256 of f32 (no swizzle, so any row width works).
  return {
      {"name", "tma_scale"},
      {"description", "y = 2 x, loaded with TMA"},
      {"dims", {"M", "N"}},
      {"args",
       {{{"name", "x"}, {"role", "input"}, {"dtype", "T"}, {"shape", {"M", "N"}}},
        {{"name", "y"}, {"role", "output"}, {"dtype", "T"}, {"shape", {"M", "N"}}}}},
      {"dtypes", {"f16", "bf16", "f32"}},
      {"tolerance",
       {{"f16", {{"rel", 0}, {"abs", 0}}},
        {"bf16", {{"rel", 0}, {"abs", 0}}},
        {"f32", {{"rel", 0}, {"abs", 0}}}}},
      {"shapes",
       {{"benchmark", {{"M", 4096}, {"N", 4096}}},
        {"smoke", {{{"M", 32}, {"N", 64}}}},
        {"sweep", {{{"M", 100}, {"N", 200}}, {{"M", 33}, {"N", 520}}}},
        {"edge", {{{"M", 1}, {"N", 1}}, {{"M", 7}, {"N", 13}}, {{"M", 65}, {"N", 72}}}}}},
      {"bytes", "2*M*N*S"},
      {"flops", "M*N"},
      {"reference", "reference.cpp"},
      {"backends",
       {{"cuda",
         {{"dtypes", {"f16", "bf16", "f32"}},
          {"seed",
           {{"source", "seed.cu"},
            {"kernel", "tma_scale"},
            {"defines", {{"BR", "32"}, {"BC", "64"}, {"ALWAYS_TMA", std::to_string(always_tma)}}},
            {"grid", {"cdiv(N, BC)", "cdiv(M, BR)"}},
            {"block", {"128"}},
            {"tensor_maps", {{{"name", "x_tiles"}, {"tensor", "x"}, {"box", {"BR", "BC"}}}}}}}}}}}};
}

// Writes the target's folder (target.json, seed.cu, reference.cpp) at `dir`.
inline void write_tma_scale_target(const std::string& dir, int always_tma) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/target.json") << tma_scale_target_json(always_tma).dump(2);
  std::ofstream(dir + "/seed.cu") << kTmaScaleKernel;
  std::ofstream(dir + "/reference.cpp") << kTmaScaleReference;
}

}  // namespace kiln::testing
