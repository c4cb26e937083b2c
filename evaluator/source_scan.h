// Static scan of candidate kernel sources for constructs kiln bans (THREATS.md rows 5 and 7):
// host escapes, timer access, vendor libraries, includes and pragmas outside an allow-list.
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

// Scans `source` for the constructs banned on `backend` ("cpu" or "cuda"); an unknown backend
// gives one finding ("backend:<name>"), so a caller that forgets to check fails closed. Comments
// are ignored and string-literal contents are ignored except where a rule names them (#include
// targets; cuda's %globaltimer inside inline PTX). Line splices, digraphs (%:) and universal
// character names (\u0064lopen) are handled so they cannot hide a banned name.
//
// Hazard: this is a speed bump, not a sandbox. C++ has too many ways to reach a function (macros
// built from allowed parts, pointer tricks, allowed headers that declare libc) for a text scan to
// be complete; the cpu backend's real defence is that checker, reference and verdict live in
// another process than the candidate. Findings are reasons to reject, never proof of safety.
std::vector<ScanFinding> scan_source(std::string_view source, std::string_view backend);

}  // namespace kiln::eval
