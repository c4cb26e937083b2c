#include "shared/target_path.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "shared/json_fields.h"
#include "shared/text.h"

namespace kiln {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_folders(const std::string& text, const std::string& separators) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + separators.front()) {
    if (separators.find(c) != std::string::npos) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

std::vector<std::string> own_folders(const std::string& dirs) {
  if (!dirs.empty()) return split_folders(dirs, ":,");
  if (const char* env = std::getenv("KILN_TARGETS_DIR"); env && *env)
    return split_folders(env, ":");
  return {};
}

bool holds_target(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "target.json", ec);
}

// A target found by its name must carry it: one whose target.json names another would be listed
// under a name no lookup finds, and evaluated under a name that is not its own.
Status check_carries_name(const fs::path& dir, const std::string& name) {
  const std::string file = (dir / "target.json").string();
  Result<nlohmann::json> doc = load_json_file(file);
  if (!doc.is_ok()) return Status::ok();  // load_target says what is wrong with it
  const auto it = doc->is_object() ? doc->find("name") : doc->end();
  if (!doc->is_object() || it == doc->end() || !it->is_string() || *it == name) {
    return Status::ok();
  }
  return invalid_argument(file + ": field 'name': '" + log_safe(it->get<std::string>(), 60) +
                          "' is not its folder's name '" + name +
                          "'; in a targets folder each target's folder carries its name");
}

std::string joined(const std::vector<std::string>& folders) {
  std::string s;
  for (const auto& f : folders) s += (s.empty() ? "" : ", ") + f;
  return s;
}

}  // namespace

std::vector<std::string> target_folders(const std::string& dirs) {
  std::vector<std::string> out = own_folders(dirs);
  const std::string builtin = default_targets_dir();
  if (std::find(out.begin(), out.end(), builtin) == out.end()) out.push_back(builtin);
  return out;
}

bool has_own_targets(const std::string& dirs) { return !own_folders(dirs).empty(); }

Status check_target_folders(const std::string& dirs) {
  for (const auto& f : own_folders(dirs)) {
    std::error_code ec;
    if (!fs::is_directory(f, ec)) {
      return not_found("targets folder " + log_safe(f, 200) +
                       (fs::exists(f, ec) ? " is not a folder (" : " does not exist (") +
                       (dirs.empty() ? "$KILN_TARGETS_DIR" : "--targets-dir") + ")");
    }
  }
  return Status::ok();
}

Result<std::string> find_target(const std::string& dirs, const std::string& name) {
  if (name.empty()) return invalid_argument("an empty target name");
  KILN_RETURN_IF_ERROR(check_target_folders(dirs));
  if (holds_target(name)) return name;
  const std::vector<std::string> folders = target_folders(dirs);
  const bool is_path = name.find('/') != std::string::npos || name == "." || name == "..";
  if (!is_path) {
    for (const auto& f : folders) {
      if (holds_target(fs::path(f) / name)) {
        KILN_RETURN_IF_ERROR(check_carries_name(fs::path(f) / name, name));
        return (fs::path(f) / name).string();
      }
    }
  }
  // A path: say what is wrong with it, then where names are looked for.
  if (is_path) {
    std::error_code ec;
    const std::string quoted = "'" + name.substr(0, 200) + "'";
    const std::string why =
        !fs::exists(name, ec)         ? "no target folder " + quoted + " (it does not exist)"
        : !fs::is_directory(name, ec) ? quoted + " is a file, not a target folder"
                                      : quoted + " holds no target.json";
    return not_found(why + "; a target is a folder with a target.json (docs/targets.md), and a " +
                     "name without '/' is looked for in " + joined(folders));
  }
  return not_found("no target '" + name + "' in " + joined(folders) +
                   " (list them with `kiln targets`; add folders with --targets-dir A:B)");
}

Result<std::vector<TargetSpec>> load_target_path(const std::string& dirs, bool own_only) {
  std::vector<std::string> folders = target_folders(dirs);
  if (own_only && has_own_targets(dirs)) folders.pop_back();  // the built-in folder
  std::set<std::string> seen;
  std::vector<TargetSpec> out;
  for (const auto& f : folders) {
    std::error_code ec;
    if (!fs::is_directory(f, ec)) {
      return not_found("targets folder " + log_safe(f, 200) +
                       (fs::exists(f, ec) ? " is not a folder" : " does not exist"));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<TargetSpec> here, load_targets(f));
    for (TargetSpec& t : here) {
      if (seen.insert(t.name).second) out.push_back(std::move(t));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const TargetSpec& a, const TargetSpec& b) { return a.name < b.name; });
  return out;
}

}  // namespace kiln
