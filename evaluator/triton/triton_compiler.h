// The triton backend's compiler: a Triton kernel (Python source with one @triton.jit function),
// its constexpr values, num_warps and num_stages, compiled ahead of time for an explicit target
// (sm_90a) into a cubin with no GPU, by a Python compile worker (compile_worker.py, carried in
// the binary) that kiln runs once per compile. The cubin and Triton's launch metadata travel as
// one triton binary (triton_binary.h), which the cuda device launches like NVRTC's cubins.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "evaluator/backend.h"

namespace kiln::eval {

struct TritonCompilerOptions {
  // The Python that has Triton. Empty: triton_python().
  std::string python;
  std::string scratch_dir;  // parent of the per-compile folders; empty: $TMPDIR or /tmp
  std::string cache_dir;  // Triton's own cache (TRITON_CACHE_DIR); empty: one per compile, removed
  std::chrono::milliseconds compile_timeout{120'000};  // the worker is killed past this
};

// The Python that compiles Triton kernels (and runs kiln import-triton's capture):
// $KILN_TRITON_PYTHON, else the one scripts/bootstrap installs Triton into
// (($XDG_CACHE_HOME or ~/.cache)/kiln/triton-venv), else python3 from PATH.
std::string triton_python();

// The Python source text of the compile worker.
const char* triton_compile_worker_script();

// Maps a request to the worker's: request.signature gives the runtime parameters' Triton types
// (tensor in/out -> "*fp16", "*bf16", "*fp32", "*i32", "*i64"; kInt64 -> "i64"; kFloat32 ->
// "fp32"); request.defines give num_warps (default 4), num_stages (default 3) and every other
// define but KILN_DTYPE as a constexpr value (integers only). The source is scanned first
// (scan_python: only triton and math imports), and Triton's PTX after (scan_ptx: clock and timer
// registers, external functions): findings refuse the compile (ok=false, rejected=true).
// Outcomes that say nothing about the source (the worker could not start, ran past its deadline)
// leave cache_key empty, so no cache stores them.
class TritonCompiler : public Compiler {
 public:
  // Runs the Python once to learn Triton's version; UNAVAILABLE, saying what to install, when it
  // cannot import triton.
  static Result<std::unique_ptr<TritonCompiler>> create(TritonCompilerOptions options = {});

  std::string backend() const override { return "triton"; }
  // "triton <version>, worker <hash of the worker script>": part of every cache key, so another
  // Triton or another worker never serves a cached binary.
  std::string toolchain_version() const override { return toolchain_version_; }
  CompileOutput compile(const CompileRequest& request) override;

  const std::string& python() const { return options_.python; }
  const std::string& triton_version() const { return triton_version_; }

 private:
  TritonCompiler(TritonCompilerOptions options, std::string triton_version);
  TritonCompilerOptions options_;
  std::string triton_version_;
  std::string toolchain_version_;
};

}  // namespace kiln::eval
