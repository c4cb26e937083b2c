// The torch, gpumode and kernelbench exports: see python_export.h.
#include "export/python_export.h"

#include <cctype>
#include <cstdio>
#include <set>

namespace kiln::exporter {
namespace {

std::string py_str(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

// A Python raw triple-quoted string holding `text` (kiln's texts never hold three quotes in a
// row; refuse one that does rather than write a broken file).
Result<std::string> py_block(const std::string& text) {
  if (text.find("'''") != std::string::npos)
    return invalid_argument("the kernel text holds ''' and cannot be inlined");
  return "r'''" + text + "'''";
}

std::string pointer_type(const ExportCandidate& c, const LaunchArg& a) {
  const std::string t = a.ctype == "T" ? export_namespace(c) + "::T" : a.ctype;
  return (a.kind == LaunchArg::Kind::kInput ? "const " : "") + t + "*";
}

// The C++ function Python calls: tensors and numbers in the launcher's order, onto the launcher.
std::string binding_function(const ExportCandidate& c) {
  const std::vector<LaunchArg> args = launch_args(c);
  std::string params, call;
  std::string first_tensor;
  for (const auto& a : args) {
    if (!params.empty()) {
      params += ", ";
      call += ", ";
    }
    switch (a.kind) {
      case LaunchArg::Kind::kInput:
      case LaunchArg::Kind::kOutput:
      case LaunchArg::Kind::kScratch:
        params += "torch::Tensor " + a.name;
        call += "reinterpret_cast<" + pointer_type(c, a) + ">(" + a.name + ".data_ptr())";
        if (first_tensor.empty()) first_tensor = a.name;
        break;
      case LaunchArg::Kind::kDim:
        params += "int64_t " + a.name;
        call += a.name;
        break;
      case LaunchArg::Kind::kScalar:
        params += (a.dtype == DType::kI64 ? "int64_t " : "double ") + a.name;
        call += "static_cast<" + a.ctype + ">(" + a.name + ")";
        break;
    }
  }
  std::string b =
      "// Called by the Python wrapper, which has checked dtypes, shapes, devices and "
      "contiguity.\n";
  b += "void kiln_launch(" + params + ") {\n  std::string why;\n";
  if (c.is_cuda()) {
    b += "  const at::cuda::OptionalCUDAGuard guard(" + first_tensor + ".device());\n";
    b += "  const cudaError_t e = " + export_namespace(c) + "::launch(" + call +
         ", at::cuda::getCurrentCUDAStream(), &why);\n";
    b += "  TORCH_CHECK(e == cudaSuccess, \"kiln " + c.target.name +
         ": \", why.empty() ? cudaGetErrorString(e) : why);\n";
  } else {
    b += "  const bool ok = " + export_namespace(c) + "::launch(" + call + ", &why);\n";
    b += "  TORCH_CHECK(ok, \"kiln " + c.target.name + ": \", why);\n";
  }
  return b + "}\n";
}

// The launcher's declarations for a single inlined source (no #pragma once there).
Result<std::string> inline_header(const ExportCandidate& c) {
  KILN_ASSIGN_OR_RETURN(std::string h, launcher_header(c, ""));
  const size_t at = h.find("#pragma once\n");
  if (at != std::string::npos) h.erase(at, 13);
  return h;
}

// Its declaration, for load_inline's C++ side (which makes the Python binding from it).
std::string binding_declaration(const ExportCandidate& c) {
  const std::string f = binding_function(c);
  const size_t at = f.find("void kiln_launch");
  return f.substr(at, f.find(" {", at) - at) + ";";
}

// A C++ comment block as Python comments.
std::string python_comment(const std::string& note) {
  std::string py;
  for (size_t i = 0; i < note.size();) {
    const size_t nl = note.find('\n', i);
    std::string line = note.substr(i, nl == std::string::npos ? std::string::npos : nl - i);
    if (line.rfind("//", 0) == 0) line = "#" + line.substr(2);
    py += line + "\n";
    i = nl == std::string::npos ? note.size() : nl + 1;
  }
  return py;
}

std::string binding_includes(const ExportCandidate& c) {
  std::string s = "#include <torch/extension.h>\n";
  if (c.is_cuda()) s += "#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>\n";
  return s;
}

// The Python function `name`: checks, dims, outputs, scratch, then `launcher`(...) -- an
// expression that yields the compiled extension's kiln_launch.
std::string python_function(const ExportCandidate& c, const std::string& name,
                            const std::string& launcher) {
  const std::vector<LaunchArg> args = launch_args(c);
  const std::string device = c.is_cuda() ? "cuda" : "cpu";
  std::vector<std::string> inputs, outputs, keywords;
  std::set<std::string> inferred;
  for (const auto& a : args) {
    if (a.kind == LaunchArg::Kind::kInput) {
      inputs.push_back(a.name);
      for (const auto& d : a.shape) inferred.insert(d);
    }
  }
  std::string sig = "def " + name + "(";
  for (size_t i = 0; i < inputs.size(); ++i) sig += (i ? ", " : "") + inputs[i];
  sig += ", *";
  for (const auto& a : args) {
    if (a.kind == LaunchArg::Kind::kOutput) sig += ", " + a.name + "=None";
    if (a.kind == LaunchArg::Kind::kDim && !inferred.count(a.name)) {
      sig += ", " + a.name + "=" + std::to_string(c.target.benchmark.at(a.spec_name));
    }
    if (a.kind == LaunchArg::Kind::kScalar) {
      std::string v = a.default_value;
      if (!v.empty() && v.back() == 'f') v.pop_back();
      sig += ", " + a.name + "=" + v;
    }
  }
  sig += "):\n";
  std::string doc = "    \"\"\"kiln's " + c.target.name + " (" + std::string(dtype_name(c.dtype)) +
                    "): " + c.target.description + ".\n\n    Inputs:";
  for (const auto& a : args) {
    if (a.kind != LaunchArg::Kind::kInput) continue;
    doc += " " + a.name + " [";
    for (size_t i = 0; i < a.shape.size(); ++i) doc += (i ? ", " : "") + a.shape[i];
    doc += "] " + torch_dtype(a.dtype) + ";";
  }
  doc += "\n    Returns";
  for (const auto& a : args) {
    if (a.kind != LaunchArg::Kind::kOutput) continue;
    doc += " " + a.name + " [";
    for (size_t i = 0; i < a.shape.size(); ++i) doc += (i ? ", " : "") + a.shape[i];
    doc += "] " + torch_dtype(a.dtype) + ";";
  }
  doc += " pass an output as a keyword to write into it.\n    All tensors contiguous, on one " +
         device + " device; the launch goes on the current stream.\n    \"\"\"\n";
  std::string body = "    dims = {}\n    device = None\n";
  auto check = [&](const LaunchArg& a, const std::string& what) {
    std::string s =
        "    device = _check(" + py_str(what) + ", " + a.name + ", " + torch_dtype(a.dtype) + ", (";
    for (const auto& d : a.shape) s += py_str(d) + ", ";
    return s + "), dims, device)\n";
  };
  for (const auto& a : args)
    if (a.kind == LaunchArg::Kind::kInput) body += check(a, a.name);
  for (const auto& a : args) {
    if (a.kind == LaunchArg::Kind::kDim && !inferred.count(a.name)) {
      body += "    dims[" + py_str(a.name) + "] = int(" + a.name + ")\n";
    }
  }
  for (const auto& a : args) {
    if (a.kind != LaunchArg::Kind::kOutput) continue;
    std::string shape = "(";
    for (const auto& d : a.shape) shape += "dims[" + py_str(d) + "], ";
    shape += ")";
    body += "    if " + a.name + " is None:\n        " + a.name + " = torch.empty(" + shape +
            ", dtype=" + torch_dtype(a.dtype) + ", device=device)\n    else:\n    " +
            check(a, a.name);
  }
  std::string call;
  for (const auto& a : args) {
    call += call.empty() ? "" : ", ";
    if (a.kind == LaunchArg::Kind::kScratch) {
      std::string numel;
      for (const auto& d : a.shape)
        numel += (numel.empty() ? "" : " * ") + std::string("dims[") + py_str(d) + "]";
      call += "_scratch(" + py_str(a.name) + ", device, " + torch_dtype(a.dtype) + ", " +
              (numel.empty() ? "1" : numel) + ")";
    } else if (a.kind == LaunchArg::Kind::kDim) {
      call += "dims[" + py_str(a.name) + "]";
    } else if (a.kind == LaunchArg::Kind::kScalar) {
      call += a.dtype == DType::kI64 ? "int(" + a.name + ")" : "float(" + a.name + ")";
    } else {
      call += a.name;
    }
  }
  body += "    " + launcher + "(" + call + ")\n";
  std::string ret;
  size_t n_out = 0;
  for (const auto& a : args) {
    if (a.kind == LaunchArg::Kind::kOutput) {
      ret += (ret.empty() ? "" : ", ") + a.name;
      ++n_out;
    }
  }
  body += "    return " + (n_out == 1 ? ret : "(" + ret + ")") + "\n";
  return sig + doc + body;
}

// Helpers the wrapper uses: argument checks with messages that say what to change, and the
// cached scratch buffers (zeroed once; the kernel leaves them as it found them).
std::string python_helpers(const ExportCandidate& c) {
  const std::string device = c.is_cuda() ? "cuda" : "cpu";
  std::string s = "_SCRATCH = {}\n\n\n";
  s += "def _check(name, t, dtype, dim_names, dims, device):\n"
       "    if not isinstance(t, torch.Tensor):\n"
       "        raise TypeError(f\"" +
       c.target.name +
       ": {name} must be a torch.Tensor, not {type(t).__name__}\")\n"
       "    if t.dtype != dtype:\n"
       "        raise TypeError(f\"" +
       c.target.name +
       ": {name} is {t.dtype}; this kernel was exported for {dtype} \"\n"
       "                        f\"(export another dtype with kiln export --dtype)\")\n"
       "    if t.device.type != \"" +
       device +
       "\":\n"
       "        raise ValueError(f\"" +
       c.target.name + ": {name} is on {t.device}; this kernel runs on " + device +
       "\")\n"
       "    if device is not None and t.device != device:\n"
       "        raise ValueError(f\"" +
       c.target.name +
       ": {name} is on {t.device}, the other tensors on {device}\")\n"
       "    if t.dim() != len(dim_names):\n"
       "        raise ValueError(f\"" +
       c.target.name +
       ": {name} has {t.dim()} dims, expected {len(dim_names)} \"\n"
       "                         f\"[{', '.join(dim_names)}]\")\n"
       "    if not t.is_contiguous():\n"
       "        raise ValueError(f\"" +
       c.target.name +
       ": {name} must be contiguous (call .contiguous())\")\n"
       "    for i, d in enumerate(dim_names):\n"
       "        if d in dims and dims[d] != t.shape[i]:\n"
       "            raise ValueError(f\"" +
       c.target.name +
       ": {name}.shape[{i}] is {t.shape[i]} but {d} is {dims[d]} \"\n"
       "                             \"from the tensors before it\")\n"
       "        dims[d] = int(t.shape[i])\n"
       "    return t.device\n\n\n";
  s += "def _scratch(name, device, dtype, numel):\n"
       "    key = (name, device, dtype)\n"
       "    buf = _SCRATCH.get(key)\n"
       "    if buf is None or buf.numel() < numel:\n"
       "        buf = torch.zeros(max(numel, 1), dtype=dtype, device=device)\n"
       "        _SCRATCH[key] = buf\n"
       "    return buf\n";
  return s;
}

std::string arch_list(const ExportCandidate& c) {
  // "sm_90a" -> "9.0a" for TORCH_CUDA_ARCH_LIST.
  std::string a = c.arch.rfind("sm_", 0) == 0 ? c.arch.substr(3) : "90a";
  std::string digits = a, suffix;
  while (!digits.empty() && !std::isdigit(static_cast<unsigned char>(digits.back()))) {
    suffix.insert(suffix.begin(), digits.back());
    digits.pop_back();
  }
  if (digits.size() < 2) return "9.0a";
  return digits.substr(0, digits.size() - 1) + "." + digits.substr(digits.size() - 1) + suffix;
}

std::string module_name(const ExportCandidate& c) {
  return export_namespace(c) + "_" + std::string(dtype_name(c.dtype)) + "_" +
         (c.candidate_id.empty() ? std::string("direct") : c.candidate_id.substr(0, 12));
}

// No -std in the flags of either build: torch passes the C++ standard its own headers need (C++17
// up to 2.11, C++20 later), and kiln's kernels and launchers build under both.

// The body of a one-file export: the CUDA source and the binding's declaration inline, the
// extension built with load_inline at import, and the checking wrapper _kiln_<target>.
Result<std::string> inline_module(const ExportCandidate& c) {
  KILN_ASSIGN_OR_RETURN(std::string header, inline_header(c));
  KILN_ASSIGN_OR_RETURN(std::string unit, kernel_unit(c, ""));
  KILN_ASSIGN_OR_RETURN(std::string cuda_text, py_block(binding_includes(c) + header + "\n" + unit +
                                                        "\n" + binding_function(c)));
  std::string py =
      "_CUDA_SRC = " + cuda_text + "\n\n_CPP_SRC = " + py_str(binding_declaration(c)) + "\n\n";
  py += "os.environ.setdefault(\"TORCH_CUDA_ARCH_LIST\", " + py_str(arch_list(c)) + ")\n";
  py += "_EXT = load_inline(name=" + py_str(module_name(c)) +
        ", cpp_sources=[_CPP_SRC], cuda_sources=[_CUDA_SRC],\n"
        "                   functions=[\"kiln_launch\"], extra_cflags=[\"-O3\"],\n"
        "                   extra_cuda_cflags=[\"-O3\"])\n\n";
  py += python_helpers(c) + "\n\n" +
        python_function(c, "_kiln_" + c.target.name, "_EXT.kiln_launch") + "\n\n";
  return py;
}

}  // namespace

std::string torch_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return "torch.float16";
    case DType::kBF16:
      return "torch.bfloat16";
    case DType::kF32:
      return "torch.float32";
    case DType::kF64:
      return "torch.float64";
    case DType::kI32:
      return "torch.int32";
    case DType::kI64:
      return "torch.int64";
  }
  return "torch.float32";
}

Result<std::vector<ExportFile>> torch_export(const ExportCandidate& c,
                                             const std::string& header_note) {
  KILN_ASSIGN_OR_RETURN(std::vector<ExportFile> files, source_export(c, header_note));
  const std::string hdr = files[0].name, unit = files[1].name;
  files.pop_back();  // the CMake snippet: torch builds it
  const bool cuda = c.is_cuda();
  std::string binding = header_note + binding_includes(c) + "#include \"" + hdr + "\"\n\n" +
                        binding_function(c) +
                        "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n  m.def(\"kiln_launch\", "
                        "&kiln_launch, \"kiln " +
                        c.target.name + "\");\n}\n";
  const std::string binding_name = c.target.name + "_binding.cpp";
  files.push_back({binding_name, binding});
  std::string py = python_comment(header_note);
  py += "\"\"\"kiln's " + c.target.name + " kernel for PyTorch: `from " + c.target.name +
        " import " + c.target.name +
        "` (this folder on sys.path).\n\nThe extension is built on first use with "
        "torch.utils.cpp_extension (cached "
        "under\nTORCH_EXTENSIONS_DIR).\n\"\"\"\nimport os\n\nimport torch\nfrom "
        "torch.utils.cpp_extension import load\n\n"
        "_HERE = os.path.dirname(os.path.abspath(__file__))\n_EXT = None\n";
  py += python_helpers(c) + "\n\n";
  py += "def _ext():\n    global _EXT\n    if _EXT is None:\n";
  if (cuda) {
    py += "        # Build for the architecture kiln verified on (" +
          (c.arch.empty() ? std::string("sm_90a") : c.arch) +
          "): the kernel may use its instructions.\n"
          "        saved = os.environ.get(\"TORCH_CUDA_ARCH_LIST\")\n"
          "        os.environ[\"TORCH_CUDA_ARCH_LIST\"] = " +
          py_str(arch_list(c)) +
          "\n"
          "        try:\n"
          "            _EXT = load(name=" +
          py_str(module_name(c)) +
          ",\n"
          "                        sources=[os.path.join(_HERE, " +
          py_str(unit) + "), os.path.join(_HERE, " + py_str(binding_name) +
          ")],\n"
          "                        extra_cflags=[\"-O3\"], "
          "extra_cuda_cflags=[\"-O3\"])\n"
          "        finally:\n"
          "            if saved is None:\n                os.environ.pop(\"TORCH_CUDA_ARCH_LIST\", "
          "None)\n"
          "            else:\n                os.environ[\"TORCH_CUDA_ARCH_LIST\"] = saved\n";
  } else {
    py += "        _EXT = load(name=" + py_str(module_name(c)) +
          ",\n"
          "                    sources=[os.path.join(_HERE, " +
          py_str(unit) + "), os.path.join(_HERE, " + py_str(binding_name) +
          ")],\n"
          "                    extra_cflags=[\"-O3\", \"-march=native\"])\n";
  }
  py += "    return _EXT\n\n\n";
  py += python_function(c, c.target.name, "_ext().kiln_launch");
  files.push_back({c.target.name + ".py", py});
  return files;
}

Result<std::vector<ExportFile>> gpumode_export(const ExportCandidate& c,
                                               const std::string& header_note) {
  if (!c.target.leaderboard) {
    return failed_precondition(
        "target '" + c.target.name +
        "' is not a GPU MODE leaderboard task (its target.json has no \"leaderboard\"); "
        "use --format torch or kernelbench");
  }
  const LeaderboardTask& lb = *c.target.leaderboard;
  if (!lb.bit_exact.empty()) {
    return failed_precondition(
        "the leaderboard task " + lb.task + " needs bit-exact agreement with a vendor library (" +
        lb.bit_exact +
        "); kiln verifies within a tolerance and does not write a submission for it");
  }
  if (!c.is_cuda())
    return failed_precondition("a GPU MODE submission needs a kernel of the cuda backend, not " +
                               c.backend);
  std::string py = "#!POPCORN leaderboard " + lb.task + "\n";
  for (const auto& g : lb.gpus) py += "#!POPCORN gpu " + g + "\n";
  py += "\n" + python_comment(header_note);
  py += "import os\n\nimport torch\nfrom torch.utils.cpp_extension import load_inline\n\n";
  py += "from task import input_t, output_t\n\n";
  KILN_ASSIGN_OR_RETURN(std::string inlined, inline_module(c));
  py += inlined;
  py += "def custom_kernel(data: input_t) -> output_t:\n";
  std::string call = "_kiln_" + c.target.name + "(";
  bool first = true;
  for (const TargetArg* in : c.target.inputs()) {
    call += (first ? "" : ", ") + lb.inputs.at(in->name);
    first = false;
  }
  for (const auto& [name, expr] : lb.outputs) call += ", " + code_name(name) + "=" + expr;
  call += ")";
  std::string outs;
  for (const TargetArg* o : c.target.outputs())
    outs += (outs.empty() ? "" : ", ") + code_name(o->name);
  py += "    " + outs + " = " + call + "\n";
  py += "    return " + lb.result + "\n";
  return std::vector<ExportFile>{{"submission.py", py}};
}

Result<std::vector<ExportFile>> kernelbench_export(const ExportCandidate& c,
                                                   const std::string& header_note) {
  if (!c.is_cuda())
    return failed_precondition("a KernelBench ModelNew needs a kernel of the cuda backend, not " +
                               c.backend);
  std::string py = python_comment(header_note);
  py +=
      "import os\n\nimport torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import "
      "load_inline\n\n";
  KILN_ASSIGN_OR_RETURN(std::string inlined, inline_module(c));
  py += inlined;
  std::string ins;
  for (const TargetArg* in : c.target.inputs())
    ins += (ins.empty() ? "" : ", ") + code_name(in->name);
  py +=
      "class ModelNew(nn.Module):\n"
      "    \"\"\"KernelBench's ModelNew: forward(" +
      ins +
      ") runs kiln's kernel (inputs in the target's order).\"\"\"\n\n"
      "    def __init__(self, *args, **kwargs):\n        super().__init__()\n\n"
      "    def forward(self, " +
      ins + "):\n        return _kiln_" + c.target.name + "(" + ins + ")\n";
  return std::vector<ExportFile>{{"model_new.py", py}};
}

}  // namespace kiln::exporter
