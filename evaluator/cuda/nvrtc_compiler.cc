// NvrtcCompiler: dlopen of libnvrtc, the NVRTC checking helper, and one compile per call.
#include "evaluator/cuda/nvrtc_compiler.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <utility>
#include <vector>

#include "evaluator/compile_cache.h"
#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/source_scan.h"

#ifdef KILN_HAVE_CUDA
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstring>
#endif

namespace kiln::cuda {

#ifdef KILN_HAVE_CUDA

// The NVRTC entry points kiln calls (nvrtc.h renames none of them).
#define KILN_NVRTC_FUNCTIONS(X)                                                                \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)          \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize)  \
  X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX)

struct NvrtcCompiler::Functions {
#define KILN_NVRTC_DECLARE_FIELD(fn) decltype(&::fn) fn = nullptr;
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_DECLARE_FIELD)
#undef KILN_NVRTC_DECLARE_FIELD

  // The one checking helper for NVRTC calls: OK, or the call, the nvrtcResult's name and
  // file:line as kInternal.
  Status check(nvrtcResult result, const char* call, const char* file, int line) const {
    if (result == NVRTC_SUCCESS) return Status::ok();
    const char* name = nvrtcGetErrorString(result);
    const char* slash = std::strrchr(file, '/');
    return internal_error(std::string(call) + " failed: " +
                          (name ? name : "nvrtcResult " + std::to_string(result)) + " at " +
                          (slash ? slash + 1 : file) + ":" + std::to_string(line));
  }
};

#define KILN_NVRTC(functions, fn, ...) \
  (functions).check((functions).fn(__VA_ARGS__), #fn, __FILE__, __LINE__)

namespace {

// Owns one nvrtcProgram.
class Program {
 public:
  explicit Program(const NvrtcCompiler::Functions* functions) : functions_(functions) {}
  ~Program() {
    if (program_ != nullptr) KILN_NVRTC(*functions_, nvrtcDestroyProgram, &program_).ignore();
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram* out() { return &program_; }
  nvrtcProgram get() const { return program_; }

 private:
  const NvrtcCompiler::Functions* functions_;
  nvrtcProgram program_ = nullptr;
};

// The toolkit include directory matching the loaded library: <lib dir>/../include first (the
// toolkit NVRTC came from, so headers and compiler agree), then $CUDA_HOME, $CUDA_PATH and
// /usr/local/cuda. Only directories holding cuda_fp16.h count.
std::string find_include_dir(const void* symbol_in_library) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  Dl_info info{};
  if (dladdr(symbol_in_library, &info) != 0 && info.dli_fname != nullptr) {
    fs::path library(info.dli_fname);
    candidates.push_back(library.parent_path().parent_path() / "include");
    std::error_code ec;
    fs::path real = fs::canonical(library, ec);
    if (!ec) candidates.push_back(real.parent_path().parent_path() / "include");
  }
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* home = std::getenv(env);
    if (home != nullptr && *home != '\0') candidates.push_back(fs::path(home) / "include");
  }
  candidates.push_back("/usr/local/cuda/include");
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    if (fs::exists(dir / "cuda_fp16.h", ec)) return fs::weakly_canonical(dir, ec).string();
  }
  return "";
}

}  // namespace

NvrtcCompiler::NvrtcCompiler() = default;
NvrtcCompiler::~NvrtcCompiler() = default;  // libnvrtc stays loaded: it may hold thread-local
                                            // state with destructors that run at thread exit

Result<std::unique_ptr<NvrtcCompiler>> NvrtcCompiler::load() {
  std::string path;
  std::string error;
  void* library = open_nvrtc_library(&path, &error);
  if (library == nullptr) return unavailable(error);

  std::unique_ptr<NvrtcCompiler> compiler(new NvrtcCompiler());
  compiler->functions_ = std::make_unique<Functions>();
  Functions& f = *compiler->functions_;
  std::string missing;
#define KILN_NVRTC_RESOLVE(fn)                                            \
  f.fn = reinterpret_cast<decltype(f.fn)>(dlsym(library, #fn));           \
  if (f.fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#fn);
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_RESOLVE)
#undef KILN_NVRTC_RESOLVE
  if (!missing.empty()) return unavailable(path + " lacks NVRTC entry points: " + missing);

  int major = 0;
  int minor = 0;
  KILN_RETURN_IF_ERROR(KILN_NVRTC(f, nvrtcVersion, &major, &minor));
  compiler->library_path_ = path;
  compiler->toolchain_version_ = "nvrtc-" + std::to_string(major) + "." + std::to_string(minor);
  compiler->include_dir_ = find_include_dir(reinterpret_cast<const void*>(f.nvrtcVersion));
  return compiler;
}

eval::CompileOutput NvrtcCompiler::compile(const eval::CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  const Functions& f = *functions_;
  eval::CompileOutput out;
  out.cache_key = eval::compile_cache_key(request, backend(), toolchain_version());
  if (request.arch.rfind("sm_", 0) != 0) {
    out.log = "kiln: arch must be a real GPU architecture such as sm_90a (a CUBIN is built), "
              "got '" + request.arch + "'\n";
    return out;
  }

  // Each option is its own argv entry, so a define's name or value cannot inject options.
  std::vector<std::string> options = {"-arch=" + request.arch, "--std=c++17", "-default-device",
                                      "-lineinfo"};
  if (!include_dir_.empty()) options.push_back("-I" + include_dir_);
  for (const auto& [name, value] : request.defines) options.push_back("-D" + name + "=" + value);
  std::vector<const char*> argv;
  argv.reserve(options.size());
  for (const std::string& o : options) argv.push_back(o.c_str());

  Program program(&f);
  const std::string source_name = (request.kernel_name.empty() ? "kernel" : request.kernel_name) +
                                  ".cu";
  if (Status s = KILN_NVRTC(f, nvrtcCreateProgram, program.out(), request.source.c_str(),
                            source_name.c_str(), 0, nullptr, nullptr);
      !s.is_ok()) {
    out.log = "kiln: " + s.message() + "\n";
    return out;
  }
  const nvrtcResult compiled =
      f.nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  const Status compile_status = f.check(compiled, "nvrtcCompileProgram", __FILE__, __LINE__);

  // The log is read whatever the outcome: on success it holds the warnings.
  size_t log_size = 0;
  if (KILN_NVRTC(f, nvrtcGetProgramLogSize, program.get(), &log_size).is_ok() && log_size > 1) {
    std::string log(log_size, '\0');
    if (KILN_NVRTC(f, nvrtcGetProgramLog, program.get(), log.data()).is_ok()) {
      log.resize(std::strlen(log.c_str()));
      out.log = std::move(log);
    }
  }
  if (!compile_status.is_ok()) {
    // NVRTC_ERROR_COMPILATION is the ordinary "the source has errors"; anything else (an option
    // NVRTC rejects, such as an unknown arch) is named after the log.
    if (compiled != NVRTC_ERROR_COMPILATION) out.log += "kiln: " + compile_status.message() + "\n";
    return out;
  }

  // Scans what was compiled: the PTX shows a timer read or an external function however the
  // source spelled it (a##b, literals built by macros). NVRTC keeps the PTX of a compile for a
  // real architecture, so this costs no second compile.
  std::string ptx;
  size_t ptx_size = 0;
  Status got_ptx = KILN_NVRTC(f, nvrtcGetPTXSize, program.get(), &ptx_size);
  if (got_ptx.is_ok() && ptx_size > 1) {
    ptx.assign(ptx_size, '\0');
    got_ptx = KILN_NVRTC(f, nvrtcGetPTX, program.get(), ptx.data());
    ptx.resize(std::strlen(ptx.c_str()));
  }
  if (!got_ptx.is_ok() || ptx.empty()) {
    out.log += "kiln: no PTX to scan, so the compile is refused: " +
               (got_ptx.is_ok() ? std::string("empty output") : got_ptx.message()) + "\n";
    return out;
  }
  if (std::vector<eval::ScanFinding> findings = eval::scan_ptx(ptx, source_name);
      !findings.empty()) {
    out.rejected = true;
    out.log += eval::refusal_log("scan of the generated PTX", findings);
    out.compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return out;
  }

  size_t cubin_size = 0;
  Status s = KILN_NVRTC(f, nvrtcGetCUBINSize, program.get(), &cubin_size);
  if (s.is_ok()) {
    out.binary.assign(cubin_size, '\0');
    s = KILN_NVRTC(f, nvrtcGetCUBIN, program.get(), out.binary.data());
  }
  if (!s.is_ok() || out.binary.empty()) {
    out.binary.clear();
    out.log += "kiln: no CUBIN: " + (s.is_ok() ? std::string("empty output") : s.message()) + "\n";
    return out;
  }
  out.ok = true;
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

#else  // !KILN_HAVE_CUDA

struct NvrtcCompiler::Functions {};

NvrtcCompiler::NvrtcCompiler() = default;
NvrtcCompiler::~NvrtcCompiler() = default;

Result<std::unique_ptr<NvrtcCompiler>> NvrtcCompiler::load() {
  return unimplemented("kiln was built without the CUDA toolkit headers; NVRTC is unavailable");
}

eval::CompileOutput NvrtcCompiler::compile(const eval::CompileRequest& request) {
  eval::CompileOutput out;
  out.cache_key = eval::compile_cache_key(request, backend(), toolchain_version());
  out.log = "kiln: built without CUDA support\n";
  return out;
}

#endif  // KILN_HAVE_CUDA

}  // namespace kiln::cuda
