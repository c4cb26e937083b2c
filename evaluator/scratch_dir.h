// Private per-compile folders and whole-file reads and writes, for the compilers that run a
// program over files (the cpu backend's system compiler, the triton backend's compile worker).
#pragma once

#include <string>
#include <utility>

#include "shared/status.h"

namespace kiln::eval {

// A private directory (mode 0700 from mkdtemp) removed with its contents on destruction.
class ScratchDir {
 public:
  // <parent>/<prefix>XXXXXX; `parent` empty: $TMPDIR, else /tmp.
  static Result<ScratchDir> create(const std::string& parent, const std::string& prefix);
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string file(const char* name) const { return path_ + "/" + name; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

Status write_file(const std::string& path, const std::string& content);
Result<std::string> read_file(const std::string& path);

}  // namespace kiln::eval
