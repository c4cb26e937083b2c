// `kiln eval --profile` on a real GPU (ctest label gpu): the profile of the rmsnorm seed, the best
// known rmsnorm and matmul configurations at the benchmark shape must be plausible -- registers
// from the function attributes, and where CUPTI counters are permitted, DRAM throughput near the
// ceiling for the best memory-bound kernel and busy SMs for the tensor-core matmul. Where counters
// are not permitted the result must carry the one notice with the fix. Skips without a GPU.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "evaluator/cuda/cuda_probe.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

class ProfileGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda::CudaProbe p = cuda::probe_cuda();
    if (p.gpus.empty() || !p.nvrtc_loaded) {
      GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
    }
  }

  // `kiln eval <args> --profile --json` -> the result JSON (or null, with the output in a failure).
  nlohmann::json eval(const std::string& args) {
    static testing::TempDir cache;  // ceilings are measured once for the whole suite
    testing::TempDir dir;
    const std::string out = dir.file("result.json");
    // In a subshell: run_command sends the command's stderr to its own capture, which must not
    // override these redirections (the JSON alone goes to `out`).
    const std::string cmd = "(" + testing::kiln_binary() + " eval " + args +
                            " --backend cuda --profile --json --cache-dir " + cache.path() +
                            " --targets-dir " + testing::source_root() + "/targets > " + out +
                            " 2> " + dir.file("progress.txt") + ")";
    std::string ignored;
    const int rc = testing::run_command(cmd, &ignored);
    std::ifstream in(out);
    nlohmann::json r = nlohmann::json::parse(in, nullptr, false);
    std::ifstream progress(dir.file("progress.txt"));
    std::stringstream ss;
    ss << progress.rdbuf();
    progress_ = ss.str();
    EXPECT_EQ(rc, 0) << cmd << "\n" << progress_;
    return r.is_discarded() ? nlohmann::json() : r;
  }

  static double metric(const nlohmann::json& r, const std::string& key) {
    return r["metrics"].value("prof." + key, -1.0);
  }
  static bool has_counters(const nlohmann::json& r) {
    return r["metrics"].contains("prof.dram_throughput_pct");
  }

  std::string progress_;
};

TEST_F(ProfileGpu, RmsnormSeedAndBestHavePlausibleProfiles) {
  nlohmann::json seed = eval("rmsnorm");
  ASSERT_TRUE(seed.is_object()) << progress_;
  ASSERT_EQ(seed["outcome"], "verified") << progress_;
  EXPECT_GT(metric(seed, "registers"), 0) << seed.dump(2);
  EXPECT_GE(metric(seed, "local_bytes"), 0);
  EXPECT_GT(metric(seed, "theoretical_occupancy_pct"), 0);
  EXPECT_NE(seed["bottleneck"].get<std::string>().find("memory"), std::string::npos)
      << seed["profile_note"];

  // The best known configuration (bench/results/2026-11-22-H100-targets.md: 97.6% of the floor).
  nlohmann::json best = eval("rmsnorm --params BLOCK=256,ELEMS=32,HINT=0,ROWS=1,WREG=0");
  ASSERT_TRUE(best.is_object()) << progress_;
  ASSERT_EQ(best["outcome"], "verified") << progress_;
  EXPECT_GT(metric(best, "registers"), 0);
  EXPECT_EQ(best["bottleneck"], "memory_near_peak") << best["profile_note"];
  if (!has_counters(best)) {
    EXPECT_NE(best["profile_note"].get<std::string>().find("notice: "), std::string::npos);
    GTEST_SKIP() << "counters not available, so only attributes were checked: "
                 << best["profile_note"];
  }
  const double dram = metric(best, "dram_throughput_pct");
  EXPECT_GT(dram, 50) << best.dump(2);
  EXPECT_LE(dram, 101);
  EXPECT_GT(metric(best, "achieved_occupancy_pct"), 0);
  EXPECT_GT(dram, metric(seed, "dram_throughput_pct"))
      << "the best moves bytes faster than the seed";
  // Bytes the counters saw against what the target says the kernel must move (2*M*N+N halves).
  const double bytes = best["metrics"].value("bytes", 0.0);
  EXPECT_GT(metric(best, "dram_bytes"), 0.7 * bytes);  // L2 may hold a little; writes may linger
  EXPECT_LT(metric(best, "dram_bytes"), 1.5 * bytes);
}

TEST_F(ProfileGpu, TensorCoreMatmulIsComputeBound) {
  nlohmann::json best =
      eval("matmul --params BK=64,BM=128,BN=256,CL=0,GROUP_M=8,IMPL=1,PERS=0,STAGES=4,WM=1,WN=1");
  ASSERT_TRUE(best.is_object()) << progress_;
  ASSERT_EQ(best["outcome"], "verified") << progress_;
  EXPECT_GT(metric(best, "registers"), 0);
  EXPECT_GT(metric(best, "dynamic_shared_bytes"), 48 * 1024);
  EXPECT_EQ(metric(best, "local_bytes"), 0);
  EXPECT_EQ(best["bottleneck"], "compute") << best["profile_note"];
  if (!has_counters(best)) GTEST_SKIP() << "counters not available: " << best["profile_note"];
  EXPECT_GT(metric(best, "sm_throughput_pct"), 50) << best.dump(2);
  EXPECT_LT(metric(best, "dram_throughput_pct"), metric(best, "sm_throughput_pct"));
}

// Local memory touched in the hot loop is spilling; local memory touched once per tile is not.
// A row sum whose accumulators live in a dynamically indexed array loads and stores local memory
// on every element; the best flash_attention (IMPL 2, persistent) parks a few values per thread
// across its tile loop, and its limit is elsewhere.
constexpr const char* kLocalArrayReduce = R"(
extern "C" __global__ void reduce_seed(const T* x, T* y, long long M, long long N) {
  float acc[32];  // 16 entries: ptxas turns the indexing into selects and keeps them in registers
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  int slot = 0;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    acc[slot] += to_f32(x[blockIdx.x * N + c]);
    slot = (slot + 1 + int(c & 1)) & 31;  // known only at run time: the array is in local memory
  }
  float s = 0.f;
  for (int i = 0; i < 32; ++i) s += acc[i];
  for (int d = 16; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
  __shared__ float per_warp[32];
  if (threadIdx.x % 32 == 0) per_warp[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) total += per_warp[w];
    y[blockIdx.x] = from_f32<T>(total);
  }
}
)";

TEST_F(ProfileGpu, LocalMemoryIsSpillingWhereTheHotLoopTouchesIt) {
  testing::TempDir dir;
  nlohmann::json spill = eval("reduce --source " + dir.write("local_array.cu", kLocalArrayReduce));
  ASSERT_TRUE(spill.is_object()) << progress_;
  ASSERT_EQ(spill["outcome"], "verified") << progress_;
  EXPECT_GT(metric(spill, "local_bytes"), 0) << spill.dump(2);
  EXPECT_EQ(spill["bottleneck"], "spilling") << spill["profile_note"];

  nlohmann::json attn =
      eval("flash_attention --params BN=128,IMPL=2,PERS=1,PIPE=1,PING=1,RM=1,STAGES=2,WARPS=8");
  ASSERT_TRUE(attn.is_object()) << progress_;
  ASSERT_EQ(attn["outcome"], "verified") << progress_;
  if (!has_counters(spill) || !spill["metrics"].contains("prof.local_load_inst")) {
    GTEST_SKIP() << "instruction counters not available: " << spill["profile_note"];
  }
  const double executed = metric(spill, "inst_executed");
  const double local = metric(spill, "local_load_inst") + metric(spill, "local_store_inst");
  EXPECT_GT(local, 0.05 * executed) << spill.dump(2);
  EXPECT_NE(spill["profile_note"].get<std::string>().find("of instructions"), std::string::npos)
      << spill["profile_note"];

  const double attn_local = metric(attn, "local_load_inst") + metric(attn, "local_store_inst");
  EXPECT_LT(attn_local, 0.01 * metric(attn, "inst_executed")) << attn.dump(2);
  EXPECT_NE(attn["bottleneck"], "spilling") << attn["profile_note"];
  if (metric(attn, "local_bytes") > 0) {
    EXPECT_NE(attn["profile_note"].get<std::string>().find("bytes of local memory per thread"),
              std::string::npos)
        << attn["profile_note"];
  }
}

}  // namespace
}  // namespace kiln

#else
TEST(ProfileGpu, NeedsCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }
#endif
