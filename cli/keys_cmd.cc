// See keys_cmd.h. Nothing here prints a secret key.
#include "cli/keys_cmd.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "shared/curve_keys.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct KeysArgs {
  std::string out = ".";
  std::string name;
  bool force = false;
  std::string list;
  std::vector<std::string> pub_files;
  std::string path;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "kiln keys: %s\n", message.c_str());
  return 2;
}

int make_keys(const KeysArgs& a) {
  if (!net::is_valid_key_name(a.name)) {
    return fail("--name '" + a.name +
                "': use 1..64 letters, digits, '.', '_' or '-' (not first); it names the files " +
                "and is how the coordinator logs the worker");
  }
  Result<net::CurveKeyPair> pair = net::generate_curve_keypair();
  if (!pair.is_ok()) return fail(pair.status().message());
  if (Status s = net::write_curve_key_files(a.out, a.name, *pair, a.force); !s.is_ok())
    return fail(s.message());
  const std::string base = (fs::path(a.out) / a.name).string();
  std::printf("wrote %s.key (secret, mode 0600) and %s.pub\npublic key: %s\n", base.c_str(),
              base.c_str(), pair->public_key.c_str());
  std::printf(
      "next: a worker's key -> put %s.pub on the coordinator's --allow list (a folder of .pub "
      "files, or\n"
      "`kiln keys allow --list FILE %s.pub`) and give %s.key to that worker only "
      "(--curve-secret);\n"
      "the coordinator's key -> --curve-secret %s.key on the coordinator, --coordinator-key %s.pub "
      "on workers\n",
      base.c_str(), base.c_str(), base.c_str(), base.c_str(), base.c_str());
  return 0;
}

int allow_keys(const KeysArgs& a) {
  if (a.pub_files.size() > 1 && !a.name.empty())
    return fail("--name goes with one .pub file, not several");
  // Every key is read and checked against the list and the others before any is added: a
  // refusal leaves the list as it was.
  std::vector<std::pair<std::string, std::string>> adding;  // name, key
  std::map<std::string, std::string> listed;                // key -> name, in the list now
  std::error_code ec;
  if (fs::exists(a.list, ec)) {
    Result<net::AllowList> list = net::read_allow_list(a.list);
    if (list.is_ok()) listed = list->names_by_key;
  }
  for (const std::string& file : a.pub_files) {
    Result<std::string> key = net::read_public_key_file(file);
    if (!key.is_ok()) return fail(key.status().message());
    const std::string name = a.name.empty() ? fs::path(file).stem().string() : a.name;
    for (const auto& [k, n] : listed) {
      if (n == name) return fail(a.list + " already has a key named '" + name + "'; nothing added");
      if (k == *key) {
        return fail(a.list + " already admits " + file + "'s key as '" + n + "'; nothing added");
      }
    }
    for (const auto& [n, k] : adding) {
      if (n == name || k == *key) {
        return fail("'" + name + "' (" + file + ") is given twice; nothing added");
      }
    }
    adding.emplace_back(name, *key);
  }
  for (const auto& [name, key] : adding) {
    if (Status s = net::add_to_allow_list(a.list, name, key); !s.is_ok()) return fail(s.message());
    std::printf("%s: admits '%s' (%s)\n", a.list.c_str(), name.c_str(), key.c_str());
  }
  return 0;
}

int show(const KeysArgs& a) {
  std::error_code ec;
  Status first;
  if (!fs::is_directory(a.path, ec)) {
    if (Result<std::string> pub = net::read_public_key_file(a.path); pub.is_ok()) {
      std::printf("%s: public key %s\n", a.path.c_str(), pub->c_str());
      return 0;
    } else {
      first = pub.status();
    }
    if (Result<net::CurveKeyPair> pair = net::read_secret_key_file(a.path); pair.is_ok()) {
      std::printf("%s: secret key; its public key is %s\n", a.path.c_str(),
                  pair->public_key.c_str());
      return 0;
    } else if (pair.status().code() == StatusCode::kFailedPrecondition) {
      return fail(pair.status().message());
    }
  }
  Result<net::AllowList> list = net::read_allow_list(a.path);
  if (!list.is_ok()) {
    return fail(first.is_ok() ? list.status().message()
                              : "not a key file (" + first.message() + ") nor an allow-list (" +
                                    list.status().message() + ")");
  }
  std::printf("%s: allow-list of %zu key(s)\n", a.path.c_str(), list->names_by_key.size());
  for (const auto& [key, name] : list->names_by_key)
    std::printf("  %-24s %s\n", name.c_str(), key.c_str());
  return 0;
}

}  // namespace

void add_keys_command(CLI::App& app, std::function<int()>& action) {
  auto a = std::make_shared<KeysArgs>();
  CLI::App* keys = app.add_subcommand(
      "keys",
      "CURVE keys that authenticate workers to a coordinator and encrypt their link "
      "(docs/security.md).\n"
      "A coordinator that binds a network address requires them (or --insecure).");
  keys->require_subcommand(1);

  CLI::App* make = keys->add_subcommand("new",
                                        "Make a keypair: OUT/NAME.key (the secret, mode 0600; "
                                        "stays with its owner) and OUT/NAME.pub");
  make->add_option("--out", a->out, "Folder to write the files in (created if absent)")
      ->capture_default_str();
  make->add_option("--name", a->name,
                   "The key's name: the files' names, and how the coordinator logs its holder")
      ->required();
  make->add_flag("--force", a->force, "Replace existing files of that name");
  make->callback([&action, a] { action = [a] { return make_keys(*a); }; });

  CLI::App* allow = keys->add_subcommand(
      "allow",
      "Add workers' public keys (NAME.pub files) to an allow-list file of `NAME KEY` lines, for "
      "the\n"
      "coordinator's --allow (a folder of .pub files works as well, without this step)");
  allow->add_option("--list", a->list, "The allow-list file (created if absent)")->required();
  allow->add_option("--name", a->name,
                    "The name to admit the key under (default: the file's name without .pub)");
  allow->add_option("pub", a->pub_files, "NAME.pub files")->required()->check(CLI::ExistingFile);
  allow->callback([&action, a] { action = [a] { return allow_keys(*a); }; });

  CLI::App* show_cmd = keys->add_subcommand(
      "show",
      "Check a key file or an allow-list and print the public keys it holds (never a secret)");
  show_cmd
      ->add_option("path", a->path,
                   "NAME.key, NAME.pub, an allow-list file or a folder of .pub files")
      ->required()
      ->check(CLI::ExistingPath);
  show_cmd->callback([&action, a] { action = [a] { return show(*a); }; });
}

}  // namespace kiln::cli
