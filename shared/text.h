// Small text helpers every component needs: C identifiers and errno messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// [A-Za-z_][A-Za-z0-9_]*: kernel names, macro names, target and dim names.
bool is_identifier(std::string_view s);

// `text` as a whole base-10 integer -- an optional '-' and digits, nothing else: no spaces, no
// '+', no "1e3" or "16x" -- within int64's range; nullopt otherwise. For numbers from users, from
// files and from models, where a prefix read as the number would be a wrong answer, not an error.
std::optional<int64_t> parse_int64(std::string_view text);

// strerror(err) as a string (the text of an errno value).
std::string errno_text(int err);

// `text` for a terminal: newlines and tabs kept, every other control byte (ESC, BEL, CR, DEL) and
// every byte that is not UTF-8 written as \xHH, so that a kernel's source, a compiler's log or a
// hand-edited file cannot move the cursor, retitle the window or hide what precedes it.
std::string terminal_safe(std::string_view text);

// Text a peer sent (a worker's id, an error message, a compile log, a model's reply), made safe to
// put inside one log line: control bytes (below 0x20: \n, \r, ESC, ...), 0x7f, the C1 controls
// U+0080..U+009F and bytes that are not valid UTF-8 are written as \xNN, so that no peer can start
// a forged log line or move or recolour the terminal; a backslash becomes "\\", so an escape of
// the peer's own cannot pass for one of ours. Valid UTF-8 passes unchanged. The result holds at
// most `max_bytes` of that text (never cutting an escape or a UTF-8 sequence) and, when the text
// was cut, "...(N bytes)" with N the length of the whole text.
std::string log_safe(std::string_view text, size_t max_bytes = 200);

}  // namespace kiln
