// Shapes of a profiled program's kernels from the NVTX ranges they were launched in
// (evaluator/profile/op_shapes.h), into the plan (add_plan_shapes) and back out of plan.json, on
// the hand-written trace tests/data/profile_trace/nvtx (its notes.txt works out the numbers).
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "evaluator/profile/op_shapes.h"
#include "evaluator/profile/plan.h"
#include "evaluator/profile/plan_table.h"
#include "evaluator/profile/trace.h"
#include "evaluator/profile/trace_targets.h"
#include "tests/evaluator/plan_lookup.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln::profile {
namespace {

TEST(ProfileShapes, ParsesPyTorchRangeTexts) {
  auto r = parse_range_op(
      "aten::addmm, seq = 3, op_id = 7, sizes = [[6144], [128, 4096], [4096, 6144]], "
      "input_op_ids = [(5, 0)]");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->op, "aten::addmm");
  ASSERT_EQ(r->sizes.size(), 3u);
  EXPECT_EQ(r->sizes[0], (std::vector<int64_t>{6144}));
  EXPECT_EQ(r->sizes[2], (std::vector<int64_t>{4096, 6144}));
  // Non-tensor inputs are [] and keep their place.
  r = parse_range_op("aten::_fused_rms_norm, seq = 1, sizes = [[2, 64, 4096], [4096], [], []]");
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->sizes.size(), 4u);
  EXPECT_TRUE(r->sizes[3].empty());
  // No sizes, torn or malformed lists: nothing.
  for (const char* bad : {"aten::linear, op_id = 30", "aten::mm, sizes = [[128, 4096], [4096",
                          "aten::mm, sizes = [[128, -1]]", "aten::mm, sizes = [[128 4096]]",
                          "aten::mm, sizes = [[99999999999999999999]]", "", "sizes = "}) {
    EXPECT_FALSE(parse_range_op(bad).has_value()) << bad;
  }
}

TEST(ProfileShapes, MapsTheOperatorsOfEachTargetToItsDims) {
  using S = Shape;
  EXPECT_EQ(shape_from_range("matmul", "aten::mm, seq = 1, sizes = [[128, 4096], [4096, 6144]]"),
            (S{{"M", 128}, {"N", 6144}, {"K", 4096}}));
  EXPECT_EQ(shape_from_range("matmul", "aten::addmm, sizes = [[6144], [128, 4096], [4096, 6144]]"),
            (S{{"M", 128}, {"N", 6144}, {"K", 4096}}));
  EXPECT_EQ(shape_from_range("rmsnorm", "aten::rms_norm, sizes = [[2, 64, 4096], [4096], []]"),
            (S{{"M", 128}, {"N", 4096}}));
  EXPECT_EQ(shape_from_range("layernorm", "aten::native_layer_norm, sizes = [[8, 1024], [1024]]"),
            (S{{"M", 8}, {"N", 1024}}));
  EXPECT_EQ(shape_from_range("softmax", "aten::_softmax, sizes = [[4, 32, 2048], [], []]"),
            (S{{"M", 128}, {"N", 2048}}));
  EXPECT_EQ(shape_from_range("rmsnorm", "aten::rms_norm, sizes = [[4096], [4096], []]"),
            (S{{"M", 1}, {"N", 4096}}));
  // A cross-entropy loss's pieces: logits [..., V].
  EXPECT_EQ(
      shape_from_range("cross_entropy", "aten::_log_softmax, sizes = [[4, 2048, 128256], [], []]"),
      (S{{"M", 8192}, {"V", 128256}}));
  EXPECT_EQ(
      shape_from_range("cross_entropy",
                       "aten::nll_loss_forward, sizes = [[8192, 128256], [8192], [], [], []]"),
      (S{{"M", 8192}, {"V", 128256}}));
  // Inner dims that disagree, batched GEMMs, another target's operator, sizes past 2^31: nothing.
  for (auto [target, text] : std::vector<std::pair<const char*, const char*>>{
           {"matmul", "aten::mm, sizes = [[128, 4096], [2048, 6144]]"},
           {"matmul", "aten::bmm, sizes = [[8, 128, 64], [8, 64, 128]]"},
           {"matmul", "aten::rms_norm, sizes = [[128, 4096], [4096], []]"},
           {"softmax", "aten::addmm, sizes = [[6144], [128, 4096], [4096, 6144]]"},
           {"rmsnorm", "aten::rms_norm, sizes = [[65536, 65536, 4096], [4096], []]"},
           {"rmsnorm", "aten::rms_norm, sizes = [[], [4096], []]"},
           {"flash_attention",
            "aten::_scaled_dot_product_flash_attention, sizes = [[1, 32, 2048, 128]]"}}) {
    EXPECT_FALSE(shape_from_range(target, text).has_value()) << target << ": " << text;
  }
}

// The operator decides the target where the range names one: PyTorch runs aten::rms_norm on its
// layer-norm kernel, and that time and shape are rmsnorm's; the same kernel in a layer_norm range
// stays layernorm's, and one outside any operator kiln computes goes by its name.
TEST(ProfileShapes, TheRangesOperatorDecidesTheTargetOverTheKernelsName) {
  EXPECT_EQ(target_of_range("aten::addmm, sizes = [[6144], [128, 4096], [4096, 6144]]"), "matmul");
  EXPECT_EQ(target_of_range("aten::_fused_rms_norm, sizes = [[2, 64, 4096], [4096], []]"),
            "rmsnorm");
  EXPECT_EQ(target_of_range("aten::add, sizes = [[128, 4096], [128, 4096], []]"), "");
  EXPECT_EQ(target_of_range("aten::linear, op_id = 30"), "");  // no sizes: no operator to trust
  EXPECT_EQ(map_launch_to_target("vectorized_layer_norm_kernel",
                                 "aten::rms_norm, sizes = [[4, 4096], [4096], []]"),
            "rmsnorm");
  EXPECT_EQ(
      map_launch_to_target("vectorized_layer_norm_kernel", "aten::add, sizes = [[4], [4], []]"),
      "layernorm");
  EXPECT_EQ(map_launch_to_target("vectorized_layer_norm_kernel", ""), "layernorm");

  auto launch = [](std::string range, uint64_t ns) {
    KernelRecord k;
    k.name =
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>()";
    k.end_ns = ns;
    k.range = std::move(range);
    return k;
  };
  const std::vector<KernelRecord> kernels = {
      launch("aten::rms_norm, seq = 1, sizes = [[2, 64, 4096], [4096], []]", 700),
      launch("aten::rms_norm, seq = 2, sizes = [[2, 64, 4096], [4096], []]", 700),
      launch("aten::layer_norm, seq = 3, sizes = [[8, 1024], [1024], [1024], []]", 500)};
  const std::vector<KernelStat> stats = aggregate_kernels(kernels);
  ASSERT_EQ(stats.size(), 2u);  // one kernel, two operators: a row each
  EXPECT_EQ(stats[0].target, "rmsnorm");
  EXPECT_EQ(stats[0].calls, 2u);
  EXPECT_EQ(stats[1].target, "layernorm");
  Plan plan = make_plan(stats, 2.0, 1);
  EXPECT_EQ(add_plan_shapes(kernels, &plan), 3u);
  const PlanTarget* rms = find_target(plan, "rmsnorm");
  ASSERT_NE(rms, nullptr);
  EXPECT_EQ(rms->total_ns, 1400u);
  ASSERT_EQ(rms->shapes.size(), 1u);
  EXPECT_EQ(rms->shapes[0].shape, (Shape{{"M", 128}, {"N", 4096}}));
  EXPECT_EQ(rms->shapes[0].calls, 2u);
  const PlanTarget* ln = find_target(plan, "layernorm");
  ASSERT_NE(ln, nullptr);
  ASSERT_EQ(ln->shapes.size(), 1u);
  EXPECT_EQ(ln->shapes[0].shape, (Shape{{"M", 8}, {"N", 1024}}));
}

Plan nvtx_plan(uint64_t* with_range) {
  Result<TraceSet> set = read_trace_dir(testing::source_root() + "/tests/data/profile_trace/nvtx");
  EXPECT_TRUE(set.is_ok()) << set.status().to_string();
  if (!set.is_ok()) return {};
  EXPECT_TRUE(set->warnings.empty()) << set->warnings.front();
  Plan plan = make_plan(aggregate_kernels(set->kernels), 2.0, set->processes.size());
  *with_range = add_plan_shapes(set->kernels, &plan);
  return plan;
}

TEST(ProfileShapes, ThePlanHoldsEachTargetsShapesWithTheirCallsAndTime) {
  uint64_t with_range = 0;
  Plan plan = nvtx_plan(&with_range);
  EXPECT_EQ(with_range, 6u);
  const PlanTarget* mm = find_target(plan, "matmul");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->total_ns, 18000u);
  ASSERT_EQ(mm->shapes.size(), 2u);  // most time first
  EXPECT_EQ(mm->shapes[0].shape, (Shape{{"M", 512}, {"N", 4096}, {"K", 14336}}));
  EXPECT_EQ(mm->shapes[0].calls, 1u);
  EXPECT_EQ(mm->shapes[0].total_ns, 10000u);
  EXPECT_EQ(mm->shapes[1].shape, (Shape{{"M", 128}, {"N", 6144}, {"K", 4096}}));
  EXPECT_EQ(mm->shapes[1].calls, 2u);
  EXPECT_EQ(mm->shapes[1].total_ns, 6000u);
  const PlanTarget* rms = find_target(plan, "rmsnorm");
  ASSERT_NE(rms, nullptr);
  ASSERT_EQ(rms->shapes.size(), 1u);
  EXPECT_EQ(rms->shapes[0].shape, (Shape{{"M", 128}, {"N", 4096}}));

  const std::string text = format_shapes(plan, with_range, 7);
  EXPECT_NE(text.find("6 of 7 kernel launches"), std::string::npos) << text;
  EXPECT_NE(text.find("K=14336,M=512,N=4096"), std::string::npos) << text;
  EXPECT_NE(format_shapes(Plan{}, 0, 7).find("emit_nvtx(record_shapes=True)"), std::string::npos);

  // Through plan.json and back.
  Result<Plan> back = parse_plan(plan_to_json(plan), "plan.json");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  const PlanTarget* mm2 = find_target(*back, "matmul");
  ASSERT_NE(mm2, nullptr);
  ASSERT_EQ(mm2->shapes.size(), 2u);
  EXPECT_EQ(mm2->shapes[1].shape, mm->shapes[1].shape);
  EXPECT_EQ(mm2->shapes[1].calls, 2u);
  EXPECT_EQ(mm2->shapes[1].total_ns, 6000u);
}

TEST(ProfileShapes, APlansShapesAreReadStrictly) {
  uint64_t with_range = 0;
  nlohmann::json j = nlohmann::json::parse(plan_to_json(nvtx_plan(&with_range)));
  size_t mm = 0;
  while (j["targets"][mm]["target"] != "matmul") ++mm;
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& why) {
    nlohmann::json bad = j;
    edit(bad["targets"][mm]);
    Result<Plan> p = parse_plan(bad.dump(), "plan.json");
    ASSERT_FALSE(p.is_ok()) << why;
    EXPECT_NE(p.status().message().find(why), std::string::npos) << p.status().message();
  };
  refused([](nlohmann::json& t) { t["shapes"] = 3; },
          "field 'targets[0].shapes': expected an array");
  refused([](nlohmann::json& t) { t["shapes"][0]["shape"]["M"] = 0; },
          "expected a positive integer");
  refused([](nlohmann::json& t) { t["shapes"][0]["shape"] = nlohmann::json::object(); },
          "expected an object of dim -> size");
  refused([](nlohmann::json& t) { t["shapes"][1] = t["shapes"][0]; }, "is listed twice");
  refused([](nlohmann::json& t) { t["shapes"][0]["total_ns"] = 1u << 30; },
          "more than the target's");
  refused([](nlohmann::json& t) { t["shapes"][0]["rows"] = 1; }, "rows");
}

}  // namespace
}  // namespace kiln::profile
