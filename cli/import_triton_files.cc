// reference.cpp's skeleton and IMPORTED.md for `kiln import-triton`.
#include "cli/import_triton_files.h"

#include <sstream>

namespace kiln::cli {
namespace {

constexpr const char* kSkeletonMarker = "KILN_IMPORT_TRITON_SKELETON";

std::string shape_comment(const nlohmann::json& arg) {
  std::string s;
  for (const auto& d : arg.value("shape", nlohmann::json::array())) {
    s += (s.empty() ? "" : ", ") + d.get<std::string>();
  }
  return "[" + s + "], row-major";
}

std::string product(const nlohmann::json& arg) {
  std::string s;
  for (const auto& d : arg.value("shape", nlohmann::json::array())) {
    s += (s.empty() ? "" : " * ") + d.get<std::string>();
  }
  return s;
}

}  // namespace

std::string reference_skeleton(const nlohmann::json& target, const std::string& from_file,
                               const std::string& kernel) {
  std::ostringstream o;
  const std::string name = target.value("name", kernel);
  o << "// The trusted reference of " << name << ", imported by `kiln import-triton` from "
    << from_file << "\n"
    << "// (kernel '" << kernel << "'). " << kSkeletonMarker << ": a skeleton for you to fill in.\n"
    << "//\n"
    << "// kiln verifies every kernel against what kiln_reference computes, in fp64 on the host\n"
    << "// (docs/targets.md, \"Reference ABI\"): the inputs arrive as the values the kernel saw,\n"
    << "// widened to double; write each output element. Until you do, the lines marked below\n"
    << "// fill the outputs with a pattern no kernel writes, so every kernel fails verification\n"
    << "// (and kiln says why on stderr) instead of passing unchecked. Delete them and this\n"
    << "// marker's line when the reference is written.\n"
    << "#include <atomic>\n#include <cmath>\n#include <cstdint>\n#include <cstdio>\n\n"
    << "extern \"C\" void kiln_reference(const double* const* in, double* const* out,\n"
    << "                               const int64_t* dims, const double* scalars) {\n";
  const nlohmann::json dims = target.value("dims", nlohmann::json::array());
  for (size_t i = 0; i < dims.size(); ++i) {
    o << "  const int64_t " << dims[i].get<std::string>() << " = dims[" << i << "];\n";
  }
  size_t n_in = 0, n_out = 0, n_scalar = 0;
  std::vector<std::pair<std::string, std::string>> outputs;  // name, element count
  std::vector<std::string> unused;
  for (const auto& a : target.value("args", nlohmann::json::array())) {
    const std::string role = a.value("role", ""), arg = a.value("name", "");
    if (role == "scalar") {
      o << "  const double " << arg << " = scalars[" << n_scalar++ << "];  // "
        << a.value("type", "") << ", " << a.value("value", nlohmann::json()).dump() << "\n";
      unused.push_back(arg);
    } else if (role == "input") {
      o << "  const double* " << arg << " = in[" << n_in++ << "];  // " << shape_comment(a) << "\n";
      unused.push_back(arg);
    } else if (role == "output") {
      o << "  double* " << arg << " = out[" << n_out++ << "];  // " << shape_comment(a) << "\n";
      outputs.emplace_back(arg, product(a));
    }
  }
  for (const auto& d : dims) unused.push_back(d.get<std::string>());
  o << "\n  // TODO: compute";
  for (size_t i = 0; i < outputs.size(); ++i) o << (i ? ", " : " ") << outputs[i].first;
  o << " here.\n\n"
    << "  // " << kSkeletonMarker << " (delete from here to the closing brace):\n"
    << "  static std::atomic<bool> told{false};\n"
    << "  if (!told.exchange(true)) {\n"
    << "    std::fprintf(stderr, \"kiln: the reference of " << name
    << " is still the skeleton that kiln import-triton \"\n"
    << "                         \"wrote: fill in its reference.cpp; every kernel fails "
       "verification until then\\n\");\n"
    << "  }\n";
  for (const auto& [arg, count] : outputs) {
    o << "  for (int64_t i = 0; i < " << count << "; ++i) " << arg
      << "[i] = i % 2 ? std::nan(\"\") : 1e4;\n";
  }
  for (const auto& u : unused) o << "  (void)" << u << ";\n";
  o << "}\n";
  return o.str();
}

bool is_reference_skeleton(const std::string& text) {
  return text.find(kSkeletonMarker) != std::string::npos;
}

std::string imported_markdown(const ImportSummary& s) {
  std::ostringstream o;
  const std::string name = s.target.value("name", s.kernel);
  o << "# " << name << ": imported from " << s.from_file << "\n\n"
    << "`kiln import-triton " << s.from_file << " --kernel " << s.kernel
    << "` ran that file until its first launch of `" << s.kernel
    << "`, read the launch (tensors, integers, constexprs, grid, launch settings) and wrote this "
       "target (docs/import-triton.md).\n\n"
    << "## Files\n\n"
    << "- `target.json`: dims, arguments, shapes and the Triton seed and template "
       "(docs/targets.md).\n"
    << "- `kernel_triton.py`: `" << s.kernel << "` as written in " << s.from_file
    << ", with the helpers and constants it uses, and the entry point `kiln_" << s.kernel
    << "`, which takes kiln's calling convention and calls it.\n"
    << "- `reference.cpp`: "
    << (s.own_reference ? "your reference (--reference, or the one the folder had)."
                        : "**a skeleton to fill in**: kiln cannot guess what the kernel "
                          "computes. Until it is written every kernel fails verification.")
    << "\n\n## What kiln guessed: check these\n\n"
    << "- The benchmark shape is the captured launch's; the smoke, sweep and edge shapes are "
       "smaller (no dim above its captured value), with odd sizes and 1s. A kernel that needs "
       "sizes that are multiples of its blocks fails the edge shapes: edit `shapes`.\n"
    << "- `flops` is 0 (unknown): write the kernel's flop count (e.g. `2*M*N*K` for a matmul) "
       "so that kiln's floor counts its compute; `bytes` is every tensor read or written once.\n"
    << "- The tolerance is kiln's default for the dtype; see docs/targets.md, \"Choosing "
       "tolerances\".\n";
  for (const auto& n : s.notes) o << "- " << n << "\n";
  o << "\n## Next\n\n";
  for (size_t i = 0; i < s.next.size(); ++i) o << i + 1 << ". " << s.next[i] << "\n";
  return o.str();
}

}  // namespace kiln::cli
