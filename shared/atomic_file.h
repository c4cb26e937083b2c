// Writing a file that other processes may read at any moment (evaluators that start together and
// share a cache folder, a pid file a restart reads): the bytes go to a temporary file of this
// writer in the same folder, which is then renamed over the path, so a reader sees the old file or
// the whole new one, never a part.
#pragma once

#include <string>
#include <string_view>

#include "shared/status.h"

namespace kiln {

// Writes `content` to `path` atomically, with permission bits `mode`; creates no folders.
Status write_file_atomically(const std::string& path, std::string_view content,
                             unsigned mode = 0644);

}  // namespace kiln
