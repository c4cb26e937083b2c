// Scratch folders and file helpers of the compilers.
#include "evaluator/scratch_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "shared/text.h"

namespace kiln::eval {

Result<ScratchDir> ScratchDir::create(const std::string& parent, const std::string& prefix) {
  std::string base = parent;
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string pattern = base + "/" + prefix + "XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return unavailable("creating a scratch directory under " + base + ": " + errno_text(errno));
  }
  return ScratchDir(std::move(pattern));
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

Status write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return unavailable("writing " + path + ": " + errno_text(errno));
  return Status::ok();
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return unavailable("reading " + path + ": " + errno_text(errno));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return unavailable("reading " + path + ": " + errno_text(errno));
  return content.str();
}

}  // namespace kiln::eval
