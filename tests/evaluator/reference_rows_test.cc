// Every built-in target whose reference computes single rows (kiln_reference_rows) gives, for the
// rows asked, exactly what its full entry point gives: the timed launches' outputs are checked on
// secret rows through it, so a wrong row function would pass wrong kernels or fail honest ones.
// Rows are split over threads (Reference::set_threads), each part computed at the same time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "evaluator/reference.h"
#include "evaluator/tensor_data.h"
#include "shared/expr.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

TEST(ReferenceRows, AgreeWithTheFullReferenceOnEveryBuiltInTargetThatHasThem) {
  testing::TempDir dir;
  int checked = 0;
  for (const char* name : {"rmsnorm", "softmax", "layernorm", "reduce", "cross_entropy", "matmul",
                           "fused_mlp", "rotary_embedding", "flash_attention"}) {
    Result<TargetSpec> target = testing::load_builtin_target(name);
    ASSERT_TRUE(target.is_ok()) << target.status().to_string();
    auto ref = Reference::build(*target, dir.path());
    ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
    ASSERT_TRUE((*ref)->has_rows()) << name << " has no kiln_reference_rows";
    (*ref)->set_threads(4);
    const Shape& shape = target->sweep.front();
    std::vector<std::vector<double>> in_data, full, rows;
    std::vector<const double*> in;
    uint64_t seed = 42;
    for (const TargetArg* a : target->inputs()) {
      const auto n = static_cast<size_t>(element_count(*a, shape));
      std::vector<double> v(n);
      std::string bytes(n * 8, '\0');
      if (!a->index_bound.empty()) {
        Result<int64_t> bound = eval_int_expr(a->index_bound, expr_vars(shape, DType::kF32, {}));
        ASSERT_TRUE(bound.is_ok()) << bound.status().to_string();
        generate_indices(*bound, DType::kI64, seed++, n, v.data(), bytes.data());
      } else {
        generate(Distribution::kNormal, DType::kF32, seed++, n, v.data(), bytes.data());
      }
      in_data.push_back(std::move(v));
    }
    for (auto& v : in_data) in.push_back(v.data());
    std::vector<double*> full_out, rows_out;
    for (const TargetArg* a : target->outputs()) {
      const auto n = static_cast<size_t>(element_count(*a, shape));
      full.emplace_back(n, 0.0);
      rows.emplace_back(n, -12345.0);
    }
    for (auto& v : full) full_out.push_back(v.data());
    for (auto& v : rows) rows_out.push_back(v.data());
    std::vector<int64_t> dims;
    for (const auto& d : target->dims) dims.push_back(shape.at(d));
    std::vector<double> scalars;
    for (const auto* s : target->scalars()) scalars.push_back(s->value);
    ASSERT_TRUE((*ref)->compute(in, full_out, dims, scalars).is_ok()) << name;
    // A row is one index over the reference_rows dims (default: the outputs' first dim).
    std::vector<std::string> row_dims = target->reference_rows;
    if (row_dims.empty()) row_dims = {target->outputs().front()->shape.front()};
    int64_t m = 1;
    for (const auto& d : row_dims) m *= shape.at(d);
    std::vector<int64_t> asked;  // the first, the last and 22 spread between: 4 threads' parts
    for (int64_t k = 0; k < 24; ++k) asked.push_back(k * (m - 1) / 23);
    asked.erase(std::unique(asked.begin(), asked.end()), asked.end());
    ASSERT_TRUE((*ref)->compute_rows(in, rows_out, dims, scalars, asked).is_ok()) << name;
    for (size_t o = 0; o < full.size(); ++o) {
      const size_t per_row = full[o].size() / static_cast<size_t>(m);
      for (int64_t r = 0; r < m; ++r) {
        const bool was_asked = std::binary_search(asked.begin(), asked.end(), r);
        for (size_t k = 0; k < per_row; ++k) {
          const double want = full[o][r * per_row + k], got = rows[o][r * per_row + k];
          if (!was_asked) {  // rows not asked for are left alone
            ASSERT_EQ(got, -12345.0) << name << " wrote row " << r << ", not asked for";
            continue;
          }
          ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
              << name << " output " << o << " row " << r << " element " << k << ": " << got
              << " vs " << want;
        }
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 9);
}

}  // namespace
}  // namespace kiln::eval
