// Text that came from outside the process (a worker's id or error message, a compile log, a
// model's reply) made safe to put inside one log line: it can neither end the line and forge the
// next one, nor move the cursor or recolour an operator's terminal, nor flood the log.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

inline constexpr size_t kLogSafeMaxBytes = 300;

// `text` with every byte that could forge or hide log output written as \xNN: control bytes
// (< 0x20: \n, \r, \t, ESC ...), DEL (0x7f), bytes that are not part of valid UTF-8, and the C1
// controls U+0080..U+009F (some terminals act on them as on ESC). A backslash becomes "\\", so an
// escape in the output always means an escaped byte. Valid UTF-8 otherwise passes unchanged.
// At most `max_bytes` of escaped text are kept (never cutting an escape or a UTF-8 sequence);
// what is cut off is replaced by "...[N more bytes]", N counting the input bytes left out.
std::string log_safe(std::string_view text, size_t max_bytes = kLogSafeMaxBytes);

}  // namespace kiln
