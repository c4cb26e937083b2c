// The input sets of an evaluation: generating them into the arena (prepare_set), their trusted
// reference (compute_reference), the rows a sampled check looks at (sampled_rows), and the
// comparison of a candidate's outputs against the reference (check_outputs_against).
//
// Where the target's tolerance scales with the size of each element's terms (Tolerance::terms,
// docs/targets.md), the reference's kiln_reference_terms gives those sizes, or else the reference
// runs once more on the squared inputs, whose outputs' square roots are those sizes. For a row sum
// that is sqrt(sum of x^2) per row: the scale of an honest fp32 sum's rounding error even where the
// row cancels to almost nothing, which the outputs themselves no longer show.
#include "evaluator/evaluation_internal.h"

namespace kiln::eval {

CandidateEvaluator::Impl::SetData CandidateEvaluator::Impl::prepare_set(
    std::vector<TensorSlot> slots, const Shape& shape, Distribution dist, uint64_t seed,
    SetData reuse) {
  SetData d = std::move(reuse);
  d.slots = std::move(slots);
  d.shape = shape;
  d.rows.clear();
  d.sites.clear();
  d.squares_built = false;
  d.values.resize(d.slots.size());
  d.input_checksums.resize(d.slots.size());
  d.reference.resize(d.slots.size());
  unsigned char* arena = sandbox->arena();
  for (size_t i = 0; i < d.slots.size(); ++i) {
    const TensorSlot& s = d.slots[i];
    if (s.arg->role != TargetArg::Role::kInput) continue;
    d.values[i].resize(s.count);
    // Each input gets its own stream; the seed never leaves this process.
    const uint64_t stream = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    if (!s.arg->index_bound.empty()) {
      generate_indices(index_bound(*s.arg, shape), s.dtype, stream, s.count, d.values[i].data(),
                       arena + s.offset);
    } else {
      generate(dist, s.dtype, stream, s.count, d.values[i].data(), arena + s.offset,
               input_scale(*s.arg, shape));
    }
    d.input_checksums[i] = checksum(arena + s.offset, s.count * dtype_bytes(s.dtype));
  }
  return d;
}

std::vector<int64_t> CandidateEvaluator::Impl::sampled_rows(
    const Shape& shape, size_t count, const std::vector<int64_t>& must_include) {
  if (!reference->has_rows()) return {};
  const int64_t n = row_count(shape);
  if (n <= 0) return {};
  if (n <= static_cast<int64_t>(count) * 2) {
    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r;
    return all;
  }
  std::set<int64_t> rows;
  for (int64_t r : must_include) {
    if (r >= 0 && r < n) rows.insert(r);
  }
  const size_t want = std::min<size_t>(static_cast<size_t>(n), rows.size() + count);
  while (rows.size() < want)
    rows.insert(static_cast<int64_t>(seeds.next() % static_cast<uint64_t>(n)));
  return {rows.begin(), rows.end()};
}

Status CandidateEvaluator::Impl::compute_reference(SetData& d, const Shape& shape) const {
  std::vector<const double*> in;
  std::vector<double*> out;
  for (size_t i = 0; i < d.slots.size(); ++i) {
    if (d.slots[i].arg->role == TargetArg::Role::kInput) in.push_back(d.values[i].data());
  }
  for (size_t i = 0; i < d.slots.size(); ++i) {
    if (d.slots[i].arg->role != TargetArg::Role::kOutput) continue;
    // Sized once: the reference writes every element, or with rows every element compared
    // (zeroing 64 Mi doubles again for each kept launch cost 0.15 s).
    if (d.reference[i].size() != d.slots[i].count) d.reference[i].assign(d.slots[i].count, 0.0);
    out.push_back(d.reference[i].data());
  }
  std::vector<int64_t> dims;
  for (const auto& name : target.dims) dims.push_back(shape.at(name));
  std::vector<double> scalars;
  for (const auto* s : target.scalars()) scalars.push_back(s->value);
  KILN_RETURN_IF_ERROR(d.rows.empty() ? reference->compute(in, out, dims, scalars)
                                      : reference->compute_rows(in, out, dims, scalars, d.rows));
  if (uses_terms(target)) return compute_term_norms(d, shape, in, dims, scalars);
  return Status::ok();
}

Status CandidateEvaluator::Impl::compute_term_norms(SetData& d, const Shape& shape,
                                                    const std::vector<const double*>& in,
                                                    const std::vector<int64_t>& dims,
                                                    const std::vector<double>& scalars) const {
  std::vector<double*> norms;
  d.term_norms.resize(d.slots.size());
  for (size_t i = 0; i < d.slots.size(); ++i) {
    if (d.slots[i].arg->role != TargetArg::Role::kOutput) continue;
    if (d.term_norms[i].size() != d.slots[i].count) d.term_norms[i].assign(d.slots[i].count, 0.0);
    norms.push_back(d.term_norms[i].data());
  }
  // The reference's own kiln_reference_terms, which always takes rows.
  const int64_t all_rows = row_count(shape);
  if (reference->has_terms() && all_rows > 0) {
    std::vector<int64_t> rows = d.rows;
    if (rows.empty()) {
      rows.resize(static_cast<size_t>(all_rows));
      for (int64_t r = 0; r < all_rows; ++r) rows[static_cast<size_t>(r)] = r;
    }
    return reference->compute_terms(in, norms, dims, scalars, rows);
  }
  // Else the reference on the squared inputs (index inputs select terms: passed as they are).
  d.squares.resize(d.slots.size());
  std::vector<const double*> squared;
  for (size_t i = 0; i < d.slots.size(); ++i) {
    if (d.slots[i].arg->role != TargetArg::Role::kInput) continue;
    const std::vector<double>& v = d.values[i];
    std::vector<double>& sq = d.squares[i];
    if (!d.slots[i].arg->index_bound.empty()) {
      squared.push_back(v.data());
      continue;
    }
    if (!d.squares_built || sq.size() != v.size()) {
      sq.resize(v.size());
      for (size_t k = 0; k < v.size(); ++k) sq[k] = v[k] * v[k];
    }
    squared.push_back(sq.data());
  }
  if (d.squares_built) {  // only the sites' elements changed since
    for (const Site& s : d.sites) {
      if (d.slots[s.slot].arg->index_bound.empty()) {
        d.squares[s.slot][s.element] = d.values[s.slot][s.element] * d.values[s.slot][s.element];
      }
    }
  }
  d.squares_built = true;
  KILN_RETURN_IF_ERROR(d.rows.empty()
                           ? reference->compute(squared, norms, dims, scalars)
                           : reference->compute_rows(squared, norms, dims, scalars, d.rows));
  // Square roots of the elements just computed: every one, or those of the rows.
  for (size_t i = 0; i < d.slots.size(); ++i) {
    if (d.slots[i].arg->role != TargetArg::Role::kOutput) continue;
    std::vector<double>& n = d.term_norms[i];
    if (d.rows.empty() || all_rows <= 0) {
      term_norms_from_squares(n.data(), n.size());
      continue;
    }
    const size_t per_row = n.size() / static_cast<size_t>(all_rows);
    for (int64_t r : d.rows) term_norms_from_squares(n.data() + r * per_row, per_row);
  }
  return Status::ok();
}

CaseOutcome CandidateEvaluator::Impl::check_outputs_against(const std::vector<TensorSlot>& slots,
                                                            const SetData& expected, DType dtype,
                                                            unsigned char poison,
                                                            bool ref_stats) const {
  CaseOutcome o;
  const unsigned char* arena = sandbox->arena();
  for (size_t i = 0; i < slots.size(); ++i) {
    const TensorSlot& s = slots[i];
    if (s.arg->role != TargetArg::Role::kOutput) continue;
    const unsigned char* got = arena + s.offset;
    const double* want = expected.reference[i].data();
    const double* norms = i < expected.term_norms.size() && !expected.term_norms[i].empty()
                              ? expected.term_norms[i].data()
                              : nullptr;
    size_t count = s.count;
    std::string name = s.arg->name;
    std::string got_rows;
    std::vector<double> want_rows, norm_rows;
    // Gather the sampled rows of both sides, then compare those (every row: compare as is).
    if (!expected.rows.empty() &&
        static_cast<int64_t>(expected.rows.size()) != row_count(expected.shape)) {
      const size_t per_row = s.count / static_cast<size_t>(row_count(expected.shape));
      const size_t bytes = per_row * dtype_bytes(s.dtype);
      for (int64_t r : expected.rows) {
        got_rows.append(reinterpret_cast<const char*>(got) + r * bytes, bytes);
        want_rows.insert(want_rows.end(), want + r * per_row, want + (r + 1) * per_row);
        if (norms)
          norm_rows.insert(norm_rows.end(), norms + r * per_row, norms + (r + 1) * per_row);
      }
      got = reinterpret_cast<const unsigned char*>(got_rows.data());
      want = want_rows.data();
      if (norms) norms = norm_rows.data();
      count = want_rows.size();
      name += " (" + std::to_string(expected.rows.size()) + " sampled rows of " +
              std::to_string(per_row) + ", in order)";
    }
    CompareResult c = compare(s.dtype, got, want, count,
                              tolerance_at(target, dtype, expected.shape), poison, name, norms);
    o.worst_rel = std::max(o.worst_rel, c.worst_rel_error);
    o.worst_abs = std::max(o.worst_abs, c.worst_abs_error);
    o.rms = std::max(o.rms, c.rms_error);
    if (ref_stats) {
      double largest = 0;
      for (size_t k = 0; k < count; ++k) {
        if (std::isfinite(want[k])) largest = std::max(largest, std::fabs(want[k]));
      }
      const double eps = unit_roundoff(s.dtype);
      o.ulp_at_max = std::max(o.ulp_at_max, eps * largest);
      o.ulp_at_rms = std::max(o.ulp_at_rms, eps * finite_rms(want, count));
    }
    if (!c.passed && o.kind == CaseKind::kPass) {
      o.kind = CaseKind::kWrong;
      o.detail = c.detail;
    }
  }
  return o;
}

}  // namespace kiln::eval
