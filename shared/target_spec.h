// The target spec model: a kernel to make fast, described as data in targets/<name>/target.json
// (format in docs/targets.md). Loading validates everything and names the file and field at fault.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "shared/dtype.h"
#include "shared/expr.h"
#include "shared/status.h"
#include "shared/tensor_map_spec.h"

namespace kiln {

using Shape = std::map<std::string, int64_t>;  // dim name -> size, e.g. {M: 8192, N: 8192}

struct TargetArg {
  // kScratch: a device buffer the kernel may use (e.g. an intermediate between two phases or a
  // grid-barrier counter); zero-filled before every verification run and once before timing
  // (not between timed launches), never compared, not counted as an input.
  enum class Role { kInput, kOutput, kScalar, kScratch };
  std::string name;
  Role role = Role::kInput;
  std::string dtype = "T";           // "T" = the dtype under test; or a fixed dtype like "f32"
  std::vector<std::string> shape;    // dim names (tensors)
  double value = 0;                  // scalars: the value passed
  std::string scalar_type = "f32";   // scalars: "f32" or "i64"
  std::string scale;                 // float inputs: every distribution's values times this
                                     // expression of the dims, e.g. "1/sqrt(D)" for weights
                                     // (as real layers are initialised); "" = 1
  std::string index_bound;           // integer inputs: values are uniform in [0, bound) (an
                                     // expression of the dims), e.g. class labels; "" = values
};

struct Tolerance {
  double rel = 0;  // |out - ref| <= abs + rel * |ref|, element-wise
  double abs = 0;
  double rms = 0;  // adds rms * (RMS of the output's finite reference values) to abs: errors of
                   // long accumulations scale with the terms, not with a result near zero
  double terms = 0;   // adds terms * sqrt(|R(x*x)|) to each element's abs, where R(x*x) is the
                      // reference run on the squared inputs (index inputs and scalars as they
                      // are): for an output that sums products of inputs (a row sum, a dot
                      // product), the root of the sum of its squared terms. Unlike rms it holds
                      // for every element, also where few outputs exist and one cancels to ~0
  std::string scale;  // optional expression of the dims multiplying rel and abs at each shape
                      // ("sqrt(N)": a scan whose checker allows errors growing with its length)
};

// A kernel source for one backend: the seed (fixed params) or the tunable template (a space).
struct KernelSpec {
  std::string source_file;           // relative to the target's folder
  std::string source;                // its text, loaded
  std::string kernel_name;           // extern "C" entry point
  std::map<std::string, std::string> defines;             // fixed -D macros
  std::map<std::string, std::vector<int64_t>> space;      // template parameters and their values
  std::vector<std::string> constraints;                   // must hold (non-zero) for a config
  std::string grid[3] = {"1", "1", "1"};                  // expressions of dims and params
  std::string block[3] = {"1", "1", "1"};
  std::string shared_bytes = "0";
  std::vector<TensorMapSpec> tensor_maps;  // cuda: passed after the scalars (docs/targets.md)
};

struct BackendSpec {
  std::vector<DType> dtypes;         // dtypes this backend's kernels support
  KernelSpec seed;
  std::optional<KernelSpec> tunable;
  // The shape this backend times (default: the target's benchmark shape). The cpu backend runs
  // the whole search in CI, where a GPU-sized shape (a 4096^3 matmul) would take hours.
  std::optional<Shape> benchmark;
};

// A GPU MODE leaderboard task the target reproduces (docs/export.md): what `kiln export --format
// gpumode` needs to write a submission whose custom_kernel(data) calls the kernel.
struct LeaderboardTask {
  std::string task;                            // the leaderboard's name, e.g. "vectorsum_v2"
  std::vector<std::string> gpus;               // GPU names for the #!POPCORN gpu line, e.g. "H100"
  std::map<std::string, std::string> inputs;   // every input arg -> Python expression over `data`
  std::map<std::string, std::string> outputs;  // output arg -> a tensor of `data` to write into
  std::string result;     // Python expression over the outputs: what custom_kernel returns
  std::string bit_exact;  // non-empty: the checker needs bit-exact agreement with a
                          // vendor library (why); kiln refuses to export it
};

struct TargetSpec {
  std::string name;
  std::string description;
  std::string dir;                   // folder the spec was loaded from
  std::vector<std::string> dims;     // order in which dims are passed to kernels
  std::vector<TargetArg> args;
  std::vector<DType> dtypes;
  std::map<DType, Tolerance> tolerance;
  Shape benchmark;
  std::vector<Shape> smoke, sweep, edge;
  std::string bytes_expr;            // fewest bytes moved; variables: dims and S (element bytes)
  std::string flops_expr;            // floating-point operations; variables: dims
  std::string reference_file;        // host C++ reference (fp64), relative to dir
  std::string reference_source;
  // The leading dims, shared by every output, whose flattened index is a row of
  // kiln_reference_rows ("reference_rows"; empty: the outputs' first dim).
  std::vector<std::string> reference_rows;
  std::map<std::string, BackendSpec> backends;  // "cuda", "cpu"
  // Adversarial input distributions left out for a dtype, with the reason (e.g. an intermediate
  // that overflows f16 in any honest kernel): dtype -> (distribution names, reason).
  std::map<DType, std::pair<std::vector<std::string>, std::string>> adversarial_skip;
  // A candidate's worst and RMS error may be at most this many times the seed's on the same
  // inputs (docs/threats.md row 10: a precision drop that stays inside the tolerance).
  double precision_factor = 8;
  std::optional<LeaderboardTask> leaderboard;
  std::string spec_hash;             // sha256 of the spec file and every source it names

  const BackendSpec* backend(const std::string& name) const;
  // The shape `backend` times: its own "benchmark" if it has one, else the target's.
  const Shape& benchmark_for(const std::string& backend) const;
  // The verification shapes: smoke, then sweep, then edge.
  std::vector<Shape> verification_shapes() const;
  std::vector<const TargetArg*> inputs() const;
  std::vector<const TargetArg*> outputs() const;
  std::vector<const TargetArg*> scalars() const;
};

// Loads <dir>/target.json and the sources it names.
Result<TargetSpec> load_target(const std::string& dir);

// Every target folder (one with a target.json) under `root`, sorted by name.
Result<std::vector<TargetSpec>> load_targets(const std::string& root);

// Variables for expressions: the shape's dims, S = bytes of `dtype`, and the params.
ExprVars expr_vars(const Shape& shape, DType dtype, const std::map<std::string, std::string>& params);

// The target's tolerance for `dtype` at `shape`: rel and abs times its scale expression there
// (unchanged without one, or where the expression cannot be evaluated).
Tolerance tolerance_at(const TargetSpec& target, DType dtype, const Shape& shape);

// Number of elements of a tensor argument at `shape`.
int64_t element_count(const TargetArg& arg, const Shape& shape);

// Whether some dtype's tolerance gives `terms`: the evaluator then sizes each element's terms.
bool uses_terms(const TargetSpec& target);

// The dims whose flattened index is a row of kiln_reference_rows and kiln_reference_terms:
// reference_rows, or else the first dim every output shares; empty where they share none (a
// reference's row functions are then never called).
std::vector<std::string> reference_row_dims(const TargetSpec& target);

// "M=8192,N=8192"
std::string shape_string(const Shape& shape);

// The largest size a dim may have (kernels index with 32-bit integers).
inline constexpr int64_t kMaxDimSize = (int64_t{1} << 31) - 1;

// Whether `shape` names every one of `dims` and nothing else, each from 1 to kMaxDimSize;
// INVALID_ARGUMENT saying what is wrong otherwise. The second form names the shape and the target.
Status check_shape(const std::vector<std::string>& dims, const Shape& shape);
// Also: no tensor of the target holds more than kMaxTensorElements at `shape`.
Status check_shape(const TargetSpec& target, const Shape& shape);
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

// A shape written as a JSON object of dim sizes (target.json, a shape sweep), checked with
// check_shape; errors begin with `where`.
Result<Shape> shape_from_json(const nlohmann::json& j, const std::string& where,
                              const std::vector<std::string>& dims);

// The built-in targets folder: <exe>/../share/kiln/targets (bundle), else the source tree's
// targets/. Users' folders come before it on the lookup path (shared/target_path.h).
std::string default_targets_dir();

}  // namespace kiln
