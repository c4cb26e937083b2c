// `kiln profile`'s trace reading, aggregation, target mapping, Amdahl ranking and plan files, on
// hand-written traces in tests/data/profile_trace/step: three processes of a PyTorch-like training
// step (cuBLAS and CUTLASS GEMMs, softmax, layer norm, elementwise, log-softmax, a reduction and
// FlashAttention in a child), one malformed and one torn line, one process killed before exit.
// The expected numbers are worked out by hand in the comments (durations in ns; total 40,000).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "evaluator/profile/plan.h"
#include "evaluator/profile/plan_table.h"
#include "evaluator/profile/trace.h"
#include "evaluator/profile/trace_targets.h"
#include "tests/evaluator/plan_lookup.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln::profile {
namespace {

const char* kGemm = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn";

std::string step_dir() { return testing::source_root() + "/tests/data/profile_trace/step"; }

TraceSet read_step() {
  Result<TraceSet> set = read_trace_dir(step_dir());
  EXPECT_TRUE(set.is_ok()) << set.status().to_string();
  return set.is_ok() ? *set : TraceSet{};
}

const KernelStat* find_stat(const std::vector<KernelStat>& stats, const std::string& prefix) {
  for (const KernelStat& s : stats) {
    if (s.name.rfind(prefix, 0) == 0) return &s;
  }
  return nullptr;
}

TEST(ProfileTrace, ReadsEveryProcessFileAndSkipsBadLinesNamingFileAndLine) {
  TraceSet set = read_step();
  EXPECT_EQ(set.processes.size(), 3u);  // notes.txt is not a trace
  // Process 4242: 13 kernels and 2 bad lines; 4250: 4 kernels; 4201: none.
  EXPECT_EQ(set.kernels.size(), 17u);
  const std::string p1 = step_dir() + "/kiln-trace-4242-1700000000000000000.jsonl";
  auto has_warning = [&](const std::string& text) {
    return std::any_of(set.warnings.begin(), set.warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(has_warning(p1 + ":9: missing field 'end_ns'")) << ::testing::PrintToString(set.warnings);
  EXPECT_TRUE(has_warning(p1 + ":16: not valid JSON")) << ::testing::PrintToString(set.warnings);
  // The child has no "end" line: killed before it exited.
  EXPECT_TRUE(has_warning("process 4250 did not exit normally")) << ::testing::PrintToString(set.warnings);
  EXPECT_FALSE(has_warning("process 4242 did not exit")) << ::testing::PrintToString(set.warnings);
  EXPECT_EQ(set.warnings.size(), 3u) << ::testing::PrintToString(set.warnings);
}

TEST(ProfileTrace, AggregatesKernelsByNameAcrossProcesses) {
  std::vector<KernelStat> stats = aggregate_kernels(read_step().kernels);
  ASSERT_EQ(stats.size(), 9u);
  EXPECT_EQ(total_gpu_ns(stats), 40000u);
  // Most time first: the cuBLAS GEMM, 3 calls in 4242 and 1 in 4250, 4,000 ns each.
  EXPECT_EQ(stats[0].name, kGemm);
  EXPECT_EQ(stats[0].calls, 4u);
  EXPECT_EQ(stats[0].total_ns, 16000u);
  EXPECT_EQ(stats[0].min_ns, 4000u);
  EXPECT_EQ(stats[0].max_ns, 4000u);
  EXPECT_EQ(stats[0].target, "matmul");
  const KernelStat* cutlass = find_stat(stats, "void cutlass::Kernel2");
  ASSERT_NE(cutlass, nullptr);
  EXPECT_EQ(cutlass->calls, 2u);
  EXPECT_EQ(cutlass->total_ns, 8000u);
  EXPECT_EQ(cutlass->min_ns, 3000u);
  EXPECT_EQ(cutlass->max_ns, 5000u);
  EXPECT_DOUBLE_EQ(cutlass->mean_ns(), 4000.0);
  EXPECT_EQ(cutlass->mangled.rfind("_ZN7cutlass7Kernel2", 0), 0u);
  for (size_t i = 1; i < stats.size(); ++i) EXPECT_GE(stats[i - 1].total_ns, stats[i].total_ns);
}

TEST(ProfileTrace, MapsKernelNamesToTargetTypes) {
  EXPECT_EQ(map_kernel_to_target(kGemm), "matmul");
  EXPECT_EQ(map_kernel_to_target("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64"), "matmul");
  EXPECT_EQ(map_kernel_to_target("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTN"), "matmul");
  EXPECT_EQ(map_kernel_to_target("void cublasLt::splitKreduce_kernel<32, 16, int, float>"), "matmul");
  // FlashAttention is CUTLASS code: attention wins.
  EXPECT_EQ(map_kernel_to_target("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, "
                                 "128, 64, 4, false, false, cutlass::half_t>>"),
            "flash_attention");
  EXPECT_EQ(map_kernel_to_target("fmha_cutlassF_f16_aligned_64x64_rf_sm80"), "flash_attention");
  EXPECT_EQ(map_kernel_to_target("cudnn_generated_fort_native_sdpa_sm90_flash_fprop"), "flash_attention");
  // Log-softmax and NLL are the loss, plain softmax is softmax.
  EXPECT_EQ(map_kernel_to_target("cunn_SoftMaxForward<4, float, float, float, LogSoftMaxForwardEpilogue>"),
            "cross_entropy");
  EXPECT_EQ(map_kernel_to_target("nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>"), "cross_entropy");
  EXPECT_EQ(map_kernel_to_target("cunn_SoftMaxBackward<4, c10::Half, float, c10::Half, SoftMaxBackwardEpilogue>"),
            "softmax");
  EXPECT_EQ(map_kernel_to_target("vectorized_layer_norm_kernel<c10::Half, float, false>"), "layernorm");
  EXPECT_EQ(map_kernel_to_target("GammaBetaBackwardCUDAKernel_32x32<c10::Half, float>"), "layernorm");
  EXPECT_EQ(map_kernel_to_target("rmsnorm_f16_kernel"), "rmsnorm");
  EXPECT_EQ(map_kernel_to_target("apply_rope_kernel<half>"), "rotary_embedding");
  EXPECT_EQ(map_kernel_to_target("rotary_embedding_kernel"), "rotary_embedding");
  EXPECT_EQ(map_kernel_to_target("act_and_mul_kernel<silu_kernel>"), "fused_mlp");
  EXPECT_EQ(map_kernel_to_target("vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>"), "fused_mlp");
  EXPECT_EQ(map_kernel_to_target("at::native::reduce_kernel<512, 1, ReduceOp<float, MeanOps>>"), "reduce");
  EXPECT_EQ(map_kernel_to_target("block_sum_kernel"), "reduce");
  // Whole words only: "rope" in "property", "sum" in "cumsum" are not matches.
  EXPECT_EQ(map_kernel_to_target("set_property_kernel"), "");
  EXPECT_EQ(map_kernel_to_target("cumsum_scan_kernel"), "");
  EXPECT_EQ(map_kernel_to_target("vectorized_elementwise_kernel<4, CUDAFunctor_add<c10::Half>>"), "");
}

TEST(ProfileTrace, AmdahlMatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(amdahl_speedup(0.0, 2.0), 1.0);
  EXPECT_DOUBLE_EQ(amdahl_speedup(1.0, 2.0), 2.0);
  EXPECT_NEAR(amdahl_speedup(0.6, 2.0), 1.0 / 0.7, 1e-12);   // 1.428571...
  EXPECT_NEAR(amdahl_speedup(0.5, 4.0), 1.6, 1e-12);         // 1 / (0.5 + 0.125)
  EXPECT_NEAR(amdahl_speedup(0.25, 1e9), 4.0 / 3.0, 1e-6);   // the limit 1 / (1 - f)
}

TEST(ProfileTrace, PlanRanksKernelsAndTargetsWithAmdahlGains) {
  TraceSet set = read_step();
  Plan plan = make_plan(aggregate_kernels(set.kernels), 2.0, set.processes.size());
  EXPECT_EQ(plan.total_gpu_ns, 40000u);
  EXPECT_EQ(plan.total_calls, 17u);
  EXPECT_EQ(plan.processes, 3u);
  // GEMM kernel: 16,000 / 40,000 = 0.4 -> 1 / (0.6 + 0.2) = 1.25.
  EXPECT_DOUBLE_EQ(plan.kernels[0].share, 0.4);
  EXPECT_NEAR(plan.kernels[0].end_to_end_speedup, 1.25, 1e-12);
  // matmul = cuBLAS 16,000 + CUTLASS 8,000 = 0.6 -> 1 / 0.7.
  ASSERT_FALSE(plan.targets.empty());
  EXPECT_EQ(plan.targets[0].target, "matmul");
  EXPECT_EQ(plan.targets[0].kernels, 2u);
  EXPECT_EQ(plan.targets[0].calls, 6u);
  EXPECT_EQ(plan.targets[0].total_ns, 24000u);
  EXPECT_DOUBLE_EQ(plan.targets[0].share, 0.6);
  EXPECT_NEAR(plan.targets[0].end_to_end_speedup, 1.0 / 0.7, 1e-12);
  // FlashAttention 7,000 = 0.175 -> 1 / (0.825 + 0.0875).
  const PlanTarget* flash = find_target(plan, "flash_attention");
  ASSERT_NE(flash, nullptr);
  EXPECT_DOUBLE_EQ(flash->share, 0.175);
  EXPECT_NEAR(flash->end_to_end_speedup, 1.0 / 0.9125, 1e-12);
  for (const char* t : {"softmax", "layernorm", "reduce"}) {
    ASSERT_NE(find_target(plan, t), nullptr) << t;
    EXPECT_EQ(find_target(plan, t)->total_ns, 2000u) << t;
  }
  for (const char* t : {"fused_mlp", "cross_entropy"}) {
    ASSERT_NE(find_target(plan, t), nullptr) << t;
    EXPECT_EQ(find_target(plan, t)->total_ns, 1000u) << t;
  }
  EXPECT_EQ(plan.targets.size(), 7u);
  // Only the elementwise add is unmapped: 1,000 / 40,000.
  EXPECT_DOUBLE_EQ(plan.unmapped_share, 0.025);
  // At s = 4 the matmul gain is 1 / (0.4 + 0.15).
  Plan four = make_plan(aggregate_kernels(set.kernels), 4.0, 3);
  EXPECT_NEAR(four.targets[0].end_to_end_speedup, 1.0 / 0.55, 1e-12);
}

TEST(ProfileTrace, RankingTableShowsTopKernelsTargetsAndTotals) {
  TraceSet set = read_step();
  Plan plan = make_plan(aggregate_kernels(set.kernels), 2.0, set.processes.size());
  const std::string text = format_ranking(plan, 3);
  EXPECT_NE(text.find(kGemm), std::string::npos) << text;
  EXPECT_NE(text.find("40.00"), std::string::npos) << text;         // the GEMM's share %
  EXPECT_NE(text.find("1.250x"), std::string::npos) << text;
  EXPECT_NE(text.find("... 6 more kernels"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul"), std::string::npos) << text;
  EXPECT_NE(text.find("1.429x"), std::string::npos) << text;        // matmul at 2x
  EXPECT_NE(text.find("total GPU time 0.040 ms in 17 kernel launches (9 kernels, 3 processes)"),
            std::string::npos) << text;
  EXPECT_NE(text.find("mapped to kiln targets: 97.50%"), std::string::npos) << text;
  EXPECT_NE(text.find("1.951x end to end"), std::string::npos) << text;  // 1 / (0.025 + 0.4875)
  EXPECT_EQ(short_kernel_name("void at::native::foo<int, 4>(float*, int)", 80), "at::native::foo<int, 4>");
  EXPECT_EQ(short_kernel_name("abcdefghijkl", 8), "abcde...");
}

TEST(ProfileTrace, PlanRoundTripsThroughItsFile) {
  TraceSet set = read_step();
  Plan plan = make_plan(aggregate_kernels(set.kernels), 2.0, set.processes.size());
  plan.command = {"python3", "train.py", "--steps", "5"};
  testing::TempDir dir;
  const std::string path = dir.file("plan.json");
  ASSERT_TRUE(write_plan(plan, path).is_ok());
  Result<Plan> back = load_plan(path);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->command, plan.command);
  EXPECT_EQ(back->total_gpu_ns, 40000u);
  EXPECT_EQ(back->total_calls, 17u);
  EXPECT_DOUBLE_EQ(back->unmapped_share, plan.unmapped_share);
  ASSERT_EQ(back->targets.size(), plan.targets.size());
  for (size_t i = 0; i < plan.targets.size(); ++i) {
    EXPECT_EQ(back->targets[i].target, plan.targets[i].target);
    EXPECT_EQ(back->targets[i].total_ns, plan.targets[i].total_ns);
    EXPECT_DOUBLE_EQ(back->targets[i].share, plan.targets[i].share);
  }
  ASSERT_EQ(back->kernels.size(), 9u);
  EXPECT_EQ(back->kernels[0].name, kGemm);
  EXPECT_EQ(back->kernels[0].target, "matmul");
  const auto unmapped = std::find_if(back->kernels.begin(), back->kernels.end(),
                                     [](const PlanKernel& k) { return k.target.empty(); });
  ASSERT_NE(unmapped, back->kernels.end());
  EXPECT_NE(unmapped->name.find("CUDAFunctor_add"), std::string::npos);

  std::map<std::string, double> weights = target_weights(*back);
  EXPECT_EQ(weights.size(), 7u);
  EXPECT_DOUBLE_EQ(weights["matmul"], 0.6);
  EXPECT_DOUBLE_EQ(weights["flash_attention"], 0.175);
  EXPECT_EQ(weights.count("unmapped"), 0u);
}

// A valid minimal plan with one field replaced: the error must name the field.
std::string plan_error(const std::string& text) {
  Result<Plan> p = parse_plan(text, "p.json");
  return p.is_ok() ? "(accepted)" : p.status().message();
}

TEST(ProfileTrace, PlanValidationNamesTheBadField) {
  const std::string ok = R"({"kiln_plan": 1, "total_gpu_ns": 100,
      "targets": [{"target": "matmul", "share": 0.5, "total_ns": 50}]})";
  ASSERT_EQ(plan_error(ok), "(accepted)");
  EXPECT_NE(plan_error("{").find("p.json: not valid JSON"), std::string::npos);
  EXPECT_NE(plan_error("[]").find("expected an object"), std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 2, "total_gpu_ns": 1, "targets": []})").find("'kiln_plan'"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "targets": []})").find("'total_gpu_ns': missing"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 1})").find("'targets': missing"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [
      {"target": "matmul", "share": 1.7, "total_ns": 50}]})").find("'targets[0].share': expected a fraction"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [
      {"target": "matmul", "share": "half", "total_ns": 50}]})").find("'targets[0].share': expected a number"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [
      {"target": "matmul", "share": 0.5, "total_ns": 50},
      {"target": "matmul", "share": 0.1, "total_ns": 10}]})").find("'targets[1].target': 'matmul' is listed twice"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [
      {"target": "matmul", "share": 0.7, "total_ns": 70},
      {"target": "softmax", "share": 0.6, "total_ns": 20}]})").find("'targets': the shares add up to"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [
      {"target": "mat mul!", "share": 0.5, "total_ns": 50}]})").find("'targets[0].target'"),
            std::string::npos);
  // Names a target.json could not have (its "name" is an identifier) name no target either.
  for (const char* name : {"mat-mul", "2mm", "fused.mlp", "../matmul"}) {
    EXPECT_NE(plan_error(std::string(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [
      {"target": ")") + name +
                         R"(", "share": 0.5, "total_ns": 50}]})")
                  .find("'targets[0].target': expected a target name (an identifier"),
              std::string::npos)
        << name;
  }
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [
      {"target": "matmul", "share": 0.5, "total_ns": -5}]})").find("'targets[0].total_ns'"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [
      {"target": "matmul", "share": 0.5, "total_ns": 500}]})").find("more than total_gpu_ns"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "speedup": 0, "targets": []})").find("'speedup'"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [], "kernels": [
      {"name": "k", "calls": 1, "total_ns": 5}]})").find("'kernels[0].share': missing"),
            std::string::npos);
  // A misspelt key is an error, not ignored.
  EXPECT_NE(plan_error(R"({"kiln_plan": 1, "total_gpu_ns": 100, "targets": [], "speedupp": 3})").find("speedupp"),
            std::string::npos);
  EXPECT_NE(load_plan("/nonexistent/plan.json").status().message().find("/nonexistent/plan.json"),
            std::string::npos);
}

TEST(ProfileTrace, MissingFolderIsAnErrorAndAnEmptyOneIsEmpty) {
  EXPECT_FALSE(read_trace_dir("/nonexistent/traces").is_ok());
  testing::TempDir dir;
  Result<TraceSet> set = read_trace_dir(dir.path());
  ASSERT_TRUE(set.is_ok());
  EXPECT_TRUE(set->kernels.empty());
  EXPECT_TRUE(set->processes.empty());
}

// Trace files are input anyone can write: a record that claims more than a day is refused, and
// the sums of durations saturate rather than wrap (a wrapped sum would rank the kernel last).
TEST(ProfileTrace, ADurationOverADayIsRefusedAndSumsSaturate) {
  testing::TempDir dir;
  dir.write("t.jsonl",
            "{\"kind\":\"process\",\"version\":1,\"pid\":1}\n"
            "{\"kind\":\"kernel\",\"name\":\"k\",\"start_ns\":0,\"end_ns\":9223372036854775808}\n"
            "{\"kind\":\"kernel\",\"name\":\"k\",\"start_ns\":1,\"end_ns\":86400000000001}\n"
            "{\"kind\":\"end\"}\n");
  Result<TraceSet> set = read_trace_dir(dir.path());
  ASSERT_TRUE(set.is_ok());
  ASSERT_EQ(set->kernels.size(), 1u);  // exactly a day is allowed
  ASSERT_EQ(set->warnings.size(), 1u) << ::testing::PrintToString(set->warnings);
  EXPECT_NE(
      set->warnings[0].find(":2: end_ns - start_ns is 9223372036854775808 ns, more than a day"),
      std::string::npos)
      << set->warnings[0];

  EXPECT_EQ(add_ns(1, 2), 3u);
  EXPECT_EQ(add_ns(UINT64_MAX - 1, 2), UINT64_MAX);
  KernelRecord big;
  big.name = "big";
  big.end_ns = uint64_t{1} << 63;
  KernelRecord small;
  small.name = "small";
  small.end_ns = 10;
  std::vector<KernelStat> stats = aggregate_kernels({big, big, big, small});
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].name, "big");  // still ranked first
  EXPECT_EQ(stats[0].total_ns, UINT64_MAX);
  EXPECT_EQ(total_gpu_ns(stats), UINT64_MAX);
}

TEST(ProfileTrace, RejectsKernelLinesWithBadFields) {
  testing::TempDir dir;
  dir.write("t.jsonl",
            "{\"kind\":\"process\",\"version\":1,\"pid\":1}\n"
            "{\"kind\":\"kernel\",\"name\":\"k\",\"start_ns\":10,\"end_ns\":5}\n"
            "{\"kind\":\"kernel\",\"name\":\"\",\"start_ns\":1,\"end_ns\":5}\n"
            "{\"kind\":\"kernel\",\"name\":\"k\",\"start_ns\":-1,\"end_ns\":5}\n"
            "{\"kind\":\"kernel\",\"name\":\"k\",\"start_ns\":1,\"end_ns\":5,\"grid\":[1,2]}\n"
            "{\"kind\":\"sample\"}\n"
            "[1,2]\n"
            "{\"kind\":\"kernel\",\"name\":\"k\",\"start_ns\":1,\"end_ns\":5,\"future_field\":true}\n"
            "{\"kind\":\"end\"}\n");
  Result<TraceSet> set = read_trace_dir(dir.path());
  ASSERT_TRUE(set.is_ok());
  ASSERT_EQ(set->kernels.size(), 1u);  // only the last kernel line; unknown fields are allowed
  EXPECT_EQ(set->kernels[0].duration_ns(), 4u);
  ASSERT_EQ(set->warnings.size(), 6u) << ::testing::PrintToString(set->warnings);
  EXPECT_NE(set->warnings[0].find("t.jsonl:2: end_ns 5 is before start_ns 10"), std::string::npos);
  EXPECT_NE(set->warnings[1].find(":3: field 'name': empty"), std::string::npos);
  EXPECT_NE(set->warnings[2].find(":4: field 'start_ns'"), std::string::npos);
  EXPECT_NE(set->warnings[3].find(":5: field 'grid'"), std::string::npos);
  EXPECT_NE(set->warnings[4].find(":6: unknown kind 'sample'"), std::string::npos);
  EXPECT_NE(set->warnings[5].find(":7: not a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace kiln::profile
