// The cuda backend's Compiler: NVRTC, loaded with dlopen at run time (never linked), compiling
// device code to a CUBIN for one exact architecture. Needs no GPU.
#pragma once

#include <memory>
#include <string>

#include "evaluator/backend.h"
#include "shared/status.h"

namespace kiln::cuda {

class NvrtcCompiler final : public eval::Compiler {
 public:
  // Loads libnvrtc from LD_LIBRARY_PATH / the system, $CUDA_HOME/lib64, $CUDA_PATH/lib64 or
  // /usr/local/cuda/lib64. kUnavailable when none loads; kUnimplemented in a build without the
  // CUDA toolkit headers.
  static Result<std::unique_ptr<NvrtcCompiler>> load();

  ~NvrtcCompiler() override;
  NvrtcCompiler(const NvrtcCompiler&) = delete;
  NvrtcCompiler& operator=(const NvrtcCompiler&) = delete;

  std::string backend() const override { return "cuda"; }
  std::string toolchain_version() const override { return toolchain_version_; }  // "nvrtc-13.0"

  // Compiles request.source with -arch=<request.arch> (a real architecture: "sm_90a"),
  // --std=c++17, -default-device, -lineinfo, -D<name>=<value> per define and -I<include_dir()>
  // when set, and returns the CUBIN. A compile error (or an arch NVRTC rejects) is ok=false with
  // NVRTC's full program log. The compile's PTX is then scanned (eval::scan_ptx): a clock or
  // timer register read (%globaltimer, %clock64, ...) or an external function other than
  // vprintf/__assertfail (device malloc, device-side launches) is ok=false, rejected=true, with
  // one log line per finding ("kiln: scan of the generated PTX: ptx:%globaltimer at line 7:
  // ..."). cache_key is always filled (eval::compile_cache_key).
  // Thread-safe: each call uses its own nvrtcProgram.
  eval::CompileOutput compile(const eval::CompileRequest& request) override;

  const std::string& library_path() const { return library_path_; }  // as dlopen found it
  // Toolkit headers (cuda_fp16.h, cuda_bf16.h) passed as -I, preferring the toolkit the library
  // came from; empty when none was found and NVRTC's built-in copies are relied on.
  const std::string& include_dir() const { return include_dir_; }

  struct Functions;  // the dlsym'ed NVRTC table; defined in the .cc only

 private:
  NvrtcCompiler();

  std::unique_ptr<Functions> functions_;
  std::string library_path_;
  std::string include_dir_;
  std::string toolchain_version_;
};

}  // namespace kiln::cuda
