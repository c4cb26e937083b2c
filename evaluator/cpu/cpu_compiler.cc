// The cpu backend's compiler: trampoline generation, the compiler process (spawned with a
// deadline, its output captured) and the cache key.
#include "evaluator/cpu/cpu_compiler.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "evaluator/scratch_dir.h"
#include "evaluator/source_scan.h"
#include "shared/hash.h"
#include "shared/process.h"
#include "shared/text.h"

namespace kiln::eval {
namespace {

constexpr std::chrono::milliseconds kProbeTimeout{30'000};
constexpr const char* kCacheKeyVersion = "kiln-cpu-compile-v2";  // v2: refuses scan findings
constexpr const char* kSourceFile = "kernel.cc";
constexpr const char* kUnitFile = "kiln_unit.cc";
constexpr const char* kPreprocessedFile = "kiln_unit.ii";
constexpr const char* kOutputFile = "kernel.so";
// -fno-diagnostics-show-caret: the source starts after kiln's prelude and a #line 1, so an
// error's line number is the kernel's own, but the excerpt under it was read from the file as
// compiled (the prelude's first line under an error at line 1).
constexpr const char* kBaseFlags[] = {"-std=c++17",
                                      "-O3",
                                      "-march=native",
                                      "-fPIC",
                                      "-shared",
                                      "-fno-exceptions",
                                      "-w",
                                      "-fno-diagnostics-show-caret"};
// With g++, inline and template statics become STB_GNU_UNIQUE symbols, which turn dlclose into
// a no-op: every unloaded candidate would stay mapped in the sandbox child. clang lacks the
// flag (and the problem), so create() adds it only where the compiler accepts it.
constexpr const char* kNoGnuUniqueFlag = "-fno-gnu-unique";

std::string first_line(std::string_view s) {
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s);
}

// Imports (undefined dynamic symbols, `nm -D --undefined-only` output) outside the allow-list,
// comma-separated; empty when all are allowed.
std::string disallowed_imports(const std::string& nm_output) {
  static const std::set<std::string> kAllowed = {
      "memcpy", "memmove", "memset", "memcmp", "__memcpy_chk", "__memset_chk", "__memmove_chk",
      "__stack_chk_fail", "__cxa_finalize", "__gmon_start__", "_ITM_registerTMCloneTable",
      "_ITM_deregisterTMCloneTable", "__cxa_guard_acquire", "__cxa_guard_release",
      "__cxa_guard_abort", "__cxa_pure_virtual", "__gxx_personality_v0", "_Unwind_Resume",
      "__tls_get_addr", "abort", "__assert_fail"};  // crashing only ends the sandbox child
  static const std::set<std::string> kMath = {
      "sqrt", "exp", "exp2", "expm1", "log", "log2", "log1p", "log10", "pow", "sin", "cos", "tan",
      "tanh", "sinh", "cosh", "asin", "acos", "atan", "atan2", "erf", "erfc", "fma", "fmin", "fmax",
      "floor", "ceil", "round", "lround", "trunc", "fabs", "hypot", "cbrt", "rint", "nearbyint",
      "fmod", "ldexp", "frexp", "modf", "copysign", "isnan", "isinf", "lgamma", "tgamma"};
  std::string bad;
  std::istringstream in(nm_output);
  std::string line;
  while (std::getline(in, line)) {
    std::string name = line.substr(line.find_last_of(' ') + 1);
    name = name.substr(0, name.find('@'));  // drop the symbol version
    if (name.empty()) continue;
    std::string base = name;
    if (base.size() > 1 && (base.back() == 'f' || base.back() == 'l') && kMath.count(base.substr(0, base.size() - 1))) {
      base.pop_back();
    }
    if (base.rfind("__", 0) == 0 && base.size() > 8 && base.compare(base.size() - 7, 7, "_finite") == 0) {
      base = base.substr(2, base.size() - 9);
    }
    if (kAllowed.count(name) || kMath.count(base)) continue;
    bad += (bad.empty() ? "'" : ", '") + name + "'";
  }
  return bad;
}

// Removes every occurrence of the scratch directory's path, so logs read "kernel.cc:3:5: error"
// and do not differ from run to run.
std::string strip_prefix_everywhere(std::string text, const std::string& prefix) {
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) {
    text.erase(at, prefix.size());
  }
  return text;
}

Result<std::string> element_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return std::string("float");
    case DType::kF64: return std::string("double");
    case DType::kI32: return std::string("int32_t");
    case DType::kI64: return std::string("int64_t");
    case DType::kF16: return std::string("_Float16");
    case DType::kBF16:
      return unimplemented(
          "bf16 tensors are not supported by the cpu backend (the host compiler has no portable "
          "bf16 type); use f32 or f16 on cpu, or run bf16 on the cuda backend");
  }
  return invalid_argument("unknown dtype");
}

Result<std::string> parameter_type(const ArgSpec& spec) {
  switch (spec.kind) {
    case ArgSpec::Kind::kInt64: return std::string("int64_t");
    case ArgSpec::Kind::kFloat32: return std::string("float");
    case ArgSpec::Kind::kTensorIn:
    case ArgSpec::Kind::kTensorOut: {
      KILN_ASSIGN_OR_RETURN(std::string element, element_type(spec.dtype));
      return (spec.kind == ArgSpec::Kind::kTensorIn ? "const " : "") + element + "*";
    }
  }
  return invalid_argument("unknown argument kind");
}

size_t parameter_bytes(const ArgSpec& spec) {
  return spec.kind == ArgSpec::Kind::kFloat32 ? sizeof(float) : sizeof(int64_t);
}

}  // namespace

Result<std::unique_ptr<CpuCompiler>> CpuCompiler::create(CpuCompilerOptions options) {
  if (options.compiler.empty()) {
    const char* cxx = std::getenv("CXX");
    // Hazard: $CXX is one program, not a command line ("ccache g++" is not supported).
    options.compiler = cxx != nullptr && *cxx != '\0' ? cxx : "c++";
  }
  if (options.scratch_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    options.scratch_dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  const std::string& cxx = options.compiler;

  auto probe = [&](std::vector<std::string> argv) -> Result<ProcessResult> {
    Result<ProcessResult> run = run_process(argv, kProbeTimeout);
    if (!run.is_ok()) return run.status().with_context("probing the cpu compiler");
    return run;
  };
  KILN_ASSIGN_OR_RETURN(ProcessResult version, probe({cxx, "--version"}));
  std::string toolchain = first_line(version.output);
  if (version.exit_code != 0 || toolchain.empty()) {
    return failed_precondition("'" + cxx + " --version' failed (exit " +
                               std::to_string(version.exit_code) + "): " + first_line(version.output));
  }

  // The native target: every predefined macro under -march=native (__AVX512F__, ...).
  std::vector<std::string> flags(std::begin(kBaseFlags), std::end(kBaseFlags));
  std::vector<std::string> query = {cxx, "-march=native", kNoGnuUniqueFlag,
                                    "-dM", "-E",          "-x", "c++", "/dev/null"};
  KILN_ASSIGN_OR_RETURN(ProcessResult native, probe(query));
  if (native.exit_code == 0) {
    flags.push_back(kNoGnuUniqueFlag);
  } else {
    query.erase(query.begin() + 2);
    KILN_ASSIGN_OR_RETURN(native, probe(query));
  }
  if (native.exit_code != 0) {
    return failed_precondition("'" + cxx + " -march=native -dM -E' failed: " +
                               first_line(native.output));
  }
  // Macro order is the compiler's hash-table order; sort so the hash depends on content only.
  std::vector<std::string> macros;
  std::istringstream lines(native.output);
  for (std::string line; std::getline(lines, line);) macros.push_back(line);
  std::sort(macros.begin(), macros.end());
  Sha256 native_hash;
  for (const std::string& m : macros) native_hash.add(m);

  auto compiler = std::unique_ptr<CpuCompiler>(
      new CpuCompiler(std::move(options), std::move(toolchain), native_hash.hex()));
  compiler->flags_ = std::move(flags);
  return compiler;
}

CpuCompiler::CpuCompiler(CpuCompilerOptions options, std::string toolchain_version,
                         std::string native_target_hash)
    : options_(std::move(options)),
      toolchain_version_(std::move(toolchain_version)),
      native_target_hash_(std::move(native_target_hash)) {}

Result<std::string> CpuCompiler::trampoline_source(const CompileRequest& request) {
  const std::string& name = request.kernel_name;
  // The name is pasted into generated code, so anything but an identifier is refused.
  if (!is_identifier(name)) {
    return invalid_argument("kernel name '" + name + "' is not a C identifier");
  }
  if (name.rfind("kiln_", 0) == 0) {
    return invalid_argument("kernel name '" + name + "' uses the prefix kiln_, reserved for the "
                            "generated trampoline");
  }
  std::vector<std::string> types;
  std::string bytes;
  for (size_t i = 0; i < request.signature.size(); ++i) {
    const ArgSpec& spec = request.signature[i];
    Result<std::string> type = parameter_type(spec);
    if (!type.is_ok()) {
      return type.status().with_context("argument " + std::to_string(i) + " '" + spec.name + "'");
    }
    types.push_back(*type);
    bytes += std::to_string(parameter_bytes(spec)) + ", ";
  }

  std::string unit =
      "// Generated by kiln's cpu backend: the candidate's source, then its trampoline.\n"
      "#include <cstdint>\n"
      "#include \"" + std::string(kSourceFile) + "\"\n\n"
      "// The entry point as the spec declares it. In the same translation unit as the definition,\n"
      "// so a mismatch is a compile error (conflicting declaration), not a silent ABI mismatch.\n"
      "extern \"C\" void " + name + "(";
  for (size_t i = 0; i < types.size(); ++i) unit += (i ? ", " : "") + types[i];
  unit +=
      ");\n\n"
      "namespace {\n"
      "template <typename T>\n"
      "inline T kiln_arg(void* p) { T v; __builtin_memcpy(&v, p, sizeof(T)); return v; }\n"
      "}  // namespace\n\n"
      "// Checked by CpuDevice::launch; the array ends in a 0 so it is never empty.\n"
      "extern \"C\" const int64_t kiln_arg_count = " + std::to_string(types.size()) + ";\n"
      "extern \"C\" const int64_t kiln_arg_bytes[] = {" + bytes + "0};\n\n"
      "extern \"C\" void kiln_entry(void** args) {\n"
      "  " + name + "(";
  for (size_t i = 0; i < types.size(); ++i) {
    unit += std::string(i ? ",\n      " : "") + "kiln_arg<" + types[i] + ">(args[" +
            std::to_string(i) + "])";
  }
  unit += ");\n}\n";
  return unit;
}

std::string CpuCompiler::cache_key(const CompileRequest& request) const {
  Sha256 h;
  h.add(kCacheKeyVersion).add(request.source);
  h.add(std::to_string(request.defines.size()));
  for (const auto& [key, value] : request.defines) h.add(key).add(value);  // std::map: sorted
  h.add(request.arch).add(request.kernel_name);
  // Argument names do not reach the binary, so they are left out (renames still hit the cache).
  h.add(std::to_string(request.signature.size()));
  for (const ArgSpec& a : request.signature) {
    h.add(std::to_string(static_cast<int>(a.kind))).add(dtype_name(a.dtype));
  }
  h.add(toolchain_version_).add(native_target_hash_);
  for (const std::string& flag : flags_) h.add(flag);
  // The generated unit itself, so a change to the trampoline generator invalidates old entries.
  Result<std::string> unit = trampoline_source(request);
  h.add(unit.is_ok() ? *unit : "invalid: " + unit.status().message());
  return h.hex();
}

CompileOutput CpuCompiler::compile(const CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  CompileOutput out;
  out.cache_key = cache_key(request);
  auto finish = [&](std::string log) {
    out.log = std::move(log);
    out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                               start).count();
    return std::move(out);
  };
  // Failures of kiln or of the machine, not of the source: never cached.
  auto not_cacheable = [&](const Status& status) {
    out.cache_key.clear();
    return finish("kiln: " + status.to_string() + "\n");
  };

  if (request.arch != "cpu") {
    return finish("kiln: the cpu backend compiles for arch 'cpu', not '" + request.arch + "'\n");
  }
  for (const auto& [key, value] : request.defines) {
    if (!is_identifier(key)) return finish("kiln: define name '" + key + "' is not an identifier\n");
  }
  Result<std::string> unit = trampoline_source(request);
  if (!unit.is_ok()) return finish("kiln: " + unit.status().message() + "\n");

  Result<ScratchDir> dir = ScratchDir::create(options_.scratch_dir, "kiln-cpu-");
  if (!dir.is_ok()) return not_cacheable(dir.status());
  Status written = write_file(dir->file(kSourceFile), request.source);
  if (written.is_ok()) written = write_file(dir->file(kUnitFile), *unit);
  if (!written.is_ok()) return not_cacheable(written);

  // What the text scan finds is the caller's to refuse (callers scan first; kiln's own test
  // kernels call std::abort on purpose), so the scan of the preprocessed source below refuses what
  // only it shows. Line markers are refused here whatever the caller did: the source's own could
  // pass its lines off as a header's, which that scan leaves out.
  std::set<std::string> rules_in_text;
  for (const ScanFinding& f : scan_source(request.source, "cpu")) {
    rules_in_text.insert(f.rule);
    if (f.rule != "directive:linemarker") continue;
    out.rejected = true;
    return finish("kiln: scan of the source: " + f.rule + " at line " + std::to_string(f.line) +
                  " of the compiled text: " + f.excerpt + "\n");
  }

  std::vector<std::string> argv = {options_.compiler};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  for (const auto& [key, value] : request.defines) argv.push_back("-D" + key + "=" + value);
  // Runs the compiler with `last` appended to argv, within what is left of the timeout. On a
  // failure, the finished output; on success, nullopt and the compiler's messages in `log`.
  std::string log;
  auto run_compiler = [&](std::vector<std::string> last) -> std::optional<CompileOutput> {
    std::vector<std::string> args = argv;
    args.insert(args.end(), last.begin(), last.end());
    auto left = options_.compile_timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - start);
    Result<ProcessResult> run = run_process(args, std::max(left, std::chrono::milliseconds(1)));
    if (!run.is_ok()) return not_cacheable(run.status().with_context("running the cpu compiler"));
    log += strip_prefix_everywhere(run->output, dir->path() + "/");
    if (run->timed_out) {
      out.cache_key.clear();  // a loaded machine may finish next time
      return finish("kiln: the compiler ran past " +
                    std::to_string(options_.compile_timeout.count()) + " ms and was killed\n" +
                    log);
    }
    if (!run->status_known || run->term_signal != 0) {
      out.cache_key.clear();  // the OOM killer or an operator, not the source
      return finish(log + "\nkiln: the compiler was killed by signal " +
                    std::to_string(run->term_signal) + "\n");
    }
    if (run->exit_code != 0) return finish(log);  // a compile error: expected and cacheable
    return std::nullopt;
  };

  // Scans what the compiler sees before compiling it: the preprocessed unit, in which a name
  // built by a macro (glibc's __CONCAT(sys, tem)) is spelled out (docs/threats.md rows 5-7).
  if (auto failed =
          run_compiler({"-E", "-o", dir->file(kPreprocessedFile), dir->file(kUnitFile)})) {
    return std::move(*failed);
  }
  Result<std::string> preprocessed = read_file(dir->file(kPreprocessedFile));
  if (!preprocessed.is_ok()) return not_cacheable(preprocessed.status());
  std::vector<ScanFinding> findings = scan_preprocessed(*preprocessed, dir->file(kSourceFile));
  findings.erase(std::remove_if(findings.begin(), findings.end(),
                                [&](const ScanFinding& f) { return rules_in_text.count(f.rule); }),
                 findings.end());
  if (!findings.empty()) {
    out.rejected = true;
    return finish(log + refusal_log("scan of the preprocessed source", findings));
  }

  if (auto failed = run_compiler({"-o", dir->file(kOutputFile), dir->file(kUnitFile)})) {
    return std::move(*failed);
  }

  // The candidate may only import math and memory functions: anything else it declares by hand
  // (threads, clocks, system calls) would run in the timed process (docs/threats.md rows 5-7).
  Result<ProcessResult> symbols =
      run_process({"nm", "-D", "--undefined-only", dir->file(kOutputFile)}, kProbeTimeout);
  if (!symbols.is_ok() || symbols->exit_code != 0) {
    return not_cacheable(symbols.is_ok() ? internal_error("nm failed: " + symbols->output)
                                         : symbols.status());
  }
  if (std::string bad = disallowed_imports(symbols->output); !bad.empty()) {
    out.rejected = true;
    if (bad.find("'" + request.kernel_name + "'") != std::string::npos) {
      // kiln's launcher calls the entry point; undefined, it is an import like any other.
      return finish(log + "kiln: the source does not define the kernel's entry point '" +
                    request.kernel_name + "' (extern \"C\" void " + request.kernel_name +
                    "(...), as the target's `kernel` names it)\n");
    }
    return finish(log + "kiln: the kernel imports " + bad +
                  "; cpu kernels may use only math and memory functions\n");
  }

  Result<std::string> binary = read_file(dir->file(kOutputFile));
  if (!binary.is_ok()) return not_cacheable(binary.status());
  out.binary = std::move(binary).value();
  out.ok = true;
  return finish(log);
}

}  // namespace kiln::eval
