// Static scans of candidate kernels for constructs kiln bans (docs/threats.md rows 5 and 7): host
// escapes, timer access, vendor libraries, includes and pragmas outside an allow-list -- in the
// source as written, and in what the compilers make of it (preprocessed source, PTX).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::eval {

struct ScanFinding {
  std::string rule;     // "<category>:<what>": "identifier:dlopen", "include:stdio.h", "asm:asm"
  int line = 0;         // 1-based line of the source where the construct starts
  std::string excerpt;  // that line, trimmed, at most 160 characters
};

// Scans `source` for the constructs banned on `backend` ("cpu" or "cuda"; "triton" is
// scan_python's, evaluator/triton/python_scan.h); an unknown backend
// gives one finding ("backend:<name>"), so a caller that forgets to check fails closed. Comments
// are ignored and string-literal contents are ignored except where a rule names them (#include
// targets; on cuda, clock and timer registers inside inline PTX, read with adjacent literals
// joined and escapes decoded, as the compiler reads them). Line splices, digraphs (%:) and
// universal character names (\u0064lopen) are handled so they cannot hide a banned name.
//
// Hazard: this is the first, cheap gate, not a sandbox. It reads the text as written, so a name
// built by a macro (glibc's __CONCAT(sys, tem), cuda's a##b) or a literal assembled from macros
// passes it; the compilers scan what they actually compile (scan_preprocessed on cpu, scan_ptx on
// cuda) and refuse what this scan missed. Even both together are a speed bump: the cpu backend's
// real defence is that checker, reference and verdict live in another process than the candidate.
// Findings are reasons to reject, never proof of safety.
std::vector<ScanFinding> scan_source(std::string_view source, std::string_view backend);

// The scan of what the cpu compiler sees. `preprocessed` is the system compiler's `-E` output
// (with GNU line markers) for a unit that #includes the candidate's file, named `candidate_file`
// (its base name is matched). The lines that come from that file, with every macro expanded
// (those of included headers too), are scanned with scan_source's cpu rules; the bodies of the
// headers it includes are left out. Findings carry the candidate file's line numbers (after any
// #line) and the preprocessed text as excerpt. No line of the candidate's file found gives one
// finding "preprocessed:no-candidate-lines" (fails closed).
//
// Hazard: header bodies are told apart by the line markers' enter/leave flags, which a source
// could forge with its own line markers; scan_source refuses those (directive:linemarker), and
// CpuCompiler checks for them itself before trusting this.
std::vector<ScanFinding> scan_preprocessed(std::string_view preprocessed,
                                           std::string_view candidate_file);

// The scan of what the cuda compiler produced: `ptx` is NVRTC's PTX for the program named
// `source_name`. Finds reads of clock and counter special registers ("ptx:%globaltimer",
// "ptx:%clock64", "ptx:%pm0", ...), external functions other than vprintf and __assertfail
// ("ptx:extern-function:malloc": device malloc/new, device-side launches, anything linked from
// outside the program) and preprocessor lines brought in by inline asm ("ptx:directive"). Lines
// come from the `.loc` directives of `source_name` (0 when none precedes the finding); excerpts
// are the PTX line.
std::vector<ScanFinding> scan_ptx(std::string_view ptx, std::string_view source_name);

// The log of a compile refused for `findings`, one line each (the first 10, then a count):
// "kiln: <what>: <rule> at line <n>: <excerpt>" ("at line" left out when the line is 0).
std::string refusal_log(std::string_view what, const std::vector<ScanFinding>& findings);

}  // namespace kiln::eval
