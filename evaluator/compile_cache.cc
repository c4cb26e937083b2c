// Compile cache: key derivation, atomic file storage (temp file + fsync + rename) with a checksum
// header, and the caching compiler wrapper.
#include "evaluator/compile_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "shared/hash.h"
#include "shared/text.h"

namespace kiln::eval {
namespace {

// Bump when what a key covers changes (fields below, or a backend's fixed compiler flags).
constexpr std::string_view kCompileKeyFormat =
    "kiln-compile-key-v2";  // v2: compiles scan their output

// Each stored file is: kEntryMagic, 64 hex digits of SHA-256(payload), '\n', payload.
constexpr std::string_view kEntryMagic = "kiln-cache-entry-v1\n";
constexpr size_t kDigestHexChars = 64;

bool valid_key(const std::string& key) {
  if (key.size() < 16 || key.size() > 128) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Writes all of `data` to `fd`, retrying short writes and EINTR.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string compile_cache_key(const CompileRequest& request, std::string_view backend,
                              std::string_view toolchain_version) {
  Sha256 h;
  h.add(kCompileKeyFormat).add(backend).add(toolchain_version);
  h.add(request.source).add(request.kernel_name).add(request.arch);
  h.add(std::to_string(request.defines.size()));
  for (const auto& [name, value] : request.defines) h.add(name).add(value);  // std::map: sorted
  h.add(std::to_string(request.signature.size()));
  for (const ArgSpec& arg : request.signature) {
    h.add(std::to_string(static_cast<int>(arg.kind)))
        .add(std::to_string(static_cast<int>(arg.dtype)))
        .add(arg.name);
  }
  return h.hex();
}

CompileCache::CompileCache(std::string dir) : dir_(std::move(dir)) {}

std::string CompileCache::path_of(const std::string& key) const {
  return dir_ + "/" + key.substr(0, 2) + "/" + key;
}

std::optional<std::string> CompileCache::get(const std::string& key) const {
  if (!valid_key(key)) return std::nullopt;
  std::ifstream in(path_of(key), std::ios::binary);
  if (!in) return std::nullopt;
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  const size_t header = kEntryMagic.size() + kDigestHexChars + 1;
  if (content.size() < header || content.compare(0, kEntryMagic.size(), kEntryMagic) != 0 ||
      content[header - 1] != '\n') {
    return std::nullopt;
  }
  std::string payload = content.substr(header);
  if (content.compare(kEntryMagic.size(), kDigestHexChars, sha256_hex(payload)) != 0) {
    return std::nullopt;  // damaged (e.g. a power loss before the data reached the disk)
  }
  return payload;
}

Status CompileCache::put(const std::string& key, const std::string& bytes) const {
  if (!valid_key(key)) return invalid_argument("compile cache: malformed key '" + key + "'");
  const std::string final_path = path_of(key);
  const std::string shard = dir_ + "/" + key.substr(0, 2);
  std::error_code ec;
  std::filesystem::create_directories(shard, ec);
  if (ec) return unavailable("compile cache: cannot create " + shard + ": " + ec.message());

  // The temporary name is unique per writer (mkstemp), in the same directory so rename() is
  // atomic; readers never see it because it does not match any key.
  std::string temp_path = shard + "/." + key + ".tmp.XXXXXX";
  int fd = ::mkstemp(temp_path.data());
  if (fd < 0) return unavailable("compile cache: cannot create a file in " + shard + ": " +
                                 errno_text(errno));
  std::string header = std::string(kEntryMagic) + sha256_hex(bytes) + "\n";
  bool written = write_all(fd, header) && write_all(fd, bytes) && ::fchmod(fd, 0644) == 0 &&
                 ::fsync(fd) == 0;
  std::string write_error = written ? "" : errno_text(errno);
  if (::close(fd) != 0 && written) {
    written = false;
    write_error = errno_text(errno);
  }
  if (!written) {
    ::unlink(temp_path.c_str());
    return unavailable("compile cache: writing " + temp_path + ": " + write_error);
  }
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    std::string error = errno_text(errno);
    ::unlink(temp_path.c_str());
    return unavailable("compile cache: renaming into " + final_path + ": " + error);
  }
  return Status::ok();
}

CachingCompiler::CachingCompiler(Compiler& inner, CompileCache cache)
    : inner_(inner), cache_(std::move(cache)) {}

CompileOutput CachingCompiler::compile(const CompileRequest& request) {
  const std::string key =
      compile_cache_key(request, inner_.backend(), inner_.toolchain_version());
  if (std::optional<std::string> bytes = cache_.get(key)) {
    CompileOutput hit;
    hit.ok = true;
    hit.binary = std::move(*bytes);
    hit.cache_key = key;
    hit.compile_ms = 0;
    hit.from_cache = true;
    return hit;
  }
  // The same key under way on another thread (a prefetch of the task about to run): wait for it.
  std::promise<CompileOutput> mine;
  std::shared_future<CompileOutput> theirs;
  {
    std::lock_guard lock(mutex_);
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      theirs = it->second;
    } else {
      in_flight_.emplace(key, mine.get_future().share());
    }
  }
  if (theirs.valid()) {
    const auto start = std::chrono::steady_clock::now();
    CompileOutput out = theirs.get();
    out.shared = true;
    out.compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return out;
  }
  auto done = [&] {
    std::lock_guard lock(mutex_);
    in_flight_.erase(key);
  };
  CompileOutput out;
  try {
    out = inner_.compile(request);
  } catch (...) {
    mine.set_exception(std::current_exception());
    done();
    throw;
  }
  out.cache_key = key;
  out.from_cache = false;
  if (out.ok) {
    if (Status s = cache_.put(key, out.binary); !s.is_ok()) {
      out.log += (out.log.empty() || out.log.back() == '\n' ? "" : "\n") +
                 std::string("kiln: not cached: ") + s.message() + "\n";
    }
  }
  mine.set_value(out);
  done();
  return out;
}

}  // namespace kiln::eval
