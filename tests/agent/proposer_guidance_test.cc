// Tests of the built-in proposer's profile guidance: a parent's bottleneck class picks the
// playbook tier and the direction of the mutation; without a known class the proposer behaves
// exactly as before.
#include <gtest/gtest.h>

#include <random>

#include "agent/builtin_proposer.h"
#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln::agent {
namespace {

KernelSpec spec_of(std::map<std::string, std::vector<int64_t>> space) {
  KernelSpec spec;
  spec.kernel_name = "synthetic";
  spec.space = std::move(space);
  return spec;
}

const Shape kGuidanceShape = {{"M", 1024}, {"N", 4096}};

BuiltinProposerOptions no_random_operators() {
  BuiltinProposerOptions o;
  o.crossover_probability = 0;
  o.switch_probability = 0;
  o.far_step_probability = 0;
  return o;
}

TEST(ProposerGuidance, ClassesPickTheirTierAndDirection) {
  KernelSpec spec = spec_of({{"BLOCK", {64, 128, 256, 512}},
                             {"VEC", {1, 2, 4, 8}},
                             {"STAGES", {2, 3, 4}},
                             {"IMPL", {0, 1}}});
  BuiltinProposer p(spec, kGuidanceShape, DType::kF16);
  Guidance far = p.guidance_for("memory_far_from_peak");
  EXPECT_EQ(far.tier, 1);  // memory access
  EXPECT_EQ(far.direction, 1);
  EXPECT_NE(far.move.find("wider loads"), std::string::npos);
  Guidance spill = p.guidance_for("spilling");
  EXPECT_EQ(spill.tier, 1);
  EXPECT_EQ(spill.direction, -1);
  Guidance occupancy = p.guidance_for("occupancy");
  EXPECT_EQ(occupancy.tier, 0);  // smaller blocks
  EXPECT_EQ(occupancy.direction, -1);
  EXPECT_EQ(p.guidance_for("compute").tier, 2);
  for (const char* none : {"", "unknown", "memory-bound"}) EXPECT_EQ(p.guidance_for(none).tier, -1);
}

TEST(ProposerGuidance, AClassWhoseFirstTierIsEmptyFallsToItsNextMove) {
  // No memory-access parameter: memory far from peak goes to its next hint (more rows per block).
  KernelSpec spec = spec_of({{"BLOCK", {64, 128, 256}}, {"STAGES", {2, 3}}});
  BuiltinProposer p(spec, kGuidanceShape, DType::kF16);
  Guidance g = p.guidance_for("memory_far_from_peak");
  EXPECT_EQ(g.tier, 0);
  EXPECT_EQ(g.direction, 1);
  // Custom tiers: the playbook's tier numbers mean nothing there.
  BuiltinProposerOptions custom;
  custom.tiers = {{"STAGES"}, {"BLOCK"}};
  BuiltinProposer q(spec, kGuidanceShape, DType::kF16, custom);
  EXPECT_EQ(q.guidance_for("memory_far_from_peak").tier, -1);
}

TEST(ProposerGuidance, MemoryFarFromPeakWidensLoadsAndSaysWhy) {
  KernelSpec spec = spec_of({{"BLOCK", {64, 128, 256, 512}}, {"VEC", {1, 2, 4, 8}}});
  BuiltinProposer p(spec, kGuidanceShape, DType::kF16, no_random_operators());
  const Params parent = {{"BLOCK", "128"}, {"VEC", "2"}};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    Proposal child = p.propose_guided(parent, nullptr, "memory_far_from_peak", {}, rng);
    ASSERT_FALSE(child.empty()) << child.reason;
    EXPECT_EQ(child.params.at("VEC"), "4") << child.description;  // one step wider
    EXPECT_EQ(child.params.at("BLOCK"), "128");
    EXPECT_EQ(child.tier, 1);
    EXPECT_NE(child.description.find("; guided by memory_far_from_peak: wider loads"),
              std::string::npos)
        << child.description;
    EXPECT_EQ(child.guided_by, "memory_far_from_peak");
  }
}

TEST(ProposerGuidance, SpillingHoldsLessPerThreadOnTheRealRmsnormTemplate) {
  Result<TargetSpec> t = testing::load_builtin_target("rmsnorm");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  const BackendSpec* cuda = t->backend("cuda");
  ASSERT_TRUE(cuda != nullptr && cuda->tunable);
  BuiltinProposer p(*cuda->tunable, t->benchmark_for("cuda"), cuda->dtypes.front(),
                    no_random_operators());
  // BLOCK * ELEMS == 8192 with one row per block: fewer elements per thread needs a repair. WREG
  // and HINT are at their lowest, so ELEMS is the memory-access parameter that can go down.
  Params parent = cuda->tunable->defines;
  parent.insert({{"BLOCK", "256"}, {"ELEMS", "32"}, {"ROWS", "1"}, {"WREG", "0"}, {"HINT", "0"}});
  ASSERT_TRUE(p.valid(parent));
  std::mt19937_64 rng(3);
  Proposal child = p.propose_guided(parent, nullptr, "spilling", {}, rng);
  ASSERT_FALSE(child.empty()) << child.reason;
  EXPECT_TRUE(p.valid(child.params)) << child.description;
  EXPECT_LT(std::stoi(child.params.at("ELEMS")), 32) << child.description;
  EXPECT_NE(child.description.find("guided by spilling"), std::string::npos) << child.description;
}

TEST(ProposerGuidance, WithoutAKnownClassItIsExactlyPropose) {
  KernelSpec spec =
      spec_of({{"BLOCK", {64, 128, 256, 512}}, {"VEC", {1, 2, 4, 8}}, {"IMPL", {0, 1}}});
  const Params parent = {{"BLOCK", "128"}, {"VEC", "2"}, {"IMPL", "0"}};
  const Params second = {{"BLOCK", "256"}, {"VEC", "8"}, {"IMPL", "1"}};
  for (const char* bottleneck : {"", "unknown", "not-a-class"}) {
    BuiltinProposer plain(spec, kGuidanceShape, DType::kF16);
    BuiltinProposer guided(spec, kGuidanceShape, DType::kF16);
    std::mt19937_64 rng_a(42), rng_b(42);
    for (int i = 0; i < 30; ++i) {
      Proposal a = plain.propose(parent, &second, {}, rng_a);
      Proposal b = guided.propose_guided(parent, &second, bottleneck, {}, rng_b);
      EXPECT_EQ(a.params, b.params) << bottleneck << " #" << i;
      EXPECT_EQ(a.description, b.description);
      EXPECT_EQ(b.guided_by, "");
    }
  }
}

}  // namespace
}  // namespace kiln::agent
