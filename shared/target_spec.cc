// Loading and validation of target specs (targets/<name>/target.json).
#include "shared/target_spec.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "shared/backends.h"
#include "shared/hash.h"
#include "shared/json_fields.h"
#include "shared/target_checks.h"
#include "shared/text.h"

namespace kiln {
namespace fs = std::filesystem;
namespace {

Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status read_shape_list(JsonFields& f, const std::string& key, const std::vector<std::string>& dims,
                       bool required, std::vector<Shape>* out) {
  const nlohmann::json* j = f.raw(key);
  if (!j) return required ? f.field_error(key, "missing (required)") : Status::ok();
  if (!j->is_array()) return f.field_error(key, "expected an array of shapes");
  for (size_t i = 0; i < j->size(); ++i) {
    KILN_ASSIGN_OR_RETURN(
        Shape s, shape_from_json((*j)[i], f.where(key + "[" + std::to_string(i) + "]"), dims));
    out->push_back(std::move(s));
  }
  if (required && out->empty()) return f.field_error(key, "needs at least one shape");
  return Status::ok();
}

Status read_three(JsonFields& f, const std::string& key, std::string (&out)[3]) {
  std::vector<std::string> v;
  KILN_RETURN_IF_ERROR(f.get(key, &v));
  if (!f.has(key)) return Status::ok();
  if (v.empty() || v.size() > 3) return f.field_error(key, "expected 1 to 3 expressions (x, y, z)");
  for (size_t i = 0; i < 3; ++i) out[i] = i < v.size() ? v[i] : "1";
  return Status::ok();
}

Status read_kernel(JsonFields& f, const fs::path& dir, bool tunable, KernelSpec* k) {
  KILN_RETURN_IF_ERROR(f.get("source", &k->source_file, true));
  KILN_RETURN_IF_ERROR(f.get("kernel", &k->kernel_name, true));
  KILN_RETURN_IF_ERROR(f.get("defines", &k->defines));
  KILN_RETURN_IF_ERROR(read_three(f, "grid", k->grid));
  KILN_RETURN_IF_ERROR(read_three(f, "block", k->block));
  KILN_RETURN_IF_ERROR(f.get("shared_bytes", &k->shared_bytes));
  KILN_RETURN_IF_ERROR(f.get("constraints", &k->constraints));
  KILN_RETURN_IF_ERROR(read_tensor_maps(f, &k->tensor_maps));
  if (const nlohmann::json* p = f.raw("params")) {
    if (!tunable) return f.field_error("params", "only a template has a parameter space");
    if (!p->is_object()) return f.field_error("params", "expected an object of value lists");
    for (auto it = p->begin(); it != p->end(); ++it) {
      if (!is_identifier(it.key())) return f.field_error("params." + it.key(), "not a macro name");
      if (!it->is_array() || it->empty()) {
        return f.field_error("params." + it.key(), "expected a non-empty array of integers");
      }
      for (const auto& v : *it) {
        if (!v.is_number_integer()) return f.field_error("params." + it.key(), "expected integers");
        const bool exact = v.is_number_unsigned()
                               ? v.get<uint64_t>() <= static_cast<uint64_t>(kMaxParamMagnitude)
                               : std::llabs(v.get<int64_t>()) <= kMaxParamMagnitude;
        if (!exact) {
          return f.field_error("params." + it.key(),
                               "values are integers from -2^53 to 2^53 (exact in expressions)");
        }
        k->space[it.key()].push_back(v.get<int64_t>());
      }
    }
  }
  KILN_RETURN_IF_ERROR(f.finish());
  if (!is_identifier(k->kernel_name)) {
    return f.field_error("kernel", "'" + k->kernel_name + "' is not a C identifier");
  }
  if (k->source_file.find("..") != std::string::npos || fs::path(k->source_file).is_absolute()) {
    return f.field_error("source", "must be a file inside the target's folder");
  }
  Result<std::string> text = read_text(dir / k->source_file);
  if (!text.is_ok()) return f.field_error("source", text.status().message());
  k->source = std::move(text).value();
  return Status::ok();
}

Status read_backend(JsonFields& f, const fs::path& dir, const TargetSpec& t, BackendSpec* b) {
  std::vector<std::string> dtypes;
  KILN_RETURN_IF_ERROR(f.get("dtypes", &dtypes, true));
  for (const auto& name : dtypes) {
    Result<DType> d = parse_dtype(name);
    if (!d.is_ok()) return f.field_error("dtypes", d.status().message());
    if (std::find(t.dtypes.begin(), t.dtypes.end(), *d) == t.dtypes.end()) {
      return f.field_error("dtypes", "'" + name + "' is not among the target's dtypes");
    }
    b->dtypes.push_back(*d);
  }
  if (b->dtypes.empty())
    return f.field_error("dtypes", "needs at least one of the target's dtypes");
  if (const nlohmann::json* bench = f.raw("benchmark")) {
    KILN_ASSIGN_OR_RETURN(b->benchmark, shape_from_json(*bench, f.where("benchmark"), t.dims));
  }
  KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> seed, f.object("seed", true));
  KILN_RETURN_IF_ERROR(read_kernel(*seed, dir, false, &b->seed));
  KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> tmpl, f.object("template"));
  if (tmpl) {
    b->tunable.emplace();
    KILN_RETURN_IF_ERROR(read_kernel(*tmpl, dir, true, &*b->tunable));
  }
  return f.finish();
}

bool known_adversarial_distribution(const std::string& name) {
  for (const char* n : {"large_magnitude", "small_magnitude", "mixed_scale", "all_equal", "zeros", "special"}) {
    if (name == n) return true;
  }
  return false;
}

}  // namespace

const BackendSpec* TargetSpec::backend(const std::string& name) const {
  auto it = backends.find(name);
  return it == backends.end() ? nullptr : &it->second;
}

const Shape& TargetSpec::benchmark_for(const std::string& name) const {
  const BackendSpec* b = backend(name);
  return b && b->benchmark ? *b->benchmark : benchmark;
}

std::vector<Shape> TargetSpec::verification_shapes() const {
  std::vector<Shape> shapes = smoke;
  shapes.insert(shapes.end(), sweep.begin(), sweep.end());
  shapes.insert(shapes.end(), edge.begin(), edge.end());
  return shapes;
}

std::vector<const TargetArg*> TargetSpec::inputs() const {
  std::vector<const TargetArg*> v;
  for (const auto& a : args) if (a.role == TargetArg::Role::kInput) v.push_back(&a);
  return v;
}
std::vector<const TargetArg*> TargetSpec::outputs() const {
  std::vector<const TargetArg*> v;
  for (const auto& a : args) if (a.role == TargetArg::Role::kOutput) v.push_back(&a);
  return v;
}
std::vector<const TargetArg*> TargetSpec::scalars() const {
  std::vector<const TargetArg*> v;
  for (const auto& a : args) if (a.role == TargetArg::Role::kScalar) v.push_back(&a);
  return v;
}

ExprVars expr_vars(const Shape& shape, DType dtype, const std::map<std::string, std::string>& params) {
  ExprVars v;
  for (const auto& [d, n] : shape) v[d] = static_cast<double>(n);
  v["S"] = static_cast<double>(dtype_bytes(dtype));
  for (const auto& [k, value] : params) {
    char* end = nullptr;
    double x = std::strtod(value.c_str(), &end);
    if (end && *end == '\0' && !value.empty()) v[k] = x;  // non-numeric macros are not variables
  }
  return v;
}

Tolerance tolerance_at(const TargetSpec& target, DType dtype, const Shape& shape) {
  Tolerance tol = target.tolerance.at(dtype);
  if (tol.scale.empty()) return tol;
  Result<double> k = eval_expr(tol.scale, expr_vars(shape, dtype, {}));
  if (k.is_ok() && *k > 0) {
    tol.rel *= *k;
    tol.abs *= *k;
  }
  return tol;
}

int64_t element_count(const TargetArg& arg, const Shape& shape) {
  int64_t n = 1;
  for (const auto& d : arg.shape) n *= shape.at(d);
  return n;
}

bool uses_terms(const TargetSpec& target) {
  return std::any_of(target.tolerance.begin(), target.tolerance.end(),
                     [](const auto& dt) { return dt.second.terms > 0; });
}

std::vector<std::string> reference_row_dims(const TargetSpec& target) {
  if (!target.reference_rows.empty()) return target.reference_rows;
  std::string first;
  for (const auto* o : target.outputs()) {
    if (o->shape.empty() || (!first.empty() && o->shape.front() != first)) return {};
    first = o->shape.front();
  }
  if (first.empty()) return {};
  return {first};
}

Status check_shape(const std::vector<std::string>& dims, const Shape& shape) {
  for (const auto& [d, n] : shape) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      std::string names;
      for (const auto& name : dims) names += (names.empty() ? "" : ", ") + name;
      return invalid_argument("no dim '" + log_safe(d, 40) + "' (the dims: " + names + ")");
    }
    if (n < 1 || n > kMaxDimSize) {
      return invalid_argument(d + ": expected a positive integer below 2^31, got " +
                              std::to_string(n));
    }
  }
  for (const auto& d : dims) {
    if (!shape.count(d)) return invalid_argument("dim '" + d + "' missing");
  }
  return Status::ok();
}

Status check_shape(const TargetSpec& target, const Shape& shape) {
  Status ok = check_shape(target.dims, shape);
  for (const TargetArg& a : target.args) {
    if (!ok.is_ok()) break;
    if (a.role == TargetArg::Role::kScalar) continue;
    double elements = 1;  // exact enough: the limit is far below where a double rounds
    for (const auto& d : a.shape) elements *= static_cast<double>(shape.at(d));
    if (elements > static_cast<double>(kMaxTensorElements)) {
      char count[32];
      std::snprintf(count, sizeof count, "%.3g", elements);
      ok = invalid_argument("tensor '" + a.name + "' would hold " + count +
                            " elements; kiln takes at most 2^40 per tensor");
    }
  }
  if (ok.is_ok()) return ok;
  return invalid_argument("shape " + shape_string(shape) + " of '" + target.name +
                          "': " + ok.message());
}

Result<Shape> shape_from_json(const nlohmann::json& j, const std::string& where,
                              const std::vector<std::string>& dims) {
  if (!j.is_object()) return invalid_argument(where + ": expected an object of dim sizes");
  Shape shape;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it->is_number_integer()) {
      return invalid_argument(where + "." + it.key() + ": expected a positive integer below 2^31");
    }
    shape[it.key()] = it->get<int64_t>();
  }
  Status ok = check_shape(dims, shape);
  if (!ok.is_ok()) return invalid_argument(where + ": " + ok.message());
  return shape;
}

std::string shape_string(const Shape& shape) {
  std::string s;
  for (const auto& [d, n] : shape) s += (s.empty() ? "" : ",") + d + "=" + std::to_string(n);
  return s;
}

// "leaderboard": the GPU MODE task the target reproduces; every input is mapped from `data`.
Status read_leaderboard(JsonFields& f, TargetSpec* t) {
  KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> lb, f.object("leaderboard"));
  if (!lb) return Status::ok();
  LeaderboardTask task;
  KILN_RETURN_IF_ERROR(lb->get("task", &task.task, true));
  KILN_RETURN_IF_ERROR(lb->get("gpus", &task.gpus, true));
  KILN_RETURN_IF_ERROR(lb->get("inputs", &task.inputs, true));
  KILN_RETURN_IF_ERROR(lb->get("outputs", &task.outputs));
  KILN_RETURN_IF_ERROR(lb->get("result", &task.result, true));
  KILN_RETURN_IF_ERROR(lb->get("bit_exact", &task.bit_exact));
  KILN_RETURN_IF_ERROR(lb->finish());
  if (task.gpus.empty()) return lb->field_error("gpus", "name at least one GPU of the leaderboard");
  for (const TargetArg* in : t->inputs()) {
    if (!task.inputs.count(in->name))
      return lb->field_error("inputs", "input '" + in->name + "' is not taken from data");
  }
  for (const auto& [name, expr] : task.inputs) {
    bool known = false;
    for (const TargetArg* in : t->inputs()) known |= in->name == name;
    if (!known) return lb->field_error("inputs", "'" + name + "' is not an input of the target");
  }
  for (const auto& [name, expr] : task.outputs) {
    bool known = false;
    for (const TargetArg* out : t->outputs()) known |= out->name == name;
    if (!known) return lb->field_error("outputs", "'" + name + "' is not an output of the target");
  }
  t->leaderboard = std::move(task);
  return Status::ok();
}

Result<TargetSpec> load_target(const std::string& dir_str) {
  fs::path dir(dir_str);
  std::string source = (dir / "target.json").string();
  KILN_ASSIGN_OR_RETURN(nlohmann::json doc, load_json_file(source));
  TargetSpec t;
  t.dir = dir.string();
  JsonFields f(doc, source);
  KILN_RETURN_IF_ERROR(f.status());
  KILN_RETURN_IF_ERROR(f.get("name", &t.name, true));
  KILN_RETURN_IF_ERROR(f.get("description", &t.description));
  KILN_RETURN_IF_ERROR(f.get("dims", &t.dims, true));
  if (!is_identifier(t.name)) return f.field_error("name", "expected an identifier");
  if (t.dims.empty()) return f.field_error("dims", "needs at least one dim");
  for (size_t i = 0; i < t.dims.size(); ++i) {
    const std::string& d = t.dims[i];
    if (!is_identifier(d) || d == "S" || d == "T") {
      return f.field_error("dims", "'" + log_safe(d, 40) + "' is not a usable dim name");
    }
    if (std::find(t.dims.begin(), t.dims.begin() + i, d) != t.dims.begin() + i) {
      return f.field_error("dims", "'" + d + "' appears twice");
    }
  }

  const nlohmann::json* args = f.raw("args");
  if (!args || !args->is_array() || args->empty()) return f.field_error("args", "expected a non-empty array");
  std::set<std::string> names;
  for (size_t i = 0; i < args->size(); ++i) {
    JsonFields a((*args)[i], source, "args[" + std::to_string(i) + "]");
    KILN_RETURN_IF_ERROR(a.status());
    TargetArg arg;
    std::string role;
    KILN_RETURN_IF_ERROR(a.get("name", &arg.name, true));
    KILN_RETURN_IF_ERROR(a.get("role", &role, true));
    KILN_RETURN_IF_ERROR(a.get("dtype", &arg.dtype));
    KILN_RETURN_IF_ERROR(a.get("shape", &arg.shape));
    KILN_RETURN_IF_ERROR(a.get("value", &arg.value));
    KILN_RETURN_IF_ERROR(a.get("type", &arg.scalar_type));
    KILN_RETURN_IF_ERROR(a.get("index_bound", &arg.index_bound));
    KILN_RETURN_IF_ERROR(a.get("scale", &arg.scale));
    KILN_RETURN_IF_ERROR(a.finish());
    if (!is_identifier(arg.name) || !names.insert(arg.name).second) {
      return a.field_error("name", "'" + log_safe(arg.name, 40) + "' is not a unique identifier");
    }
    if (std::find(t.dims.begin(), t.dims.end(), arg.name) != t.dims.end()) {
      return a.field_error("name", "'" + arg.name + "' is also a dim (the kernel takes both)");
    }
    if (role == "input") arg.role = TargetArg::Role::kInput;
    else if (role == "output") arg.role = TargetArg::Role::kOutput;
    else if (role == "scalar") arg.role = TargetArg::Role::kScalar;
    else if (role == "scratch") arg.role = TargetArg::Role::kScratch;
    else return a.field_error("role", "'" + role + "': expected input, output, scratch or scalar");
    if (!arg.scale.empty() && (arg.role != TargetArg::Role::kInput || !arg.index_bound.empty())) {
      return a.field_error("scale", "only for inputs with values (not index inputs)");
    }
    if (!arg.index_bound.empty()) {
      const Result<DType> d = parse_dtype(arg.dtype);
      if (arg.role != TargetArg::Role::kInput || !d.is_ok() || dtype_is_float(*d)) {
        return a.field_error("index_bound", "only for inputs of a fixed integer dtype (i32, i64)");
      }
    }
    if (arg.role == TargetArg::Role::kScalar) {
      if (arg.scalar_type != "f32" && arg.scalar_type != "i64") {
        return a.field_error("type", "scalars are f32 or i64");
      }
    } else {
      if (arg.shape.empty()) return a.field_error("shape", "a tensor needs a shape");
      for (const auto& d : arg.shape) {
        if (std::find(t.dims.begin(), t.dims.end(), d) == t.dims.end()) {
          return a.field_error("shape", "unknown dim '" + d + "' (dims are declared in 'dims')");
        }
      }
      if (arg.dtype != "T" && !parse_dtype(arg.dtype).is_ok()) {
        return a.field_error("dtype", "'" + arg.dtype + "': expected T or a dtype name");
      }
    }
    t.args.push_back(std::move(arg));
  }
  if (t.inputs().empty() || t.outputs().empty()) {
    return f.field_error("args", "needs at least one input and one output");
  }

  std::vector<std::string> dtypes;
  KILN_RETURN_IF_ERROR(f.get("dtypes", &dtypes, true));
  for (const auto& name : dtypes) {
    Result<DType> d = parse_dtype(name);
    if (!d.is_ok()) return f.field_error("dtypes", d.status().message());
    t.dtypes.push_back(*d);
  }
  if (t.dtypes.empty()) return f.field_error("dtypes", "needs at least one dtype");

  KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> tol, f.object("tolerance", true));
  for (DType d : t.dtypes) {
    KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> one, tol->object(std::string(dtype_name(d)), true));
    Tolerance tl;
    KILN_RETURN_IF_ERROR(one->get("rel", &tl.rel, true));
    KILN_RETURN_IF_ERROR(one->get("abs", &tl.abs, true));
    KILN_RETURN_IF_ERROR(one->get("rms", &tl.rms));
    KILN_RETURN_IF_ERROR(one->get("terms", &tl.terms));
    KILN_RETURN_IF_ERROR(one->get("scale", &tl.scale));
    if (!tl.scale.empty()) {
      // Checked with every dim 1 (the shapes are read later); each case's shape scales it.
      ExprVars ones;
      for (const auto& dim : t.dims) ones[dim] = 1;
      Result<double> v = eval_expr(tl.scale, ones);
      if (!v.is_ok() || *v <= 0) {
        return one->field_error(
            "scale", "expected a positive expression of the dims (" +
                         (v.is_ok() ? std::string("it is not positive") : v.status().message()) +
                         ")");
      }
    }
    KILN_RETURN_IF_ERROR(one->finish());
    if (!(tl.rel >= 0 && tl.abs >= 0 && tl.rms >= 0 && tl.terms >= 0) ||
        !std::isfinite(tl.rel + tl.abs + tl.rms + tl.terms)) {
      return tol->field_error(std::string(dtype_name(d)), "tolerances are finite numbers >= 0");
    }
    t.tolerance[d] = tl;
  }
  KILN_RETURN_IF_ERROR(tol->finish());

  KILN_RETURN_IF_ERROR(f.get("precision_factor", &t.precision_factor));
  if (!(t.precision_factor >= 1) || !std::isfinite(t.precision_factor)) {
    return f.field_error(
        "precision_factor",
        "must be a number >= 1 (how many times the seed's error a candidate may have)");
  }
  KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> skip, f.object("adversarial_skip"));
  if (skip) {
    for (DType d : t.dtypes) {
      KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> one, skip->object(std::string(dtype_name(d))));
      if (!one) continue;
      auto& [names, reason] = t.adversarial_skip[d];
      KILN_RETURN_IF_ERROR(one->get("distributions", &names, true));
      KILN_RETURN_IF_ERROR(one->get("reason", &reason, true));
      KILN_RETURN_IF_ERROR(one->finish());
      if (reason.empty()) return one->field_error("reason", "say why these inputs are left out");
      for (const auto& n : names) {
        if (!known_adversarial_distribution(n)) {
          return one->field_error("distributions", "'" + n + "' is not an adversarial distribution "
                                  "(large_magnitude, small_magnitude, mixed_scale, all_equal, zeros, special)");
        }
      }
    }
    KILN_RETURN_IF_ERROR(skip->finish());
  }

  KILN_RETURN_IF_ERROR(read_leaderboard(f, &t));

  KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> shapes, f.object("shapes", true));
  const nlohmann::json* bench = shapes->raw("benchmark");
  if (!bench) return shapes->field_error("benchmark", "missing (required)");
  KILN_ASSIGN_OR_RETURN(t.benchmark, shape_from_json(*bench, shapes->where("benchmark"), t.dims));
  KILN_RETURN_IF_ERROR(read_shape_list(*shapes, "smoke", t.dims, true, &t.smoke));
  // Required: the sweep stage, and the precision stage that compares at its shapes, would pass
  // with no cases.
  KILN_RETURN_IF_ERROR(read_shape_list(*shapes, "sweep", t.dims, true, &t.sweep));
  KILN_RETURN_IF_ERROR(read_shape_list(*shapes, "edge", t.dims, false, &t.edge));
  KILN_RETURN_IF_ERROR(shapes->finish());

  KILN_RETURN_IF_ERROR(f.get("bytes", &t.bytes_expr, true));
  KILN_RETURN_IF_ERROR(f.get("flops", &t.flops_expr, true));
  KILN_RETURN_IF_ERROR(f.get("reference", &t.reference_file, true));
  {
    Result<std::string> text = read_text(dir / t.reference_file);
    if (!text.is_ok()) return f.field_error("reference", text.status().message());
    t.reference_source = std::move(text).value();
  }
  KILN_RETURN_IF_ERROR(f.get("reference_rows", &t.reference_rows));
  for (const TargetArg* out : t.outputs()) {
    const bool prefix =
        out->shape.size() >= t.reference_rows.size() &&
        std::equal(t.reference_rows.begin(), t.reference_rows.end(), out->shape.begin());
    if (!prefix) {
      return f.field_error("reference_rows", "must be leading dims of every output's shape ('" +
                                                 out->name + "' does not start with them)");
    }
  }

  KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> backends, f.object("backends", true));
  for (std::string_view backend : kBackends) {
    const std::string name(backend);
    KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> b, backends->object(name));
    if (!b) continue;
    KILN_RETURN_IF_ERROR(read_backend(*b, dir, t, &t.backends[name]));
  }
  KILN_RETURN_IF_ERROR(backends->finish());
  if (t.backends.empty())
    return f.field_error("backends", "needs at least one of cuda, cpu, triton");
  KILN_RETURN_IF_ERROR(f.finish());
  KILN_RETURN_IF_ERROR(check_shape_sizes(t, source));
  KILN_RETURN_IF_ERROR(check_kernel_names(t, source));
  KILN_RETURN_IF_ERROR(check_expressions(t, source));

  Sha256 h;
  h.add(doc.dump()).add(t.reference_source);
  for (const auto& [name, b] : t.backends) {
    h.add(name).add(b.seed.source);
    if (b.tunable) h.add(b.tunable->source);
  }
  t.spec_hash = h.hex();
  return t;
}

Result<std::vector<TargetSpec>> load_targets(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return not_found("targets folder " + root + " does not exist");
  std::vector<std::string> dirs;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.is_directory() && fs::exists(entry.path() / "target.json")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<TargetSpec> out;
  for (const auto& d : dirs) {
    KILN_ASSIGN_OR_RETURN(TargetSpec t, load_target(d));
    if (const std::string folder = fs::path(d).filename().string(); t.name != folder) {
      return invalid_argument(d + "/target.json: field 'name': '" + t.name +
                              "' is not its folder's name '" + folder +
                              "'; in a targets folder each target's folder carries its name");
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string default_targets_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path bundled = exe.parent_path().parent_path() / "share" / "kiln" / "targets";
    if (fs::is_directory(bundled, ec)) return bundled.string();
  }
  return KILN_SOURCE_TARGETS_DIR;
}

}  // namespace kiln
