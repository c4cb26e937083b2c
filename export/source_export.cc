// The C++ export's texts: see source_export.h.
#include "export/source_export.h"

#include <cctype>
#include <cstdio>
#include <set>

#include "evaluator/prelude.h"
#include "export/expr_cpp.h"
#include "export/tensor_map_export.h"

namespace kiln::exporter {
namespace {

std::string ctype_of(const ExportCandidate& c, DType d) {
  const bool cuda = c.is_cuda();
  switch (d) {
    case DType::kF16:
      return cuda ? "__half" : "_Float16";
    case DType::kBF16:
      return "__nv_bfloat16";
    case DType::kF32:
      return "float";
    case DType::kF64:
      return "double";
    case DType::kI32:
      return cuda ? "int" : "int32_t";
    case DType::kI64:
      return cuda ? "long long" : "int64_t";
  }
  return "float";
}

std::string dim_type(const ExportCandidate& c) { return c.is_cuda() ? "long long" : "int64_t"; }

std::string exact_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Expression names: dims as the launcher's doubles d_<dim>, S as the element size, numeric
// parameters as their baked values.
CppNames expression_names(const ExportCandidate& c) {
  CppNames names;
  for (const auto& d : c.target.dims) names[d] = "d_" + d;
  names["S"] = exact_number(static_cast<double>(dtype_bytes(c.dtype)));
  for (const auto& [k, v] : expr_vars({}, c.dtype, c.params)) {
    if (k != "S") names[k] = exact_number(v);
  }
  return names;
}

std::string join_args(const std::vector<LaunchArg>& args, bool with_types, bool with_defaults) {
  std::string out;
  for (const auto& a : args) {
    if (!out.empty()) out += ", ";
    if (!with_types) {
      out += a.name;
      continue;
    }
    switch (a.kind) {
      case LaunchArg::Kind::kInput:
        out += "const " + a.ctype + "* " + a.name;
        break;
      case LaunchArg::Kind::kOutput:
      case LaunchArg::Kind::kScratch:
        out += a.ctype + "* " + a.name;
        break;
      case LaunchArg::Kind::kDim:
        out += a.ctype + " " + a.name;
        break;
      case LaunchArg::Kind::kScalar:
        out += a.ctype + " " + a.name + (with_defaults ? " = " + a.default_value : "");
        break;
    }
  }
  return out;
}

std::vector<LaunchArg> only(const std::vector<LaunchArg>& args, LaunchArg::Kind kind) {
  std::vector<LaunchArg> out;
  for (const auto& a : args)
    if (a.kind == kind) out.push_back(a);
  return out;
}

}  // namespace

std::string cpp_string_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch >= 0x20 && ch < 0x7f) {
      out += static_cast<char>(ch);
    } else {  // control bytes and non-ASCII as octal escapes: the literal stays one line
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", ch);
      out += buf;
    }
  }
  return out + "\"";
}

std::string launch_arg_list(const std::vector<LaunchArg>& args, bool with_types,
                            bool with_defaults) {
  return join_args(args, with_types, with_defaults);
}

std::vector<LaunchArg> launch_args_of(const std::vector<LaunchArg>& args, LaunchArg::Kind kind) {
  return only(args, kind);
}

std::string code_name(const std::string& name) {
  static const std::set<std::string> kKeywords = {
      // C++
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "class", "compl", "concept", "const", "consteval", "constexpr",
      "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype",
      "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export",
      "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
      "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq",
      "private", "protected", "public", "register", "reinterpret_cast", "requires", "return",
      "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch",
      "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
      "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor",
      "xor_eq",
      // names the launcher itself uses
      "T", "stream", "why", "g", "problem", "device", "dims", "torch",
      // Python
      "False", "None", "True", "as", "assert", "async", "await", "def", "del", "elif", "except",
      "finally", "from", "global", "import", "in", "is", "lambda", "nonlocal", "pass", "raise",
      "with", "yield"};
  return kKeywords.count(name) ? name + "_" : name;
}

std::string export_namespace(const ExportCandidate& c) {
  std::string id = "kiln_";
  for (char ch : c.target.name) id += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return c.variant.empty() ? id : id + "_" + c.variant;
}

std::vector<LaunchArg> launch_args(const ExportCandidate& c) {
  std::vector<LaunchArg> out;
  for (const auto& a : c.target.args) {
    if (a.role == TargetArg::Role::kScalar) continue;
    LaunchArg l;
    l.kind = a.role == TargetArg::Role::kInput    ? LaunchArg::Kind::kInput
             : a.role == TargetArg::Role::kOutput ? LaunchArg::Kind::kOutput
                                                  : LaunchArg::Kind::kScratch;
    l.name = code_name(a.name);
    l.spec_name = a.name;
    l.dtype = a.dtype == "T" ? c.dtype : parse_dtype(a.dtype).value_or(c.dtype);
    l.ctype = a.dtype == "T" ? "T" : ctype_of(c, l.dtype);
    for (const auto& d : a.shape) l.shape.push_back(code_name(d));
    out.push_back(l);
  }
  for (const auto& d : c.target.dims) {
    out.push_back({LaunchArg::Kind::kDim, code_name(d), d, dim_type(c), DType::kI64, {}, ""});
  }
  for (const auto* s : c.target.scalars()) {
    const bool i64 = s->scalar_type == "i64";
    LaunchArg l{
        LaunchArg::Kind::kScalar,
        code_name(s->name),
        s->name,
        i64 ? dim_type(c) : "float",
        i64 ? DType::kI64 : DType::kF32,
        {},
        i64 ? std::to_string(static_cast<long long>(s->value)) : exact_number(s->value) + "f"};
    if (!i64 && l.default_value.find_first_of(".e") == std::string::npos)
      l.default_value = exact_number(s->value) + ".0f";
    out.push_back(l);
  }
  return out;
}

Result<std::string> launcher_header(const ExportCandidate& c, const std::string& header_note) {
  const std::vector<LaunchArg> args = launch_args(c);
  const std::string dims = join_args(only(args, LaunchArg::Kind::kDim), true, false);
  const bool cuda = c.is_cuda();
  std::string h = header_note;
  h += "#pragma once\n\n#include <cstddef>\n#include <cstdint>\n#include <string>\n";
  if (cuda) h += "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n";
  h += "\nnamespace " + export_namespace(c) + " {\n\n";
  h += "// The element type kiln verified this kernel with (" + std::string(dtype_name(c.dtype)) +
       ").\n";
  h += "using T = " + ctype_of(c, c.dtype) + ";\n\n";
  if (cuda) {
    h += "struct Geometry {\n  dim3 grid, block;\n  size_t shared_bytes;\n};\n\n";
  }
  h += "// Why the kernel cannot run at this shape, or \"\" when it can: a dim below 1, a "
       "constraint of\n"
       "// the configuration that does not hold, or a launch geometry out of range.\n";
  h += "std::string check(" + dims + ");\n\n";
  if (cuda) {
    h += "// The launch geometry at this shape (meaningful when check() is \"\").\n";
    h += "Geometry geometry(" + dims + ");\n\n";
  }
  for (const auto& s : only(args, LaunchArg::Kind::kScratch)) {
    h += "// Bytes of the scratch buffer `" + s.name +
         "` at this shape. Zero it once before the first launch;\n"
         "// the kernel leaves it as it found it, so it can be kept for later launches of any "
         "shape\n"
         "// that fits (one launch at a time).\n";
    h += "size_t " + s.name + "_bytes(" + dims + ");\n\n";
  }
  if (cuda) {
    h +=
        "// Launches the kernel on `stream` (asynchronous). Returns cudaErrorInvalidValue without\n"
        "// launching when check() fails (its message in *why when given), else the launch's "
        "error.\n";
    h += "cudaError_t launch(" + join_args(args, true, true) +
         ", cudaStream_t stream = 0, std::string* why = nullptr);\n";
  } else {
    h += "// Runs the kernel. Returns false without running it when check() fails (its message in "
         "*why\n"
         "// when given).\n";
    h += "bool launch(" + join_args(args, true, true) + ", std::string* why = nullptr);\n";
  }
  h += "\n}  // namespace " + export_namespace(c) + "\n";
  return h;
}

Result<std::string> kernel_unit(const ExportCandidate& c, const std::string& header_include) {
  const std::vector<LaunchArg> args = launch_args(c);
  const std::vector<LaunchArg> dim_args = only(args, LaunchArg::Kind::kDim);
  const std::string dims = join_args(dim_args, true, false);
  const std::string dim_names = join_args(dim_args, false, false);
  const bool cuda = c.is_cuda();
  const CppNames names = expression_names(c);
  const KernelSpec& k = c.geometry();
  KILN_ASSIGN_OR_RETURN(std::string macro, eval::dtype_macro(c.backend, c.dtype));

  KILN_ASSIGN_OR_RETURN(TensorMapCode maps, tensor_map_code(c, names));
  std::string u = header_include + "\n";
  u += cpp_expr_helpers();
  u += maps.helpers;
  u += "\n// ---- the kernel as kiln verified it: prelude, configuration, source ----\n";
  // The prelude defines helpers for every dtype; the kernel uses some.
  if (cuda) u += "#pragma nv_diag_suppress 177\n";
  u += "#define KILN_DTYPE " + macro + "\n";
  for (const auto& [name, value] : c.params) u += "#define " + name + " " + value + "\n";
  // An entry of a dispatch table: its own symbol, so that every entry links into one program.
  if (!c.variant.empty())
    u += "#define " + c.kernel_name + " " + c.kernel_name + "_" + c.variant + "\n";
  u += eval::with_prelude(c.backend, c.source);
  if (u.back() != '\n') u += '\n';
  u += "// ---- end of the kernel ----\n\n";
  u += "namespace " + export_namespace(c) + " {\nnamespace {\n\n";
  u += "// Every dim as a double, as kiln's expressions see it.\n#define KILN_DIM_DOUBLES";
  for (const auto& d : c.target.dims)
    u +=
        " const double d_" + d + " = static_cast<double>(" + code_name(d) + "); (void)d_" + d + ";";
  u += "\n\nbool whole(double v, double lo, double hi) { return v == v && v >= lo && v <= hi && v "
       "== static_cast<double>(static_cast<long long>(v)); }\n\n";
  u += "std::string shape_text(" + dims + ") {\n  return std::string()";
  for (size_t i = 0; i < dim_args.size(); ++i) {
    u += " + \"" + std::string(i ? "," : "") + dim_args[i].name + "=\" + std::to_string(" +
         dim_args[i].name + ")";
  }
  u += ";\n}\n\n}  // namespace\n\n";

  // check()
  u += "std::string check(" + dims + ") {\n";
  for (const auto& d : dim_args) {
    u += "  if (" + d.name + " < 1) return \"" + d.name + " is \" + std::to_string(" + d.name +
         ") + \": every dim must be at least 1\";\n";
  }
  u += "  KILN_DIM_DOUBLES\n";
  // The configuration's own constraints (those of its parameters alone). A constraint that names
  // a dim selects the template's space at the benchmark shape; kiln verifies the kernel at every
  // listed shape whatever it says there, so it is no requirement on the shape.
  CppNames params_only = names;
  for (const auto& d : c.target.dims) params_only.erase(d);
  for (const auto& expr : k.constraints) {
    Result<std::string> e = expr_to_cpp(expr, params_only);
    if (!e.is_ok()) continue;  // it names a dim
    u += "  if (!(" + *e +
         " != 0.0)) {\n    return \"the configuration does not meet its constraint " +
         cpp_string_literal(expr).substr(1, cpp_string_literal(expr).size() - 2) + "\";\n  }\n";
  }
  static const char* kAxis[] = {"x", "y", "z"};
  if (cuda) {
    u += "  long long threads = 1;\n";
    for (int i = 0; i < 3; ++i) {
      KILN_ASSIGN_OR_RETURN(std::string g, expr_to_cpp(k.grid[i], names));
      KILN_ASSIGN_OR_RETURN(std::string b, expr_to_cpp(k.block[i], names));
      u += "  if (!whole(" + g + ", 1, 2147483647.0)) return \"grid." + kAxis[i] + " (" +
           cpp_string_literal(k.grid[i]).substr(1, cpp_string_literal(k.grid[i]).size() - 2) +
           ") is out of range at \" + shape_text(" + dim_names + ");\n";
      u += "  if (!whole(" + b + ", 1, 1024)) return \"block." + kAxis[i] + " (" +
           cpp_string_literal(k.block[i]).substr(1, cpp_string_literal(k.block[i]).size() - 2) +
           ") is out of range at \" + shape_text(" + dim_names + ");\n";
      u += "  threads *= static_cast<long long>(" + b + ");\n";
    }
    KILN_ASSIGN_OR_RETURN(std::string sm, expr_to_cpp(k.shared_bytes, names));
    u += "  if (threads > 1024) return \"the block has \" + std::to_string(threads) + \" threads "
         "(at most 1024) at \" + shape_text(" +
         dim_names + ");\n";
    u += "  int device = 0, optin = 0;\n"
         "  if (cudaGetDevice(&device) != cudaSuccess ||\n"
         "      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != "
         "cudaSuccess) {\n"
         "    optin = 232448;  // no device to ask: Hopper's limit\n  }\n";
    u += "  const double smem = " + sm + ";\n";
    u += "  if (!whole(smem, 0, static_cast<double>(optin))) {\n"
         "    return \"the kernel needs \" + std::to_string(static_cast<long long>(smem)) + \" "
         "bytes of shared memory at \" +\n"
         "           shape_text(" +
         dim_names + ") + \"; this GPU gives a block at most \" + std::to_string(optin);\n  }\n";
  }
  u += "  return \"\";\n}\n\n";

  if (cuda) {
    u += "Geometry geometry(" + dims + ") {\n  KILN_DIM_DOUBLES\n  Geometry g;\n";
    for (int i = 0; i < 3; ++i) {
      KILN_ASSIGN_OR_RETURN(std::string gx, expr_to_cpp(k.grid[i], names));
      KILN_ASSIGN_OR_RETURN(std::string bx, expr_to_cpp(k.block[i], names));
      u += "  g.grid." + std::string(kAxis[i]) + " = static_cast<unsigned>(" + gx + ");\n";
      u += "  g.block." + std::string(kAxis[i]) + " = static_cast<unsigned>(" + bx + ");\n";
    }
    KILN_ASSIGN_OR_RETURN(std::string sm, expr_to_cpp(k.shared_bytes, names));
    u += "  g.shared_bytes = static_cast<size_t>(" + sm + ");\n  return g;\n}\n\n";
  }
  for (const auto& s : only(args, LaunchArg::Kind::kScratch)) {
    u += "size_t " + s.name + "_bytes(" + dims + ") {\n  return sizeof(" + s.ctype + ")";
    for (const auto& d : s.shape) u += " * static_cast<size_t>(" + d + ")";
    u += ";\n}\n\n";
  }
  std::string call_args = join_args(args, false, false);
  for (const std::string& m : maps.args) call_args += ", " + m;
  if (cuda) {
    u += "cudaError_t launch(" + join_args(args, true, false) +
         ", cudaStream_t stream, std::string* why) {\n";
    u += "  const std::string problem = check(" + dim_names + ");\n";
    u += "  if (!problem.empty()) {\n    if (why) *why = problem;\n    return "
         "cudaErrorInvalidValue;\n  }\n";
    u += "  const Geometry g = geometry(" + dim_names + ");\n";
    if (!maps.args.empty()) u += "  KILN_DIM_DOUBLES\n" + maps.encode;
    u += "  if (g.shared_bytes > 48 * 1024) {\n"
         "    const cudaError_t e = cudaFuncSetAttribute(::" +
         c.kernel_name +
         ", cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(g.shared_bytes));\n"
         "    if (e != cudaSuccess) return e;\n  }\n";
    u += "  ::" + c.kernel_name + "<<<g.grid, g.block, g.shared_bytes, stream>>>(" + call_args +
         ");\n";
    u += "  return cudaGetLastError();\n}\n\n";
  } else {
    u += "bool launch(" + join_args(args, true, false) + ", std::string* why) {\n";
    u += "  const std::string problem = check(" + dim_names + ");\n";
    u += "  if (!problem.empty()) {\n    if (why) *why = problem;\n    return false;\n  }\n";
    u += "  ::" + c.kernel_name + "(" + call_args + ");\n  return true;\n}\n\n";
  }
  u += "}  // namespace " + export_namespace(c) + "\n";
  return u;
}

Result<std::vector<ExportFile>> source_export(const ExportCandidate& c,
                                              const std::string& header_note) {
  const bool cuda = c.is_cuda();
  const std::string base = c.target.name;
  const std::string hdr = base + (cuda ? ".cuh" : ".h");
  const std::string unit = base + (cuda ? ".cu" : ".cc");
  KILN_ASSIGN_OR_RETURN(std::string header, launcher_header(c, header_note));
  KILN_ASSIGN_OR_RETURN(std::string body, kernel_unit(c, "#include \"" + hdr + "\"\n"));
  std::string arch = c.arch.rfind("sm_", 0) == 0 ? c.arch.substr(3) : "90a";
  std::string cmake =
      "# CMake snippet for kiln's export of " + base + " (" + std::string(dtype_name(c.dtype)) +
      "). Add it to your project with\n#   include(path/to/this/folder/" + base +
      ".cmake)\n# then link the library: target_link_libraries(your_target PRIVATE " +
      export_namespace(c) + ")\n";
  if (cuda) {
    cmake += "# The kernel was verified on " + (c.arch.empty() ? std::string("sm_90a") : c.arch) +
             "; it may use that architecture's instructions, so build for it.\n";
    cmake += "enable_language(CUDA)\n";
  }
  cmake +=
      "add_library(" + export_namespace(c) + " STATIC ${CMAKE_CURRENT_LIST_DIR}/" + unit + ")\n";
  cmake +=
      "target_include_directories(" + export_namespace(c) + " PUBLIC ${CMAKE_CURRENT_LIST_DIR})\n";
  cmake += "target_compile_features(" + export_namespace(c) + " PUBLIC cxx_std_17)\n";
  if (cuda) {
    cmake += "set_target_properties(" + export_namespace(c) + " PROPERTIES CUDA_ARCHITECTURES " +
             arch + ")\n";
  } else {
    cmake += "# kiln compiled it with -O3 -march=native; the same flags give the same code.\n";
    cmake += "target_compile_options(" + export_namespace(c) + " PRIVATE -O3 -march=native)\n";
  }
  return std::vector<ExportFile>{
      {hdr, header}, {unit, header_note + body}, {base + ".cmake", cmake}};
}

}  // namespace kiln::exporter
