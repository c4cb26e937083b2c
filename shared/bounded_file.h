// Reading a whole file that kiln did not write itself, or that a person may have replaced: a
// record, an export's source, a key, a JSON config. Every such read goes through here, with a
// bound on what it takes, so that a folder, a link to /dev/zero or a fifo nobody writes to gives
// a clear error instead of an exception, memory without end or a hang.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shared/status.h"

namespace kiln {

struct FileBounds {
  uintmax_t max_bytes = 0;  // more is refused, also from a file that grows while it is read
  std::string_view what;    // how errors name the file: "a JSON file", "a key file"
  // Pipes and fifos are read (up to max_bytes): a secret given as `<(vault read ...)`. Otherwise
  // only a regular file is, and anything else is refused before a byte is read.
  bool streams = false;
  bool follow_links = true;  // false: a symbolic link is refused
};

// The file's bytes. Errors name the path: kNotFound when it is missing or cannot be opened,
// kInvalidArgument for a folder, a device, a socket, a link where none may be, or more than
// max_bytes.
Result<std::string> read_bounded_file(const std::string& path, const FileBounds& bounds);

}  // namespace kiln
