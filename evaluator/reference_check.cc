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

namespace kiln::eval {

Status check_reference(const Reference& ref, const TargetSpec& target,
                       const std::vector<Shape>& shapes, std::chrono::milliseconds deadline) {
  uint64_t seed = 0x5EED;
  for (const Shape& shape : shapes) {
    std::vector<std::vector<double>> values;  // read by the child from its copy of this process
    std::vector<const double*> in;
    for (const TargetArg* a : target.inputs()) {
      const auto n = static_cast<size_t>(std::max<int64_t>(element_count(*a, shape), 0));
      const DType t = evaluation_internal::arg_dtype(*a, DType::kF32);
      std::vector<double> v(n);
      std::vector<unsigned char> bytes(n * dtype_bytes(t));
      if (!a->index_bound.empty()) {
        generate_indices(evaluation_internal::index_bound(*a, shape), t, seed++, n, v.data(),
                         bytes.data());
      } else {
        generate(Distribution::kNormal, t, seed++, n, v.data(), bytes.data(),
                 evaluation_internal::input_scale(*a, shape));
      }
      values.push_back(std::move(v));
    }
    for (auto& v : values) in.push_back(v.data());
    std::vector<SharedDoubles> outputs;  // written by the child
    std::vector<double*> out;
    for (const TargetArg* a : target.outputs())
      outputs.emplace_back(static_cast<size_t>(std::max<int64_t>(element_count(*a, shape), 0)));
    for (auto& o : outputs) out.push_back(o.data());
    std::vector<int64_t> dims;
    for (const auto& d : target.dims) dims.push_back(shape.at(d));
    std::vector<double> scalars;
    for (const auto* s : target.scalars()) scalars.push_back(s->value);
    const std::vector<int64_t> rows = {0};
    // Each entry point in a child of its own: here a crash, exit() or endless loop ends the
    // child, and the check goes on to say so. The reference's own deadline (longer) is left as
    // it is, so that `deadline` here is the one that stops an endless call.
    auto forked = [&](const char* entry, auto call) {
      return run_forked(
          [&] {
            if (Status st = call(); !st.is_ok()) throw std::runtime_error(st.message());
          },
          deadline, ref.what() + ", " + entry + ",");
    };
    Status st = forked("kiln_reference", [&] { return ref.compute(in, out, dims, scalars); });
    if (st.is_ok() && ref.has_rows()) {
      st = forked("kiln_reference_rows",
                  [&] { return ref.compute_rows(in, out, dims, scalars, rows); });
    }
    if (st.is_ok() && ref.has_terms()) {
      st = forked("kiln_reference_terms",
                  [&] { return ref.compute_terms(in, out, dims, scalars, rows); });
    }
    if (!st.is_ok()) return st.with_context("at " + shape_string(shape));
  }
  return Status::ok();
}

}  // namespace kiln::eval
