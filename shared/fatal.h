// How a command reports the error it stops on. Its message goes to stderr, as always, and also
// into the log file when `--log-file` set one: an operator reading the log of a process that
// exited learns why without having kept its stderr.
#pragma once

#include <string_view>

namespace kiln {

// A command's fatal error, the last thing it says before it exits non-zero: `message` and a
// newline go to stderr and, when the default logger writes to a file (configure_logging with
// LogOptions.file), also into that file as a critical line, flushed. Safe before logging is
// configured. Invariant failures (KILN_CHECK) are reported through it too.
void report_fatal(std::string_view message);

}  // namespace kiln
