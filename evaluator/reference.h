// The trusted reference of a target: its reference.cpp (host C++, fp64) compiled by the system
// compiler into a shared object, cached by content hash, and called in the evaluating process --
// never in the sandbox child and never in the candidate's CUDA context (docs/threats.md row 7).
// A call that throws fails with the exception's message; one that crashes, calls exit() or runs
// past its deadline says so before the process ends (evaluator/reference_watch.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::eval {

// ABI of reference.cpp (docs/targets.md):
//   extern "C" void kiln_reference(const double* const* inputs, double* const* outputs,
//                                  const int64_t* dims, const double* scalars);
// inputs/outputs in the order of the spec's args, dims in the order of "dims", scalars likewise.
using ReferenceFn = void (*)(const double* const*, double* const*, const int64_t*, const double*);

// Optional, for targets whose reference is expensive at the benchmark shape (matmul, the MLP):
//   extern "C" void kiln_reference_rows(const double* const* inputs, double* const* outputs,
//                                       const int64_t* dims, const double* scalars,
//                                       const int64_t* rows, int64_t nrows);
// computes only the listed rows (indices into the first dim of every output; outputs are full
// size, other rows are left alone). kiln then re-checks the timed outputs on rows drawn from a
// seed the candidate never sees, instead of on every row.
using ReferenceRowsFn = void (*)(const double* const*, double* const*, const int64_t*,
                                 const double*, const int64_t*, int64_t);

// Optional, for a target whose tolerance has a terms term (docs/targets.md, "Choosing
// tolerances") and whose outputs are not plain sums of products of the inputs:
//   extern "C" void kiln_reference_terms(const double* const* inputs, double* const* terms,
//                                        const int64_t* dims, const double* scalars,
//                                        const int64_t* rows, int64_t nrows);
// writes, for every element of the listed rows, the size of the error an honest kernel's rounding
// can put there (in units of the rounding), where the outputs alone do not show it: an attention
// row whose softmax is nearly tied between two keys, say. Without it kiln takes the square root
// of the reference on the squared inputs. Same signature and rules as kiln_reference_rows.
using ReferenceTermsFn = ReferenceRowsFn;

// Threads for sampled-row references: half the cores, 1 to 8 (an evaluator computes two sets'
// references at once; on a machine of several GPUs the cap keeps their evaluators' threads
// within the cores).
size_t default_reference_threads();

class Reference {
 public:
  // Compiles (or finds in `cache_dir`) and loads the target's reference.
  static Result<std::unique_ptr<Reference>> build(const TargetSpec& target,
                                                  const std::string& cache_dir);
  ~Reference();
  Reference(const Reference&) = delete;
  Reference& operator=(const Reference&) = delete;

  // Each compute call fails where the reference threw (the outputs then hold whatever it wrote
  // before); it is watched meanwhile (reference_watch.h) with the deadline set_deadline gave.
  Status compute(const std::vector<const double*>& inputs, const std::vector<double*>& outputs,
                 const std::vector<int64_t>& dims, const std::vector<double>& scalars) const;

  bool has_rows() const { return rows_fn_ != nullptr; }
  bool has_terms() const { return terms_fn_ != nullptr; }
  // Threads compute_rows may split its rows over (at least 1).
  void set_threads(size_t n) { threads_ = std::max<size_t>(n, 1); }
  // Needs has_rows(). The rows are split over up to set_threads() threads, each calling
  // kiln_reference_rows on its own rows at the same time (rows are independent; a reference must
  // not keep state between calls -- docs/targets.md).
  Status compute_rows(const std::vector<const double*>& inputs, const std::vector<double*>& outputs,
                      const std::vector<int64_t>& dims, const std::vector<double>& scalars,
                      const std::vector<int64_t>& rows) const;
  // Needs has_terms(): kiln_reference_terms on `rows`, split over threads as compute_rows.
  Status compute_terms(const std::vector<const double*>& inputs, const std::vector<double*>& terms,
                       const std::vector<int64_t>& dims, const std::vector<double>& scalars,
                       const std::vector<int64_t>& rows) const;
  // How long one call may run before the watch ends the process (default kDefaultDeadline).
  void set_deadline(std::chrono::milliseconds d) { deadline_ = d; }
  // "the reference of target 'x' (reference.cpp)": how messages about it begin.
  const std::string& what() const { return what_; }
  // Generous: a reference at a benchmark shape without kiln_reference_rows may take minutes.
  static constexpr std::chrono::milliseconds kDefaultDeadline{300'000};

 private:
  Reference(void* handle, ReferenceFn fn, ReferenceRowsFn rows, ReferenceTermsFn terms,
            std::string what)
      : handle_(handle), fn_(fn), rows_fn_(rows), terms_fn_(terms), what_(std::move(what)) {}
  Status by_rows(ReferenceRowsFn fn, const char* name, const std::vector<const double*>& inputs,
                 const std::vector<double*>& outputs, const std::vector<int64_t>& dims,
                 const std::vector<double>& scalars, const std::vector<int64_t>& rows) const;
  void* handle_;
  ReferenceFn fn_;
  ReferenceRowsFn rows_fn_;
  ReferenceTermsFn terms_fn_;
  std::string what_;  // "the reference of target 'x' (reference.cpp)"
  size_t threads_ = 1;
  std::chrono::milliseconds deadline_ = kDefaultDeadline;
  static constexpr size_t kMinRowsPerThread = 4;
};

}  // namespace kiln::eval
