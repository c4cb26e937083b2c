// The trusted reference of one input set (docs/targets.md): its outputs, and where the target's
// tolerance scales with the size of each element's terms (Tolerance::terms), the reference once
// more on the squared inputs, whose outputs' square roots are those sizes. For a row sum that is
// sqrt(sum of x^2) per row: the scale of an honest fp32 sum's rounding error even where the row
// cancels to almost nothing, which the outputs themselves no longer show.
#include "evaluator/evaluation_internal.h"

namespace kiln::eval {

void CandidateEvaluator::Impl::compute_reference(SetData& d, const Shape& shape) const {
  const bool terms = uses_term_norms();
  std::vector<const double*> in, in_squared;
  std::vector<double*> out, out_norms;
  if (terms) {
    d.squares.resize(d.slots.size());
    d.term_norms.resize(d.slots.size());
  }
  for (size_t i = 0; i < d.slots.size(); ++i) {
    if (d.slots[i].arg->role != TargetArg::Role::kInput) continue;
    in.push_back(d.values[i].data());
    if (!terms) continue;
    const std::vector<double>& v = d.values[i];
    std::vector<double>& sq = d.squares[i];
    if (!d.slots[i].arg->index_bound.empty()) {  // indices select terms: passed as they are
      in_squared.push_back(v.data());
      continue;
    }
    if (!d.squares_built || sq.size() != v.size()) {
      sq.resize(v.size());
      for (size_t k = 0; k < v.size(); ++k) sq[k] = v[k] * v[k];
    }
    in_squared.push_back(sq.data());
  }
  if (terms && d.squares_built) {
    for (const Site& s : d.sites) {
      if (d.slots[s.slot].arg->index_bound.empty()) {
        d.squares[s.slot][s.element] = d.values[s.slot][s.element] * d.values[s.slot][s.element];
      }
    }
  }
  d.squares_built = terms;
  for (size_t i = 0; i < d.slots.size(); ++i) {
    if (d.slots[i].arg->role != TargetArg::Role::kOutput) continue;
    // Sized once: the reference writes every element, or with rows every element compared
    // (zeroing 64 Mi doubles again for each kept launch cost 0.15 s).
    if (d.reference[i].size() != d.slots[i].count) d.reference[i].assign(d.slots[i].count, 0.0);
    out.push_back(d.reference[i].data());
    if (!terms) continue;
    if (d.term_norms[i].size() != d.slots[i].count) d.term_norms[i].assign(d.slots[i].count, 0.0);
    out_norms.push_back(d.term_norms[i].data());
  }
  std::vector<int64_t> dims;
  for (const auto& name : target.dims) dims.push_back(shape.at(name));
  std::vector<double> scalars;
  for (const auto* s : target.scalars()) scalars.push_back(s->value);
  if (d.rows.empty()) {
    reference->compute(in, out, dims, scalars);
    if (terms) reference->compute(in_squared, out_norms, dims, scalars);
  } else {
    reference->compute_rows(in, out, dims, scalars, d.rows);
    if (terms) reference->compute_rows(in_squared, out_norms, dims, scalars, d.rows);
  }
  if (!terms) return;
  // Square roots of the elements just computed: every one, or those of the rows.
  const int64_t nrows = d.rows.empty() ? 0 : row_count(shape);
  for (size_t i = 0; i < d.slots.size(); ++i) {
    if (d.slots[i].arg->role != TargetArg::Role::kOutput) continue;
    std::vector<double>& norms = d.term_norms[i];
    if (nrows <= 0) {
      term_norms_from_squares(norms.data(), norms.size());
      continue;
    }
    const size_t per_row = norms.size() / static_cast<size_t>(nrows);
    for (int64_t r : d.rows) term_norms_from_squares(norms.data() + r * per_row, per_row);
  }
}

}  // namespace kiln::eval
