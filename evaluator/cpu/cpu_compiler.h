// The cpu backend's compiler: a candidate's plain C++ plus a generated trampoline, built into a
// shared object by the system C++ compiler, so the whole search runs on machines without a GPU.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/backend.h"

namespace kiln::eval {

struct CpuCompilerOptions {
  std::string compiler;     // program name or path; empty: $CXX, else "c++" (from PATH)
  std::string scratch_dir;  // parent of the private per-compile directories; empty: $TMPDIR or /tmp
  std::chrono::milliseconds compile_timeout{60'000};  // the compiler is killed past this
};

// Builds `request.source` with the generated trampoline (see trampoline_source) into a .so whose
// bytes are CompileOutput::binary; CpuDevice loads it. The candidate's entry point is a plain
// `extern "C"` function whose parameters follow request.signature: tensor in -> const T*, tensor
// out -> T*, kInt64 -> int64_t, kFloat32 -> float, with T from the dtype (f16 is _Float16; bf16
// is refused, there being no portable host type for it).
//
// Before compiling, the unit is preprocessed (`-E`, same flags and defines) and the candidate's
// own lines of that output -- macros expanded, header bodies left out -- are scanned with the
// cpu rules (scan_preprocessed, source_scan.h): a finding the text scan of the source does not
// also report, such as `system` from glibc's __CONCAT(sys, tem), refuses the compile (what the
// text scan reports is the caller's to refuse, see the hazards). After compiling, the shared
// object's imports are checked against a math/memory allow-list. Both refusals are ok=false,
// rejected=true, with a log line per finding ("kiln: scan of the preprocessed source:
// identifier:system at line 3: ...").
//
// Outcomes: a compile error, an invalid request (bad kernel name, bf16, wrong arch) and a compiler
// that runs past the timeout (one deadline for both runs) are ok=false with the reason in the
// log; kiln-side messages start with "kiln:". When the outcome says nothing about the source (no
// scratch directory, the compiler could not be started, the timeout) cache_key is left EMPTY: a
// cache must not store it.
//
// Hazards:
// - Compiling runs in the daemon, outside the sandbox, on untrusted source: `#include
//   "/some/secret"` would put the file's first lines into the log. Callers must run scan_source
//   (source_scan.h) on the candidate's text and refuse findings BEFORE compile(): this class only
//   checks the source for line markers (which could hide lines from its own scan), not includes.
// - -march=native makes the binary specific to this host's ISA, so the cache key includes a hash
//   of the compiler's native target macros: a cache shared across hosts never hands an AVX-512
//   binary to a host without it.
class CpuCompiler : public Compiler {
 public:
  // Runs `<compiler> --version` and the native-target query once; fails when the compiler is
  // missing or broken, so a daemon learns it at start-up rather than at every compile.
  static Result<std::unique_ptr<CpuCompiler>> create(CpuCompilerOptions options = {});

  std::string backend() const override { return "cpu"; }
  std::string toolchain_version() const override { return toolchain_version_; }
  CompileOutput compile(const CompileRequest& request) override;

  // SHA-256 over source, sorted defines, arch, kernel name, signature, toolchain version, flags
  // and the native target. Public so a caching wrapper can look up before compiling.
  std::string cache_key(const CompileRequest& request) const;

  // The translation unit that is compiled: it #includes "kernel.cc" (the candidate's source,
  // written beside it) and then declares the entry point's prototype from the signature -- in the
  // same unit, so a mismatch with the candidate's definition is a compile error -- and defines
  // `extern "C" void kiln_entry(void** args)` plus kiln_arg_count / kiln_arg_bytes[], which
  // CpuDevice uses to check launch arguments. Fails for an invalid kernel name or a dtype the
  // cpu backend does not support.
  static Result<std::string> trampoline_source(const CompileRequest& request);

 private:
  CpuCompiler(CpuCompilerOptions options, std::string toolchain_version,
              std::string native_target_hash);

  CpuCompilerOptions options_;
  std::string toolchain_version_;   // first line of `<compiler> --version`
  std::string native_target_hash_;  // sha256 of `<compiler> -march=native -dM -E` output
  std::vector<std::string> flags_;  // kBaseFlags, plus -fno-gnu-unique where accepted
};

}  // namespace kiln::eval
