// The C++ side of an export: the kernel with its prelude and parameters baked in, and a host
// launcher that computes grid, block and shared memory from the target's expressions at any shape
// (checking the configuration's constraints and the launch limits first, with a message that
// says which one fails). cuda: <target>.cuh + <target>.cu; cpu: <target>.h + <target>.cc. Both
// come with a CMake snippet. The torch, gpumode and kernelbench exports build on these texts.
#pragma once

#include <string>
#include <vector>

#include "export/candidate.h"

namespace kiln::exporter {

// One file of an export: its name inside the export folder and its text.
struct ExportFile {
  std::string name;
  std::string text;
};

// One argument of the launcher, in the calling convention's order (docs/targets.md): tensors in
// the order of `args`, then every dim, then the scalars.
struct LaunchArg {
  enum class Kind { kInput, kOutput, kScratch, kDim, kScalar } kind = Kind::kInput;
  std::string name;                // code_name() of the spec's name
  std::string spec_name;           // as target.json spells it
  std::string ctype;               // element type of a tensor, or the type of a dim or scalar
  DType dtype = DType::kF32;       // tensors: element dtype
  std::vector<std::string> shape;  // tensors: dim names
  std::string default_value;       // scalars: the value kiln verified with, as C++ text
};

// `name` (an arg or dim of the target) as an identifier in C++ and Python: itself, or with a '_'
// appended when it is a keyword of either ("class", "lambda", "from", ...).
std::string code_name(const std::string& name);

// The launcher's arguments for `c` (cuda or cpu types), named by code_name().
std::vector<LaunchArg> launch_args(const ExportCandidate& c);

// A C++ string literal of `s`: quotes and backslashes escaped, control bytes and non-ASCII as octal
// escapes.
std::string cpp_string_literal(const std::string& s);

// The arguments as a C++ parameter list ("const T* x, T* y, long long M, float eps = 1e-06f") or,
// without types, as the names that forward them.
std::string launch_arg_list(const std::vector<LaunchArg>& args, bool with_types,
                            bool with_defaults);
// The arguments of one kind, in order.
std::vector<LaunchArg> launch_args_of(const std::vector<LaunchArg>& args, LaunchArg::Kind kind);

// The C++ identifier of the export's namespace: "kiln_" + the target's name made an identifier.
std::string export_namespace(const ExportCandidate& c);

// The files of the C++ export. Fails when an expression cannot be written as C++.
Result<std::vector<ExportFile>> source_export(const ExportCandidate& c,
                                              const std::string& header_note);

// The kernel's translation unit text alone (prelude, parameters, kernel, launcher), which the
// Python exports inline; `header_include` is the line that brings in the declarations (or the
// declarations themselves).
Result<std::string> kernel_unit(const ExportCandidate& c, const std::string& header_include);

// The header text (declarations) without include guards' dependence on a file name.
Result<std::string> launcher_header(const ExportCandidate& c, const std::string& header_note);

}  // namespace kiln::exporter
