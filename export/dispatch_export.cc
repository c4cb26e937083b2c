// Dispatch table exports: see dispatch_export.h.
#include "export/dispatch_export.h"

#include <cstdio>

#include "shared/text.h"

namespace kiln::exporter {
namespace {

std::string shown_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string configuration_text(const ExportCandidate& c) {
  return (c.is_template ? "template " : "seed ") + params_text(c.params);
}

}  // namespace

nlohmann::json dispatch_table_json(const std::vector<ExportCandidate>& entries) {
  nlohmann::json table = nlohmann::json::array();
  for (size_t k = 0; k < entries.size(); ++k) {
    const ExportCandidate& c = entries[k];
    table.push_back({{"variant", "v" + std::to_string(k)},
                     {"gpu_model", c.gpu_model},
                     {"shape", c.shape},
                     {"configuration", configuration_text(c)},
                     {"params", c.params},
                     {"best_us", c.best_us},
                     {"candidate_id", c.candidate_id}});
  }
  return table;
}

Result<std::vector<ExportFile>> dispatch_export(std::vector<ExportCandidate> entries,
                                                const std::string& header_note) {
  if (entries.empty()) return invalid_argument("a dispatch table needs at least one entry");
  const ExportCandidate& first = entries.front();
  for (const ExportCandidate& c : entries) {
    if (c.target.name != first.target.name || c.backend != first.backend ||
        c.dtype != first.dtype) {
      return invalid_argument(
          "the entries of a dispatch table must share target, backend and dtype");
    }
    if (!check_shape(c.target, c.shape).is_ok()) {
      return invalid_argument("entry " + c.origin + " has no shape of the target's dims");
    }
  }
  const bool cuda = first.backend == "cuda";
  const std::string H = cuda ? ".cuh" : ".h", U = cuda ? ".cu" : ".cc";
  const std::string base = first.target.name;
  ExportCandidate plain = first;
  plain.variant.clear();
  const std::string ns = export_namespace(plain);
  const std::vector<LaunchArg> args = launch_args(plain);
  const std::vector<LaunchArg> dim_args = launch_args_of(args, LaunchArg::Kind::kDim);
  const std::vector<LaunchArg> scratch = launch_args_of(args, LaunchArg::Kind::kScratch);
  const std::string dims = launch_arg_list(dim_args, true, false);
  const std::string dim_names = launch_arg_list(dim_args, false, false);

  std::vector<ExportFile> files;
  std::string includes, units_cmake;
  for (size_t k = 0; k < entries.size(); ++k) {
    ExportCandidate& c = entries[k];
    c.variant = "v" + std::to_string(k);
    const std::string stem = base + "_" + c.variant;
    KILN_ASSIGN_OR_RETURN(std::string header, launcher_header(c, header_note));
    KILN_ASSIGN_OR_RETURN(std::string body, kernel_unit(c, "#include \"" + stem + H + "\"\n"));
    files.push_back({stem + H, header});
    files.push_back({stem + U, header_note + body});
    includes += "#include \"" + stem + H + "\"\n";
    units_cmake += " ${CMAKE_CURRENT_LIST_DIR}/" + stem + U;
  }

  // The header users include.
  std::string h =
      header_note + "#pragma once\n\n#include <cstddef>\n#include <cstdint>\n#include <string>\n";
  if (cuda) h += "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n";
  h += "\n#include \"" + base + "_v0" + H + "\"\n\nnamespace " + ns + " {\n\n";
  h += "// The element type kiln verified these kernels with (" +
       std::string(dtype_name(first.dtype)) + ").\n";
  h += "using T = " + export_namespace(entries[0]) + "::T;\n\n";
  h += "// The dispatch table: kiln's best configuration per shape it searched and GPU model.\n";
  h += "struct Entry {\n  const char* gpu_model;      // \"\" for any\n  const char* shape;\n"
       "  const char* configuration;\n  double best_us;            // its time at that shape\n};\n";
  h += "extern const Entry kEntries[];\nextern const int kEntryCount;\n\n";
  h +=
      "// The entry launch() uses at this shape on the current device: the nearest searched shape\n"
      "// (sum over dims of |log2| of the ratio) among this GPU model's entries whose "
      "configuration\n"
      "// can run it, else among every model's; -1 when none can.\n";
  h += "int entry(" + dims + ");\n\n";
  h += "// Why no entry can run at this shape, or \"\" when one can.\n";
  h += "std::string check(" + dims + ");\n\n";
  for (const auto& s : scratch) {
    h += "// Bytes of the scratch buffer `" + s.name +
         "` for any entry at this shape (zero it once).\n";
    h += "size_t " + s.name + "_bytes(" + dims + ");\n\n";
  }
  if (cuda) {
    h += "// Launches the entry() kernel on `stream`; cudaErrorInvalidValue without launching when "
         "no\n"
         "// entry can run the shape (the reason in *why when given).\n";
    h += "cudaError_t launch(" + launch_arg_list(args, true, true) +
         ", cudaStream_t stream = 0, std::string* why = nullptr);\n";
  } else {
    h += "// Runs the entry() kernel; false without running when no entry can run the shape.\n";
    h += "bool launch(" + launch_arg_list(args, true, true) + ", std::string* why = nullptr);\n";
  }
  h += "\n}  // namespace " + ns + "\n";
  files.push_back({base + H, h});

  // The dispatcher.
  std::string u = header_note + includes + "#include \"" + base + H + "\"\n\n";
  u += "#include <algorithm>\n#include <cmath>\n#include <map>\n#include <mutex>\n\nnamespace " +
       ns + " {\n\n";
  u += "const Entry kEntries[] = {\n";
  for (const ExportCandidate& c : entries) {
    u += "    {" + cpp_string_literal(c.gpu_model) + ", " +
         cpp_string_literal(shape_string(c.shape)) + ", " +
         cpp_string_literal(configuration_text(c)) + ", " + shown_number(c.best_us) + "},\n";
  }
  u += "};\nconst int kEntryCount = " + std::to_string(entries.size()) + ";\n\nnamespace {\n\n";
  u += "// Each entry's shape, dims in the launcher's order.\nconst double kShapes[][" +
       std::to_string(dim_args.size()) + "] = {\n";
  for (const ExportCandidate& c : entries) {
    u += "    {";
    for (size_t d = 0; d < dim_args.size(); ++d) {
      u += (d ? ", " : "") + std::to_string(c.shape.at(dim_args[d].spec_name)) + ".0";
    }
    u += "},\n";
  }
  u += "};\n\n";
  if (cuda) {
    u += "std::string device_model() {\n  int device = 0;\n  if (cudaGetDevice(&device) != "
         "cudaSuccess) return \"\";\n"
         "  static std::mutex mu;\n  static std::map<int, std::string> names;\n"
         "  std::lock_guard<std::mutex> lock(mu);\n  auto it = names.find(device);\n"
         "  if (it != names.end()) return it->second;\n  cudaDeviceProp p;\n"
         "  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return \"\";\n"
         "  return names[device] = p.name;\n}\n\n";
  } else {
    u += "std::string device_model() { return \"\"; }\n\n";
  }
  u += "std::string can_run(int k, " + dims + ") {\n  switch (k) {\n";
  for (size_t k = 0; k < entries.size(); ++k) {
    u += "    case " + std::to_string(k) + ":\n      return " + export_namespace(entries[k]) +
         "::check(" + dim_names + ");\n";
  }
  u += "  }\n  return \"no such entry\";\n}\n\n";
  u += "// Entries nearest first, this GPU model's (or any model's) before the others'.\n";
  u += "void order(" + dims + ", int* out) {\n  const double at[] = {";
  for (size_t d = 0; d < dim_args.size(); ++d)
    u += (d ? ", " : "") + std::string("static_cast<double>(") + dim_args[d].name + ")";
  u += "};\n  const std::string model = device_model();\n  double key[" +
       std::to_string(entries.size()) + "];\n";
  u += "  for (int k = 0; k < kEntryCount; ++k) {\n    double d = 0;\n"
       "    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); ++i) d += std::fabs(std::log2(at[i] "
       "/ kShapes[k][i]));\n"
       "    const bool mine = kEntries[k].gpu_model[0] == 0 || model == kEntries[k].gpu_model;\n"
       "    key[k] = (mine ? 0.0 : 1e9) + d;\n    out[k] = k;\n  }\n"
       "  std::stable_sort(out, out + kEntryCount, [&](int a, int b) { return key[a] < key[b]; "
       "});\n}\n\n";
  u += "}  // namespace\n\n";
  auto guard = [&] {
    std::string g;
    for (const auto& d : dim_args) g += "  if (" + d.name + " < 1) return -1;\n";
    return g;
  };
  u += "int entry(" + dims + ") {\n" + guard() + "  int k[" + std::to_string(entries.size()) +
       "];\n  order(" + dim_names +
       ", k);\n  for (int i = 0; i < kEntryCount; ++i) {\n    if (can_run(k[i], " + dim_names +
       ").empty()) return k[i];\n  }\n  return -1;\n}\n\n";
  u += "std::string check(" + dims + ") {\n  if (entry(" + dim_names +
       ") >= 0) return \"\";\n  int k[" + std::to_string(entries.size()) + "];\n  order(" +
       dim_names + ", k);\n  const std::string why = can_run(k[0], " + dim_names +
       ");\n  return \"no entry of the dispatch table runs this shape; the nearest (\" + "
       "std::string(kEntries[k[0]].shape) + \"): \" + why;\n}\n\n";
  for (const auto& s : scratch) {
    u += "size_t " + s.name + "_bytes(" + dims + ") {\n  size_t most = 0;\n";
    for (size_t k = 0; k < entries.size(); ++k) {
      u += "  most = std::max(most, " + export_namespace(entries[k]) + "::" + s.name + "_bytes(" +
           dim_names + "));\n";
    }
    u += "  return most;\n}\n\n";
  }
  const std::string fwd = launch_arg_list(args, false, false);
  if (cuda) {
    u += "cudaError_t launch(" + launch_arg_list(args, true, false) +
         ", cudaStream_t stream, std::string* why) {\n";
  } else {
    u += "bool launch(" + launch_arg_list(args, true, false) + ", std::string* why) {\n";
  }
  u += "  switch (entry(" + dim_names + ")) {\n";
  for (size_t k = 0; k < entries.size(); ++k) {
    u += "    case " + std::to_string(k) + ":\n      return " + export_namespace(entries[k]) +
         "::launch(" + fwd + (cuda ? ", stream" : "") + ", why);\n";
  }
  u += "  }\n  if (why) *why = check(" + dim_names + ");\n  return " +
       (cuda ? "cudaErrorInvalidValue" : "false") + ";\n}\n\n}  // namespace " + ns + "\n";
  files.push_back({base + U, u});

  std::string arch = first.arch.rfind("sm_", 0) == 0 ? first.arch.substr(3) : "90a";
  std::string cmake = "# CMake snippet for kiln's dispatch-table export of " + base + " (" +
                      std::to_string(entries.size()) +
                      " configurations). Add it with\n#   include(path/to/this/folder/" + base +
                      ".cmake)\n# then target_link_libraries(your_target PRIVATE " + ns + ")\n";
  if (cuda) cmake += "enable_language(CUDA)\n";
  cmake +=
      "add_library(" + ns + " STATIC ${CMAKE_CURRENT_LIST_DIR}/" + base + U + units_cmake + ")\n";
  cmake += "target_include_directories(" + ns + " PUBLIC ${CMAKE_CURRENT_LIST_DIR})\n";
  cmake += "target_compile_features(" + ns + " PUBLIC cxx_std_17)\n";
  if (cuda) {
    cmake += "set_target_properties(" + ns + " PROPERTIES CUDA_ARCHITECTURES " + arch + ")\n";
  } else {
    cmake += "target_compile_options(" + ns + " PRIVATE -O3 -march=native)\n";
  }
  files.push_back({base + ".cmake", cmake});
  files.push_back({"dispatch.json", dispatch_table_json(entries).dump(2) + "\n"});
  return files;
}

}  // namespace kiln::exporter
