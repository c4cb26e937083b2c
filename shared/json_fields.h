// Strict reading of JSON objects from files: every field is typed, unknown keys are errors, and
// every error names the file and the field path ("configs/run.json: field 'redis.port': expected
// an integer, got string"). Config files and target specs both read through this.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shared/status.h"

namespace kiln {

// Reads and parses a JSON file (a regular file of at most kMaxJsonFileBytes); the error gives the
// file and the parser's position.
inline constexpr uintmax_t kMaxJsonFileBytes = uintmax_t{256} << 20;
Result<nlohmann::json> load_json_file(const std::string& path);

// Runs `read`, which reads fields of the JSON document of `file` (a record kiln wrote), and turns
// a field of another type than kiln writes (nlohmann's type_error: a file changed by hand) into
// an error naming the file, instead of an exception.
template <typename Read>
auto read_json_guarded(const std::string& file, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    return data_loss(file + ": a field does not hold what kiln writes there (" +
                     std::string(e.what()).substr(0, 200) + "); was the file changed by hand?");
  }
}

// Type name of a JSON value for error messages ("string", "integer", "array", ...).
std::string json_type_name(const nlohmann::json& value);

// A view of one JSON object that hands out typed fields and remembers which keys were asked for,
// so finish() can reject keys nobody asked for (a misspelt option is an error, not silently ignored).
class JsonFields {
 public:
  // `source` names the file (or other origin); `path` is the dotted path of this object ("" at top).
  JsonFields(const nlohmann::json& object, std::string source, std::string path = "");

  // Status of the object itself (not an object -> error). Check it before reading fields.
  Status status() const { return status_; }

  // Optional fields keep *out unchanged when absent; required ones fail when absent.
  Status get(const std::string& key, std::string* out, bool required = false);
  Status get(const std::string& key, bool* out, bool required = false);
  Status get(const std::string& key, int64_t* out, bool required = false);
  Status get(const std::string& key, int* out, bool required = false);
  Status get(const std::string& key, uint32_t* out, bool required = false);
  Status get(const std::string& key, double* out, bool required = false);
  Status get(const std::string& key, std::vector<std::string>* out, bool required = false);
  Status get(const std::string& key, std::map<std::string, std::string>* out, bool required = false);
  Status get(const std::string& key, std::map<std::string, double>* out, bool required = false);

  // A nested object (for recursion); absent -> std::nullopt, or an error when required.
  Result<std::optional<JsonFields>> object(const std::string& key, bool required = false);
  // A view of `value`, a part of this object's field named `key` (e.g. "maps[2]" for an element of
  // the array "maps"), whose errors name it by its path.
  JsonFields nested(const nlohmann::json& value, const std::string& key) const;
  // The raw value (absent -> nullptr) for fields with their own structure; marks the key read.
  const nlohmann::json* raw(const std::string& key);
  bool has(const std::string& key) const;

  // Error for the first key that was never read.
  Status finish() const;

  // "file: field 'a.b'" prefix for errors about a field of this object.
  std::string where(const std::string& key) const;
  Status field_error(const std::string& key, const std::string& problem) const;

 private:
  const nlohmann::json* find(const std::string& key, bool required, Status* error);

  const nlohmann::json* object_;
  std::string source_;
  std::string path_;
  Status status_;
  std::set<std::string> asked_;  // every key a getter asked for, present or not
};

}  // namespace kiln
