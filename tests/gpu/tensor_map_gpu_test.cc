// Tensor maps on a real GPU (ctest label gpu): a target whose kernel loads its input with TMA
// through a map kiln encodes (target.json "tensor_maps") verifies through all five stages in
// every dtype -- the map follows each input set and poisoned copy to its address -- and takes its
// plain-load path where rows are not 16-byte aligned (kiln passes zeros there). A kernel that
// uses the map at such a shape anyway fails as a crash, and the evaluator goes on. Skips without
// a GPU.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <deque>
#include <nlohmann/json.hpp>
#include <string>

#include "evaluator/cuda/cuda_probe.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

// y = 2 x over [M, N]; one CTA per BR x BC tile of x, loaded by TMA when rows are aligned.
constexpr const char* kKernel = R"(
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

constexpr const char* kReference = R"(
#include <cstdint>
extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double*) {
  for (int64_t i = 0; i < dims[0] * dims[1]; ++i) out[0][i] = 2 * in[0][i];
}
)";

nlohmann::json target_json(int always_tma) {
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

class TensorMapGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda::CudaProbe p = cuda::probe_cuda();
    if (p.gpus.empty() || !p.nvrtc_loaded) {
      GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
    }
    if (p.gpus[0].cc_major < 9) GTEST_SKIP() << "TMA needs sm_90 or later";
  }

  // `kiln eval tma_scale` over the target written with `always_tma` -> the result JSON.
  nlohmann::json eval(int always_tma, const std::string& dtype, std::string* progress) {
    testing::TempDir& dir = dirs_.emplace_back();
    dir.write("targets/tma_scale/target.json", target_json(always_tma).dump(2));
    dir.write("targets/tma_scale/seed.cu", kKernel);
    dir.write("targets/tma_scale/reference.cpp", kReference);
    const std::string out = dir.file("result.json"), log = dir.file("progress.txt");
    const std::string cmd = "(" + testing::kiln_binary() +
                            " eval tma_scale --backend cuda --json --dtype " + dtype +
                            " --cache-dir " + dir.file("cache") + " --targets-dir " +
                            dir.file("targets") + " > " + out + " 2> " + log + ")";
    std::string ignored;
    testing::run_command(cmd, &ignored);
    *progress = testing::read_file(log);
    nlohmann::json r = nlohmann::json::parse(testing::read_file(out), nullptr, false);
    return r.is_discarded() ? nlohmann::json::object() : r;
  }
  std::deque<testing::TempDir> dirs_;  // deque: a TempDir cannot move
};

TEST_F(TensorMapGpu, ATmaKernelVerifiesInEveryDtypeAndFallsBackWhereRowsAreUnaligned) {
  for (const char* dtype : {"f16", "bf16", "f32"}) {
    std::string progress;
    nlohmann::json r = eval(0, dtype, &progress);
    EXPECT_EQ(r.value("outcome", ""), "verified") << dtype << ": " << r.value("log", "") << "\n"
                                                  << progress;
    EXPECT_GT(r["timing"].value("median_us", 0.0), 0.0) << dtype;
  }
}

TEST_F(TensorMapGpu, AKernelUsingTheZeroMapOfAnUnalignedShapeCrashesAndTheEvaluatorSaysWhere) {
  std::string progress;
  nlohmann::json r = eval(1, "f16", &progress);
  ASSERT_TRUE(r.contains("outcome") && r.contains("stages")) << progress;
  EXPECT_NE(r["outcome"], "verified") << progress;
  // The aligned smoke shape passes; an unaligned edge shape is where the zero map is used.
  ASSERT_FALSE(r["stages"].empty()) << r.dump();
  bool smoke_passed = false;
  for (const auto& s : r["stages"])
    smoke_passed |= s.value("name", "") == "smoke" && s.value("passed", false);
  EXPECT_TRUE(smoke_passed) << r["stages"].dump();
  EXPECT_FALSE(r["stages"].back().value("passed", true)) << r["stages"].dump();
}

}  // namespace
}  // namespace kiln

#else

TEST(TensorMapGpu, NeedsCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }

#endif
