// The static scan of a Triton kernel's Python source (docs/threats.md rows 5 and 7): the triton
// backend's compile worker imports the module to compile it, so whatever runs at import runs on
// the evaluator's node. Only triton (and its submodules) and math may be imported, and the names
// that reach the interpreter's machinery (__import__, exec, eval, open, getattr, dunder
// attributes, ...) are refused.
#pragma once

#include <string_view>
#include <vector>

#include "evaluator/source_scan.h"

namespace kiln::eval {

// Findings ("import:os", "identifier:exec", "identifier:__class__", "syntax:unterminated-string")
// in `source`. Comments and the contents of plain string literals are ignored; f-strings are
// read as code (their {expressions} run). Lines are 1-based.
//
// Hazard: a text scan is the first gate, not a sandbox. The compile worker runs in a child process
// of the evaluator with the evaluator's rights; the kernel itself runs only in the sandbox child.
std::vector<ScanFinding> scan_python(std::string_view source);

}  // namespace kiln::eval
