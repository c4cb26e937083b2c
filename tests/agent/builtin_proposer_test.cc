#include "agent/builtin_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "cli/sweep.h"
#include "evaluator/evaluation.h"
#include "tests/support/test_env.h"

namespace kiln::agent {
namespace {

// The caller's record of evaluated configurations, as the search keeps it.
struct SeenSet {
  std::set<Params> configs;
  SeenFn fn() const {
    return [this](const Params& p) { return configs.count(p) > 0; };
  }
};

KernelSpec synthetic(std::map<std::string, std::vector<int64_t>> space,
                     std::vector<std::string> constraints = {}) {
  KernelSpec spec;
  spec.kernel_name = "synthetic";
  spec.space = std::move(space);
  spec.constraints = std::move(constraints);
  return spec;
}

const Shape kShape = {{"M", 1024}, {"N", 4096}};

int index_of(const KernelSpec& spec, const std::string& name, const std::string& value) {
  const auto& list = spec.space.at(name);
  auto it = std::find(list.begin(), list.end(), std::stoll(value));
  return it == list.end() ? -1 : static_cast<int>(it - list.begin());
}

// Names of the parameters whose values differ.
std::vector<std::string> changed(const Params& a, const Params& b) {
  std::vector<std::string> out;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end() || it->second != v) out.push_back(k);
  }
  return out;
}

struct RealTemplate {
  TargetSpec target;
  const KernelSpec* spec = nullptr;
  Shape shape;
  DType dtype = DType::kF16;
};

RealTemplate load_real(const std::string& name) {
  RealTemplate r;
  Result<TargetSpec> t = testing::load_builtin_target(name);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  if (!t.is_ok()) return r;
  r.target = std::move(*t);
  const BackendSpec* cuda = r.target.backend("cuda");
  EXPECT_NE(cuda, nullptr);
  if (cuda == nullptr || !cuda->tunable) return r;
  r.spec = &*cuda->tunable;
  r.shape = r.target.benchmark_for("cuda");
  r.dtype = cuda->dtypes.front();
  return r;
}

TEST(BuiltinProposer, DefaultTiersClassifyByWellKnownNames) {
  RealTemplate matmul = load_real("matmul");
  ASSERT_NE(matmul.spec, nullptr);
  Tiers t = default_tiers(*matmul.spec);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0], (std::vector<std::string>{"BM", "BN"}));
  EXPECT_EQ(t[1], (std::vector<std::string>{"GROUP_M"}));  // the rasterization order: L2 reuse
  EXPECT_EQ(t[2], (std::vector<std::string>{"BK", "SK", "STAGES", "WM", "WN"}));
  EXPECT_EQ(t[3], (std::vector<std::string>{"IMPL", "TMA"}));
  EXPECT_EQ(t[4], (std::vector<std::string>{"CL", "PERS"}));  // names the playbook does not know

  RealTemplate reduce = load_real("reduce");
  ASSERT_NE(reduce.spec, nullptr);
  t = default_tiers(*reduce.spec);
  EXPECT_EQ(t[0], (std::vector<std::string>{"BLOCK", "TPR"}));
  EXPECT_EQ(t[1], (std::vector<std::string>{"CHUNK", "HINT", "UNROLL"}));
  EXPECT_EQ(t[2], (std::vector<std::string>{"STAGES"}));
  // GRID picks the launch structure (a persistent grid or one block per row): a variant, not a
  // block size that guidance may push up or down.
  EXPECT_EQ(t[3], (std::vector<std::string>{"GRID", "TMA"}));

  t = default_tiers(synthetic({{"BLOCK", {1, 2}}, {"RM", {1, 2}}, {"G", {0, 1}}}));
  EXPECT_EQ(t[0], (std::vector<std::string>{"BLOCK"}));
  EXPECT_EQ(t[3], (std::vector<std::string>{"G"}));
  EXPECT_EQ(t[4], (std::vector<std::string>{"RM"}));  // unknown names: the last tier
  EXPECT_EQ(default_tier_name(0), "block size");
  EXPECT_EQ(default_tier_name(3), "advanced");
}

TEST(BuiltinProposer, CustomTiersDropUnknownNamesAndAppendUnlistedOnes) {
  KernelSpec spec = synthetic({{"A", {1, 2}}, {"B", {1, 2}}, {"C", {1, 2}}});
  BuiltinProposerOptions options;
  options.tiers = {{"C", "NOPE"}, {"A", "C"}};
  BuiltinProposer proposer(spec, kShape, DType::kF32, options);
  EXPECT_EQ(proposer.tiers(), (Tiers{{"C"}, {"A"}, {"B"}}));
  EXPECT_TRUE(proposer.structural().empty());
}

TEST(BuiltinProposer, MutationChangesExactlyOneParameterToANeighbour) {
  KernelSpec spec = synthetic({{"BLOCK", {64, 128, 256, 512, 1024}},
                               {"VEC", {1, 2, 4, 8}},
                               {"STAGES", {2, 3, 4, 5}},
                               {"IMPL", {0, 1, 2}}});
  BuiltinProposer proposer(spec, kShape, DType::kF16);
  std::mt19937_64 rng(42), pick(7);
  int near = 0, far = 0;
  for (int i = 0; i < 300; ++i) {
    Params parent;
    for (const auto& [name, values] : spec.space) {
      parent[name] = std::to_string(values[pick() % values.size()]);
    }
    Proposal p = proposer.mutate(parent, {}, rng);
    ASSERT_FALSE(p.empty()) << p.reason;
    EXPECT_EQ(p.operator_name, "mutate");
    std::vector<std::string> diff = changed(parent, p.params);
    ASSERT_EQ(diff.size(), 1u) << p.description;
    const std::string& name = diff[0];
    int distance = std::abs(index_of(spec, name, p.params.at(name)) -
                            index_of(spec, name, parent.at(name)));
    EXPECT_TRUE(distance == 1 || distance == 2) << p.description;
    (distance == 1 ? near : far)++;
    // The parameter comes from the current tier (nothing reported: the proposer stays in tier 0).
    EXPECT_EQ(name, "BLOCK") << p.description;
    EXPECT_EQ(p.tier, 0);
    EXPECT_EQ(p.description.rfind("mutate BLOCK " + parent.at("BLOCK") + "->" +
                                      p.params.at("BLOCK") + " (tier 0: block size)", 0),
              0u)
        << p.description;
  }
  EXPECT_GT(near, far);  // mostly one place along the list
  EXPECT_GT(far, 0);     // now and then two
}

TEST(BuiltinProposer, MutationRepairsAnInvalidNeighbourMinimally) {
  KernelSpec spec = synthetic({{"BLOCK", {64, 128, 256}}, {"ELEMS", {4, 8, 16}}, {"HINT", {0, 1}}},
                              {"BLOCK * ELEMS == 1024"});
  BuiltinProposer proposer(spec, kShape, DType::kF16);
  Params parent = {{"BLOCK", "128"}, {"ELEMS", "8"}, {"HINT", "0"}};
  SeenSet seen;
  seen.configs.insert(parent);
  std::mt19937_64 rng(3);
  Proposal p = proposer.mutate(parent, seen.fn(), rng);
  ASSERT_FALSE(p.empty()) << p.reason;
  EXPECT_EQ(p.tier, 0);
  // BLOCK moves; ELEMS follows to keep BLOCK * ELEMS == 1024; HINT is left alone.
  if (p.params.at("BLOCK") == "256") {
    EXPECT_EQ(p.params.at("ELEMS"), "4");
    EXPECT_EQ(p.description, "mutate BLOCK 128->256 (tier 0: block size); repair ELEMS 8->4");
  } else {
    EXPECT_EQ(p.params.at("BLOCK"), "64");
    EXPECT_EQ(p.params.at("ELEMS"), "16");
    EXPECT_EQ(p.description, "mutate BLOCK 128->64 (tier 0: block size); repair ELEMS 8->16");
  }
  EXPECT_EQ(p.params.at("HINT"), "0");
}

TEST(BuiltinProposer, EveryProposalOnRealTemplatesSatisfiesTheConstraintsAndIsNew) {
  for (const char* name : {"matmul", "softmax", "reduce", "rmsnorm", "layernorm",
                           "rotary_embedding", "cross_entropy"}) {
    SCOPED_TRACE(name);
    RealTemplate real = load_real(name);
    ASSERT_NE(real.spec, nullptr);
    auto all = cli::template_configs(*real.spec, real.shape, real.dtype, 0, 1);
    ASSERT_FALSE(all.empty());
    BuiltinProposer proposer(*real.spec, real.shape, real.dtype);
    SeenSet seen;
    std::vector<Params> evaluated = {all.front()};
    seen.configs.insert(all.front());
    std::mt19937_64 rng(11);
    std::map<std::string, int> operators;
    for (int i = 0; i < 150; ++i) {
      const Params& parent = evaluated[rng() % evaluated.size()];
      const Params& other = evaluated[rng() % evaluated.size()];
      Proposal p = proposer.propose(parent, &other, seen.fn(), rng);
      if (p.empty()) {
        EXPECT_EQ(seen.configs.size(), all.size()) << p.reason;  // only when nothing is left
        break;
      }
      Result<bool> ok = eval::satisfies_constraints(*real.spec, real.shape, real.dtype, p.params);
      ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
      EXPECT_TRUE(*ok) << p.description << ": " << cli::format_params(p.params);
      EXPECT_TRUE(seen.configs.insert(p.params).second) << p.description;
      EXPECT_FALSE(p.description.empty());
      ++operators[p.operator_name];
      proposer.report(p.params, rng() % 4 == 0);
      evaluated.push_back(p.params);
    }
    EXPECT_GT(operators["mutate"], 0);
  }
}

// Proposals fed back into the seen set never repeat, reach every valid configuration and then
// stop with the reason.
void expect_exhausts(const KernelSpec& spec, const Shape& shape, DType dtype, bool walk) {
  auto all = cli::template_configs(spec, shape, dtype, 0, 1);
  ASSERT_GT(all.size(), 1u);
  BuiltinProposer proposer(spec, shape, dtype);
  SeenSet seen;
  std::vector<Params> evaluated = {all[all.size() / 2]};
  seen.configs.insert(evaluated.front());
  std::mt19937_64 rng(5);
  size_t proposals = 0;
  Proposal p;
  while (proposals <= all.size()) {
    const Params& parent = walk ? evaluated[rng() % evaluated.size()] : evaluated.front();
    p = proposer.mutate(parent, seen.fn(), rng);
    if (p.empty()) break;
    ++proposals;
    ASSERT_TRUE(proposer.valid(p.params)) << p.description;
    ASSERT_TRUE(seen.configs.insert(p.params).second) << "duplicate: " << p.description;
    proposer.report(p.params, false);
    evaluated.push_back(p.params);
  }
  EXPECT_EQ(proposals, all.size() - 1);
  EXPECT_EQ(std::set<Params>(all.begin(), all.end()), seen.configs);
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.reason, "space exhausted around parent");
  EXPECT_TRUE(p.operator_name.empty());
}

// The proposer checks constraints with a program parsed once; over whole real spaces it must
// agree with satisfies_constraints (which parses per call) on every combination.
TEST(BuiltinProposer, ItsConstraintCheckAgreesWithSatisfiesConstraintsOnEveryCombination) {
  for (const char* name : {"layernorm", "rotary_embedding", "rmsnorm"}) {
    SCOPED_TRACE(name);
    RealTemplate real = load_real(name);
    ASSERT_NE(real.spec, nullptr);
    BuiltinProposer proposer(*real.spec, real.shape, real.dtype);
    size_t valid = 0, all = 0, disagree = 0;
    eval::for_each_combination(*real.spec, [&](const Params& p) {
      Result<bool> expected = eval::satisfies_constraints(*real.spec, real.shape, real.dtype, p);
      EXPECT_TRUE(expected.is_ok()) << expected.status().to_string();
      const bool want = expected.is_ok() && *expected;
      if (proposer.valid(p) != want && ++disagree <= 3) ADD_FAILURE() << "disagree on " << cli::format_params(p);
      valid += want;
      ++all;
      return true;
    });
    EXPECT_EQ(disagree, 0u);
    EXPECT_GT(valid, 0u);
    EXPECT_LT(valid, all);  // the constraints do rule configurations out
  }
}

TEST(BuiltinProposer, NoDuplicatesUntilTheSyntheticSpaceIsExhausted) {
  KernelSpec spec = synthetic({{"BLOCK", {64, 128, 256, 512}},
                               {"VEC", {1, 2, 4, 8}},
                               {"STAGES", {2, 3}},
                               {"IMPL", {0, 1}}},
                              {"BLOCK * VEC <= 2048", "IMPL == 0 || STAGES == 3"});
  expect_exhausts(spec, kShape, DType::kF16, /*walk=*/false);
  expect_exhausts(spec, kShape, DType::kF16, /*walk=*/true);
}

TEST(BuiltinProposer, NoDuplicatesUntilRealSpacesAreExhausted) {
  for (const char* name : {"softmax", "reduce", "cross_entropy", "rotary_embedding"}) {
    SCOPED_TRACE(name);
    RealTemplate real = load_real(name);
    ASSERT_NE(real.spec, nullptr);
    expect_exhausts(*real.spec, real.shape, real.dtype, /*walk=*/false);
    expect_exhausts(*real.spec, real.shape, real.dtype, /*walk=*/true);
  }
}

TEST(BuiltinProposer, MovesToTheNextTierWhenPatienceRunsOut) {
  // Seven values each, parent in the middle: every tier has four moves (+-1, +-2) to offer.
  const std::vector<int64_t> seven = {1, 2, 3, 4, 5, 6, 7};
  KernelSpec spec = synthetic({{"BLOCK", seven}, {"VEC", seven}, {"STAGES", seven}, {"IMPL", seven}});
  BuiltinProposerOptions options;
  options.tier_patience = 3;
  BuiltinProposer proposer(spec, kShape, DType::kF32, options);
  const Params parent = {{"BLOCK", "4"}, {"VEC", "4"}, {"STAGES", "4"}, {"IMPL", "4"}};
  SeenSet seen;
  seen.configs.insert(parent);
  std::mt19937_64 rng(9);
  const std::vector<std::string> order = {"BLOCK", "VEC", "STAGES", "IMPL"};
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(proposer.current_tier(), round);
      Proposal p = proposer.mutate(parent, seen.fn(), rng);
      ASSERT_FALSE(p.empty()) << p.reason;
      EXPECT_EQ(p.tier, round) << p.description;
      EXPECT_EQ(changed(parent, p.params), std::vector<std::string>{order[round]}) << p.description;
      seen.configs.insert(p.params);
      proposer.report(p.params, false);
    }
  }
  // Tier 4 ("other") is empty: back to block size.
  EXPECT_EQ(proposer.current_tier(), 0);
  Proposal p = proposer.mutate(parent, seen.fn(), rng);
  EXPECT_EQ(changed(parent, p.params), std::vector<std::string>{"BLOCK"}) << p.description;
}

TEST(BuiltinProposer, ReplayingProposalsAndReportsRestoresTheTier) {
  // A coordinator restart rebuilds the proposer from the search log: each logged child with its
  // operator, then its report, in log order.
  const std::vector<int64_t> seven = {1, 2, 3, 4, 5, 6, 7};
  KernelSpec spec = synthetic({{"BLOCK", seven}, {"VEC", seven}, {"STAGES", seven}, {"IMPL", seven}});
  BuiltinProposerOptions options;
  options.tier_patience = 3;
  BuiltinProposer live(spec, kShape, DType::kF32, options);
  BuiltinProposer rebuilt(spec, kShape, DType::kF32, options);
  const Params parent = {{"BLOCK", "4"}, {"VEC", "4"}, {"STAGES", "4"}, {"IMPL", "4"}};
  SeenSet seen;
  seen.configs.insert(parent);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 7; ++i) {  // two tiers' patience spent, one mutation into the third
    Proposal p = live.mutate(parent, seen.fn(), rng);
    ASSERT_FALSE(p.empty()) << p.reason;
    seen.configs.insert(p.params);
    rebuilt.replay_proposal(p.params, p.operator_name + " guided by memory_far_from_peak");
    live.report(p.params, false);
    rebuilt.report(p.params, false);
  }
  EXPECT_EQ(live.current_tier(), 2);
  EXPECT_EQ(rebuilt.current_tier(), live.current_tier());
  // Without the replayed notes the reports count for nothing: the tier would restart at 0.
  BuiltinProposer forgetful(spec, kShape, DType::kF32, options);
  for (const auto& c : seen.configs) forgetful.report(c, false);
  EXPECT_EQ(forgetful.current_tier(), 0);
}

TEST(BuiltinProposer, AnAcceptedImprovementKeepsTheTier) {
  KernelSpec spec = synthetic({{"BLOCK", {1, 2, 3, 4, 5, 6, 7}}, {"VEC", {1, 2, 3, 4, 5, 6, 7}}});
  BuiltinProposerOptions options;
  options.tier_patience = 2;
  BuiltinProposer proposer(spec, kShape, DType::kF32, options);
  Params parent = {{"BLOCK", "4"}, {"VEC", "4"}};
  SeenSet seen;
  seen.configs.insert(parent);
  std::mt19937_64 rng(1);
  auto step = [&](bool accepted) {
    Proposal p = proposer.mutate(parent, seen.fn(), rng);
    ASSERT_FALSE(p.empty());
    seen.configs.insert(p.params);
    proposer.report(p.params, accepted);
  };
  step(false);
  step(true);   // resets the count
  step(false);
  EXPECT_EQ(proposer.current_tier(), 0);
  proposer.report({{"BLOCK", "9"}, {"VEC", "9"}}, false);  // not proposed here: ignored
  EXPECT_EQ(proposer.current_tier(), 0);
  step(false);
  EXPECT_EQ(proposer.current_tier(), 1);
  // Reports of mutations proposed under the earlier tier do not count toward the new one.
  Proposal late = proposer.mutate(parent, seen.fn(), rng);
  seen.configs.insert(late.params);
  step(false);
  EXPECT_EQ(proposer.current_tier(), 1);
  step(false);
  EXPECT_EQ(proposer.current_tier(), 0);  // wraps around
  proposer.report(late.params, false);    // issued under tier 1, which is over
  EXPECT_EQ(proposer.current_tier(), 0);
}

TEST(BuiltinProposer, CrossoverTakesEveryValueFromOneOfTheParents) {
  KernelSpec spec = synthetic({{"BLOCK", {64, 128, 256, 512}},
                               {"VEC", {1, 2, 4, 8}},
                               {"UNROLL", {1, 2, 4}},
                               {"STAGES", {2, 3, 4}},
                               {"HINT", {0, 1}}},
                              {"BLOCK * VEC <= 2048"});
  BuiltinProposer proposer(spec, kShape, DType::kF16);
  const Params a = {{"BLOCK", "64"}, {"VEC", "8"}, {"UNROLL", "1"}, {"STAGES", "2"}, {"HINT", "0"}};
  const Params b = {{"BLOCK", "512"}, {"VEC", "4"}, {"UNROLL", "4"}, {"STAGES", "4"}, {"HINT", "1"}};
  SeenSet seen;
  seen.configs = {a, b};
  std::mt19937_64 rng(21);
  int children = 0;
  while (true) {
    Proposal p = proposer.crossover(a, b, seen.fn(), rng);
    if (p.empty()) {
      EXPECT_EQ(p.reason, "no new valid crossover of the parents");
      break;
    }
    ++children;
    EXPECT_EQ(p.operator_name, "crossover");
    for (const auto& [k, v] : p.params) EXPECT_TRUE(v == a.at(k) || v == b.at(k)) << k;
    EXPECT_NE(p.params, a);
    EXPECT_NE(p.params, b);
    EXPECT_TRUE(proposer.valid(p.params)) << p.description;
    EXPECT_TRUE(seen.configs.insert(p.params).second);
    ASSERT_LE(children, 30);
  }
  // 2^5 - 2 mixes, less those with BLOCK=512 and VEC=8 (8 of them).
  EXPECT_EQ(children, 30 - 8);
  EXPECT_FALSE(proposer.crossover(a, a, {}, rng).reason.empty());
}

TEST(BuiltinProposer, SwitchVariantChangesTheStructuralParameterAndRepairs) {
  RealTemplate matmul = load_real("matmul");
  ASSERT_NE(matmul.spec, nullptr);
  // A smaller search budget than the default: the far variants come from the scan of the space.
  BuiltinProposerOptions options;
  options.max_examined = 20000;
  BuiltinProposer proposer(*matmul.spec, matmul.shape, matmul.dtype, options);
  EXPECT_EQ(proposer.structural(), (std::vector<std::string>{"IMPL", "TMA"}));
  const Params mma = {{"IMPL", "0"}, {"BM", "128"},    {"BN", "128"},   {"BK", "32"},
                      {"WM", "2"},   {"WN", "2"},      {"STAGES", "3"}, {"CL", "0"},
                      {"PERS", "0"}, {"GROUP_M", "8"}, {"SK", "1"},     {"TMA", "0"}};
  ASSERT_TRUE(proposer.valid(mma));
  SeenSet seen;
  seen.configs.insert(mma);
  std::mt19937_64 rng(4);
  Proposal p = proposer.switch_variant(mma, seen.fn(), rng);
  ASSERT_FALSE(p.empty()) << p.reason;
  EXPECT_EQ(p.operator_name, "switch_variant");
  EXPECT_EQ(p.tier, 3);
  // The wgmma variant needs BK=64 and one warp per dimension; the tile and stages stay.
  const Params wgmma = {{"IMPL", "1"}, {"BM", "128"},    {"BN", "128"},   {"BK", "64"},
                        {"WM", "1"},   {"WN", "1"},      {"STAGES", "3"}, {"CL", "0"},
                        {"PERS", "0"}, {"GROUP_M", "8"}, {"SK", "1"},     {"TMA", "0"}};
  EXPECT_EQ(p.params, wgmma) << cli::format_params(p.params);
  EXPECT_EQ(p.description,
            "switch_variant IMPL 0->1 (tier 3: advanced); repair BK 32->64, WM 2->1, WN 2->1");
  seen.configs.insert(p.params);
  // Again and again: the next-nearest unseen wgmma configuration, always valid and new, until
  // every one was seen.
  auto all = cli::template_configs(*matmul.spec, matmul.shape, matmul.dtype, 0, 1);
  const auto wgmma_count = std::count_if(all.begin(), all.end(),
                                         [](const Params& c) { return c.at("IMPL") == "1"; });
  for (int i = 1; i < wgmma_count; ++i) {
    Proposal q = proposer.switch_variant(mma, seen.fn(), rng);
    ASSERT_FALSE(q.empty()) << q.reason << " (after " << i << " of " << wgmma_count << ")";
    EXPECT_EQ(q.params.at("IMPL"), "1");
    EXPECT_TRUE(proposer.valid(q.params)) << q.description;
    EXPECT_TRUE(seen.configs.insert(q.params).second);
  }
  EXPECT_EQ(proposer.switch_variant(mma, seen.fn(), rng).reason,
            "no unseen valid structural variant around parent");

  RealTemplate reduce = load_real("reduce");
  ASSERT_NE(reduce.spec, nullptr);
  BuiltinProposer rp(*reduce.spec, reduce.shape, reduce.dtype);
  EXPECT_EQ(rp.structural(), (std::vector<std::string>{"GRID", "TMA"}));
  for (const auto& parent : cli::template_configs(*reduce.spec, reduce.shape, reduce.dtype, 0, 1)) {
    Proposal q = rp.switch_variant(parent, {}, rng);
    ASSERT_FALSE(q.empty()) << q.reason;
    EXPECT_TRUE(q.params.at("TMA") != parent.at("TMA") || q.params.at("GRID") != parent.at("GRID"))
        << q.description;
    EXPECT_TRUE(rp.valid(q.params)) << q.description;
  }

  KernelSpec flat = synthetic({{"BLOCK", {1, 2}}});
  BuiltinProposer fp(flat, kShape, DType::kF32);
  EXPECT_EQ(fp.switch_variant({{"BLOCK", "1"}}, {}, rng).reason,
            "the template has no structural parameter");
}

TEST(BuiltinProposer, PastItsSearchBudgetTheNearestVariantComesFromAScanOfTheSpace) {
  // V = 1 needs A + ... + E >= 14: from all ones (sum 5) at least 5 changes, and the nearest
  // (index distance 9) has four parameters at 3 and one at 2. A search of 10 combinations ends
  // inside level 1; the scan must still find one of those five.
  KernelSpec spec = synthetic({{"V", {0, 1}},
                               {"A", {1, 2, 3}},
                               {"B", {1, 2, 3}},
                               {"C", {1, 2, 3}},
                               {"D", {1, 2, 3}},
                               {"E", {1, 2, 3}}},
                              {"V == 0 || A + B + C + D + E >= 14"});
  const Params parent = {{"V", "0"}, {"A", "1"}, {"B", "1"}, {"C", "1"}, {"D", "1"}, {"E", "1"}};
  for (int64_t budget : {int64_t{10}, int64_t{200000}}) {
    BuiltinProposerOptions options;
    options.structural = {"V"};
    options.max_examined = budget;
    BuiltinProposer proposer(spec, kShape, DType::kF32, options);
    std::set<Params> children;
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      std::mt19937_64 rng(seed);
      Proposal q = proposer.switch_variant(parent, {}, rng);
      ASSERT_FALSE(q.empty()) << "budget " << budget << ": " << q.reason;
      EXPECT_EQ(q.params.at("V"), "1");
      int threes = 0, twos = 0;
      for (const char* n : {"A", "B", "C", "D", "E"}) {
        threes += q.params.at(n) == "3";
        twos += q.params.at(n) == "2";
      }
      EXPECT_EQ(threes, 4) << q.description;
      EXPECT_EQ(twos, 1) << q.description;
      children.insert(q.params);
    }
    EXPECT_EQ(children.size(), 5u) << "budget " << budget << ": the ties are drawn at random";
    // Once those five are seen, the next nearest (sum 15: all at 3) is the only one left.
    SeenSet seen;
    for (const auto& c : children) seen.configs.insert(c);
    std::mt19937_64 rng(7);
    Proposal q = proposer.switch_variant(parent, seen.fn(), rng);
    ASSERT_FALSE(q.empty()) << q.reason;
    EXPECT_EQ(changed(parent, q.params).size(), 6u) << q.description;
    seen.configs.insert(q.params);
    EXPECT_EQ(proposer.switch_variant(parent, seen.fn(), rng).reason,
              "no unseen valid structural variant around parent");
  }
}

TEST(BuiltinProposer, GreedyKeepRevertLoopReachesTheOptimum) {
  KernelSpec spec = synthetic({{"BLOCK", {32, 64, 128, 256, 512, 1024}},
                               {"VEC", {1, 2, 4, 8, 16}},
                               {"UNROLL", {1, 2, 4}}},
                              {"BLOCK * VEC <= 4096"});
  auto cost = [](const Params& p) {
    return std::abs(std::stoi(p.at("BLOCK")) - 256) + 10 * std::abs(std::stoi(p.at("VEC")) - 8);
  };
  const size_t space = cli::template_configs(spec, kShape, DType::kF16, 0, 1).size();
  int worst = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    BuiltinProposerOptions options;
    options.tier_patience = 3;
    BuiltinProposer proposer(spec, kShape, DType::kF16, options);
    std::mt19937_64 rng(seed);
    Params best = {{"BLOCK", "32"}, {"VEC", "1"}, {"UNROLL", "1"}};
    SeenSet seen;
    seen.configs.insert(best);
    int proposals = 0;
    while (cost(best) > 0 && proposals < 40) {
      Proposal p = proposer.propose(best, nullptr, seen.fn(), rng);
      ASSERT_FALSE(p.empty()) << p.reason;
      ++proposals;
      seen.configs.insert(p.params);
      const bool accepted = cost(p.params) < cost(best);
      proposer.report(p.params, accepted);
      if (accepted) best = p.params;
    }
    EXPECT_EQ(cost(best), 0) << "seed " << seed << " after " << proposals << " proposals";
    EXPECT_EQ(best.at("BLOCK"), "256");
    EXPECT_EQ(best.at("VEC"), "8");
    worst = std::max(worst, proposals);
  }
  EXPECT_LT(static_cast<size_t>(worst), space);  // far fewer than a sweep
  std::printf("greedy loop: optimum within %d proposals (space of %zu)\n", worst, space);
}

TEST(BuiltinProposer, IsDeterministicForASeed) {
  RealTemplate matmul = load_real("matmul");
  ASSERT_NE(matmul.spec, nullptr);
  auto all = cli::template_configs(*matmul.spec, matmul.shape, matmul.dtype, 0, 1);
  auto run = [&](uint64_t seed) {
    BuiltinProposer proposer(*matmul.spec, matmul.shape, matmul.dtype);
    std::vector<Params> evaluated = {all.front()};
    SeenSet seen;
    seen.configs.insert(all.front());
    std::mt19937_64 rng(seed);
    std::vector<std::string> log;
    for (int i = 0; i < 60; ++i) {
      Proposal p = proposer.propose(evaluated[rng() % evaluated.size()], &evaluated.front(),
                                    seen.fn(), rng);
      if (p.empty()) break;
      log.push_back(p.operator_name + " " + cli::format_params(p.params));
      seen.configs.insert(p.params);
      evaluated.push_back(p.params);
      proposer.report(p.params, i % 5 == 0);
    }
    return log;
  };
  EXPECT_EQ(run(77), run(77));
  EXPECT_NE(run(77), run(78));
}

TEST(BuiltinProposer, ABadParentGivesAnEmptyResultWithTheReason) {
  KernelSpec spec = synthetic({{"BLOCK", {64, 128}}, {"VEC", {1, 2}}});
  BuiltinProposer proposer(spec, kShape, DType::kF16);
  std::mt19937_64 rng(1);
  Proposal p = proposer.mutate({{"BLOCK", "64"}}, {}, rng);
  EXPECT_TRUE(p.empty());
  EXPECT_NE(p.reason.find("VEC"), std::string::npos) << p.reason;
  p = proposer.mutate({{"BLOCK", "96"}, {"VEC", "1"}}, {}, rng);
  EXPECT_TRUE(p.empty());
  EXPECT_NE(p.reason.find("BLOCK=96"), std::string::npos) << p.reason;
  // A value is the integer's digits and nothing else (strtoll took " 64" and "+64" as 64); a
  // hostile one is cut and escaped in the reason.
  for (const std::string bad : {" 64", "+64", "64 ", "64x", "0x40", ""}) {
    p = proposer.mutate({{"BLOCK", bad}, {"VEC", "1"}}, {}, rng);
    EXPECT_TRUE(p.empty()) << "'" << bad << "'";
    EXPECT_NE(p.reason.find("is not in the template's space"), std::string::npos) << p.reason;
  }
  p = proposer.mutate({{"BLOCK", std::string(5000, '7') + "\n\x1b[2J"}, {"VEC", "1"}}, {}, rng);
  EXPECT_TRUE(p.empty());
  EXPECT_LT(p.reason.size(), 200u) << p.reason;
  EXPECT_EQ(p.reason.find('\x1b'), std::string::npos) << p.reason;
  // Extra entries (fixed macros) are carried over unchanged.
  p = proposer.mutate({{"BLOCK", "64"}, {"VEC", "1"}, {"VB", "16"}}, {}, rng);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p.params.at("VB"), "16");
}

}  // namespace
}  // namespace kiln::agent
