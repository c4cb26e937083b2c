// The triton backend's compiler: the request as JSON for the compile worker, the worker run with
// a deadline in a private folder, and its answer turned into a triton binary or a refusal.
#include "evaluator/triton/triton_compiler.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "evaluator/compile_cache.h"
#include "evaluator/prelude.h"
#include "evaluator/scratch_dir.h"
#include "evaluator/source_scan.h"
#include "evaluator/triton/python_scan.h"
#include "evaluator/triton/triton_binary.h"
#include "shared/hash.h"
#include "shared/process.h"
#include "shared/triton_settings.h"

namespace kiln::eval {
namespace {

constexpr std::chrono::milliseconds kProbeTimeout{60'000};
constexpr const char* kVersionMarker = "KILN_TRITON_VERSION=";
// The module name the worker gives the kernel's source (Triton's PTX names it in .file).
constexpr const char* kModuleFile = "kiln_triton_kernel.py";

Result<std::string> triton_type(const ArgSpec& a) {
  switch (a.kind) {
    case ArgSpec::Kind::kInt64:
      return std::string("i64");
    case ArgSpec::Kind::kFloat32:
      return std::string("fp32");
    case ArgSpec::Kind::kTensorIn:
    case ArgSpec::Kind::kTensorOut: {
      KILN_ASSIGN_OR_RETURN(std::string element, dtype_macro("triton", a.dtype));
      return "*" + element;
    }
  }
  return invalid_argument("argument '" + a.name + "' has no Triton type");
}

CompileOutput failed(std::string log, std::string cache_key = "", bool rejected = false) {
  CompileOutput out;
  out.log = std::move(log);
  out.cache_key = std::move(cache_key);
  out.rejected = rejected;
  return out;
}

}  // namespace

std::string triton_python() {
  if (const char* env = std::getenv("KILN_TRITON_PYTHON"); env && *env) return env;
  std::string cache;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    cache = x;
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    cache = std::string(h) + "/.cache";
  }
  const std::string venv = cache + "/kiln/triton-venv/bin/python";
  std::error_code ec;
  return !cache.empty() && std::filesystem::exists(venv, ec) ? venv : "python3";
}

Result<std::unique_ptr<TritonCompiler>> TritonCompiler::create(TritonCompilerOptions options) {
  if (options.python.empty()) options.python = triton_python();
  Result<ProcessResult> probe =
      run_process({options.python, "-c",
                   std::string("import triton, sys; sys.stdout.write('\\n") + kVersionMarker +
                       "' + triton.__version__ + '\\n')"},
                  kProbeTimeout);
  std::string version;
  if (probe.is_ok()) {
    const size_t at = probe->output.find(kVersionMarker);
    if (at != std::string::npos) {
      const size_t begin = at + std::string(kVersionMarker).size();
      version = probe->output.substr(begin, probe->output.find('\n', begin) - begin);
    }
  }
  if (version.empty()) {
    std::string why = probe.is_ok() ? probe->output : probe.status().message();
    if (why.size() > 600) why = "..." + why.substr(why.size() - 600);
    return unavailable("the triton backend needs a Python with Triton: '" + options.python +
                       "' cannot import triton (" + why +
                       "); run scripts/bootstrap (it installs the pinned Triton into "
                       "~/.cache/kiln/triton-venv) or set KILN_TRITON_PYTHON to such a python");
  }
  return std::unique_ptr<TritonCompiler>(new TritonCompiler(std::move(options), version));
}

TritonCompiler::TritonCompiler(TritonCompilerOptions options, std::string triton_version)
    : options_(std::move(options)), triton_version_(std::move(triton_version)) {
  Sha256 h;
  h.add(triton_compile_worker_script());
  toolchain_version_ = "triton " + triton_version_ + ", worker " + h.hex().substr(0, 12);
}

CompileOutput TritonCompiler::compile(const CompileRequest& request) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string key = compile_cache_key(request, backend(), toolchain_version_);
  const std::vector<ScanFinding> findings = scan_python(request.source);
  if (!findings.empty()) {
    return failed(refusal_log("scan of the Triton source", findings), key, true);
  }
  nlohmann::json req = {{"source", request.source},
                        {"kernel", request.kernel_name},
                        {"arch", request.arch},
                        {"args", nlohmann::json::array()},
                        {"constants", nlohmann::json::object()},
                        {"num_warps", kTritonDefaultWarps},
                        {"num_stages", kTritonDefaultStages}};
  for (const ArgSpec& a : request.signature) {
    Result<std::string> type = triton_type(a);
    if (!type.is_ok()) return failed("kiln: " + type.status().message(), key);
    req["args"].push_back(*type);
  }
  for (const auto& [name, value] : request.defines) {
    if (name == "KILN_DTYPE") continue;  // Triton takes the element type from the pointers
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || end == nullptr || *end != '\0') {
      return failed("kiln: " + name + "=" + value +
                        " is not an integer; a Triton kernel's constexprs, num_warps and "
                        "num_stages take integers",
                    key);
    }
    if (is_triton_launch_setting(name)) {
      req[name] = v;
    } else {
      req["constants"][name] = v;
    }
  }
  // Read at full width: an int would see 4294967300 as 4.
  const auto warps = req["num_warps"].get<long long>();
  if (warps < 1 || warps > 32 || (warps & (warps - 1)) != 0) {
    return failed("kiln: num_warps=" + std::to_string(warps) + " is not a power of two in 1..32",
                  key);
  }

  Result<ScratchDir> dir = ScratchDir::create(options_.scratch_dir, "kiln-triton-");
  if (!dir.is_ok()) return failed("kiln: " + dir.status().message());
  req["cache_dir"] = options_.cache_dir.empty() ? dir->file("triton-cache") : options_.cache_dir;
  const std::string req_file = dir->file("request.json"), resp_file = dir->file("response.json"),
                    cubin_file = dir->file("kernel.cubin");
  if (Status s = write_file(req_file, req.dump()); !s.is_ok()) {
    return failed("kiln: " + s.message());
  }
  Result<ProcessResult> run = run_process(
      {options_.python, "-c", triton_compile_worker_script(), req_file, resp_file, cubin_file},
      options_.compile_timeout);
  if (!run.is_ok()) return failed("kiln: the Triton compile worker: " + run.status().message());
  if (run->timed_out) {
    return failed("kiln: the Triton compile worker ran past its " +
                  std::to_string(options_.compile_timeout.count() / 1000) + " s deadline\n" +
                  run->output);
  }
  Result<std::string> text = read_file(resp_file);
  const nlohmann::json resp =
      text.is_ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!resp.is_object() || !resp.contains("ok")) {
    return failed("kiln: the Triton compile worker gave no answer (exit code " +
                  std::to_string(run->exit_code) + ", signal " + std::to_string(run->term_signal) +
                  ")\n" + run->output);
  }
  if (!resp.value("ok", false)) {
    std::string log = resp.value("log", "");
    if (!run->output.empty()) log += "\n" + run->output;
    return failed(std::move(log), key, resp.value("rejected", false));
  }
  const nlohmann::json divisible = resp.value("divisible", nlohmann::json());
  for (const std::string& ptx :
       {resp.value("ptx", std::string()),
        divisible.is_object() ? divisible.value("ptx", std::string()) : std::string()}) {
    const std::vector<ScanFinding> ptx_findings = scan_ptx(ptx, kModuleFile);
    if (!ptx_findings.empty()) {
      return failed(refusal_log("scan of Triton's PTX", ptx_findings), key, true);
    }
  }
  Result<std::string> cubin = read_file(cubin_file);
  if (!cubin.is_ok() || cubin->empty()) {
    return failed("kiln: the Triton compile worker wrote no cubin");
  }
  TritonKernel k;
  k.cubin = std::move(cubin).value();
  k.name = resp.value("name", "");
  k.shared_bytes = resp.value("shared", 0u);
  k.num_warps = resp.value("num_warps", 0u);
  k.hidden_args = resp.value("hidden_args", 0u);
  k.triton_version = resp.value("triton_version", "");
  if (divisible.is_object()) {
    Result<std::string> bytes = read_file(cubin_file + ".divisible");
    if (!bytes.is_ok() || bytes->empty()) {
      return failed("kiln: the Triton compile worker wrote no cubin for the divisible variant");
    }
    if (divisible.value("num_warps", 0u) != k.num_warps ||
        divisible.value("hidden_args", 0u) != k.hidden_args) {
      return failed(
          "kiln: Triton compiled the divisible variant with other warps or hidden "
          "parameters than the kernel");
    }
    TritonDivisible d;
    d.cubin = std::move(bytes).value();
    d.name = divisible.value("name", "");
    d.shared_bytes = divisible.value("shared", 0u);
    d.args = divisible.value("args", std::vector<unsigned>());
    k.divisible = std::move(d);
  }
  CompileOutput out;
  out.ok = true;
  out.binary = encode_triton_binary(k);
  out.log = run->output;
  out.cache_key = key;
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace kiln::eval
