// check_reference: inputs as the evaluator draws them (normal values at each input's scale, index
// inputs within their bound), then the reference's entry points, each in a forked child that
// writes its outputs into shared pages.
#include "evaluator/reference_check.h"

#include <algorithm>
#include <stdexcept>

#include "evaluator/evaluation_wire.h"
#include "evaluator/forked_call.h"
#include "evaluator/shared_pages.h"
#include "evaluator/tensor_data.h"
#include "shared/expr.h"

namespace kiln::eval {

Status check_reference(Reference& ref, const TargetSpec& target, const std::vector<Shape>& shapes,
                       std::chrono::milliseconds deadline) {
  const std::chrono::milliseconds before = ref.deadline();
  ref.set_deadline(deadline);
  Status result;
  uint64_t seed = 0x5EED;
  for (const Shape& shape : shapes) {
    std::vector<SharedDoubles> values, outputs;
    std::vector<const double*> in;
    std::vector<SharedDoubles*> out;
    for (const TargetArg* a : target.inputs()) {
      const auto n = static_cast<size_t>(std::max<int64_t>(element_count(*a, shape), 0));
      const DType t = evaluation_internal::arg_dtype(*a, DType::kF32);
      SharedDoubles v(n);
      std::vector<unsigned char> bytes(n * dtype_bytes(t));
      if (!a->index_bound.empty()) {
        Result<int64_t> bound = eval_int_expr(a->index_bound, expr_vars(shape, DType::kF32, {}));
        generate_indices(bound.is_ok() ? std::max<int64_t>(*bound, 1) : 1, t, seed++, n, v.data(),
                         bytes.data());
      } else {
        Result<double> scale = a->scale.empty()
                                   ? Result<double>(1.0)
                                   : eval_expr(a->scale, expr_vars(shape, DType::kF32, {}));
        generate(Distribution::kNormal, t, seed++, n, v.data(), bytes.data(),
                 scale.is_ok() && *scale > 0 ? *scale : 1.0);
      }
      values.push_back(std::move(v));
    }
    for (auto& v : values) in.push_back(v.data());
    for (const TargetArg* a : target.outputs())
      outputs.emplace_back(static_cast<size_t>(std::max<int64_t>(element_count(*a, shape), 0)));
    for (auto& o : outputs) out.push_back(&o);
    std::vector<int64_t> dims;
    for (const auto& d : target.dims) dims.push_back(shape.at(d));
    std::vector<double> scalars;
    for (const auto* s : target.scalars()) scalars.push_back(s->value);
    const std::vector<int64_t> rows = {0};
    std::vector<double*> ptrs;
    for (SharedDoubles* o : out) ptrs.push_back(o->data());
    // Each entry point in a child of its own: here a crash, exit() or endless loop ends the
    // child, and the check goes on to say so.
    auto forked = [&](const char* entry, auto call) {
      return run_forked(
          [&] {
            if (Status st = call(); !st.is_ok()) throw std::runtime_error(st.message());
          },
          deadline, ref.what() + ", " + entry + ",");
    };
    Status st = forked("kiln_reference", [&] { return ref.compute(in, ptrs, dims, scalars); });
    if (st.is_ok() && ref.has_rows()) {
      st = forked("kiln_reference_rows",
                  [&] { return ref.compute_rows(in, ptrs, dims, scalars, rows); });
    }
    if (st.is_ok() && ref.has_terms()) {
      st = forked("kiln_reference_terms",
                  [&] { return ref.compute_terms(in, ptrs, dims, scalars, rows); });
    }
    if (!st.is_ok()) {
      result = st.with_context("at " + shape_string(shape));
      break;
    }
  }
  ref.set_deadline(before);
  return result;
}

}  // namespace kiln::eval
