// Small text helpers every component needs: C identifiers and errno messages.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// [A-Za-z_][A-Za-z0-9_]*: kernel names, macro names, target and dim names.
bool is_identifier(std::string_view s);

// strerror(err) as a string (the text of an errno value).
std::string errno_text(int err);

// Text a peer sent, made safe to log: control bytes (below 0x20, and 0x7f) written as \xNN so
// that no peer can start a forged log line or move the terminal's cursor, and cut to `max_bytes`
// with "...(N bytes)" appended when longer.
std::string log_safe(std::string_view text, size_t max_bytes = 200);

}  // namespace kiln
