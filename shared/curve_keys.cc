// See curve_keys.h. Key files are small text files; every error names the file and says what a
// valid one looks like, and no message ever contains a secret key.
#include "shared/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "shared/bounded_file.h"
#include "shared/endpoint.h"
#include "shared/text.h"

namespace kiln::net {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
constexpr size_t kMaxKeyFileBytes = 1 << 20;
constexpr std::string_view kSecretLabel = "secret-key";
constexpr std::string_view kPublicLabel = "public-key";

const char* const kSecretShape =
    "a secret key file (NAME.key, written by `kiln keys new --out DIR --name NAME`) holds '#' "
    "comment "
    "lines and one line `secret-key <40 Z85 characters>`";
const char* const kPublicShape =
    "a public key file (NAME.pub, written by `kiln keys new --out DIR --name NAME`) holds '#' "
    "comment "
    "lines and one line `public-key <40 Z85 characters>`";
const char* const kListShape =
    "an allow-list is a folder of NAME.pub files, or a file with '#' comments and one line "
    "`NAME <40 Z85 characters>` per worker key";

std::string trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  const size_t end = s.find_last_not_of(" \t\r");
  return std::string(s.substr(begin, end - begin + 1));
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A key file or an allow-list; a pipe is read too (a secret given as `<(vault read ...)`).
Result<std::string> read_small_file(const std::string& path) {
  return read_bounded_file(path, {kMaxKeyFileBytes, "a key file", /*streams=*/true});
}

// The one `label <key>` line of a key file; `other` is the label of the other kind of file, for a
// precise message when the wrong one is given.
Result<std::string> parse_key_file(const std::string& path, const std::string& text,
                                   std::string_view label, std::string_view other,
                                   const char* shape) {
  std::istringstream in(text);
  std::string found;
  int number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> w = words(line);
    const std::string where = path + " line " + std::to_string(number);
    if (w[0] == other) {
      return invalid_argument(
          path + " is a " + std::string(other == kSecretLabel ? "secret" : "public") +
          " key file, not the " + std::string(label == kSecretLabel ? "secret" : "public") +
          " one expected here; " + shape);
    }
    if (w.size() != 2 || w[0] != label) {
      return invalid_argument(where + " is not `" + std::string(label) + " <key>`; " + shape);
    }
    if (!is_z85_key(w[1])) {
      return invalid_argument(where + ": the key is not 40 Z85 characters; " + shape);
    }
    if (!found.empty()) return invalid_argument(where + ": a second key; " + shape);
    found = w[1];
  }
  if (found.empty()) return invalid_argument(path + " holds no key; " + shape);
  return found;
}

Status write_file(const std::string& path, const std::string& text, mode_t mode, bool overwrite) {
  if (overwrite) ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) {
      return {StatusCode::kAlreadyExists,
              path + " exists; choose another --name or folder, or pass --force"};
    }
    return unavailable("creating " + path + ": " + errno_text(errno));
  }
  // The umask may only take bits away; fchmod makes the mode exactly what was asked.
  bool ok = ::fchmod(fd, mode) == 0;
  size_t done = 0;
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  const int err = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok) return unavailable("writing " + path + ": " + errno_text(err));
  return Status::ok();
}

}  // namespace

Result<CurveKeyPair> generate_curve_keypair() {
  if (!zmq_has("curve")) {
    return unimplemented(
        "this libzmq was built without CURVE support; install a libzmq built with libsodium");
  }
  char public_key[kCurveKeyChars + 1] = {};
  char secret_key[kCurveKeyChars + 1] = {};
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    return internal_error(std::string("zmq_curve_keypair failed: ") + zmq_strerror(zmq_errno()));
  }
  return CurveKeyPair{public_key, secret_key};
}

bool is_z85_key(std::string_view text) {
  return text.size() == kCurveKeyChars && std::all_of(text.begin(), text.end(), [](char c) {
           return kZ85Alphabet.find(c) != std::string_view::npos;
         });
}

Result<std::string> curve_public_key_of(const std::string& secret_key) {
  if (!is_z85_key(secret_key)) return invalid_argument("a CURVE secret key is 40 Z85 characters");
  char public_key[kCurveKeyChars + 1] = {};
  if (zmq_curve_public(public_key, secret_key.c_str()) != 0) {
    return unimplemented(std::string("deriving the public key: ") + zmq_strerror(zmq_errno()) +
                         " (a libzmq built without CURVE?)");
  }
  return std::string(public_key);
}

bool is_valid_key_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '.' || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

Status write_curve_key_files(const std::string& dir, const std::string& name,
                             const CurveKeyPair& pair, bool overwrite) {
  if (!is_valid_key_name(name)) {
    return invalid_argument("key name '" + name +
                            "': use 1..64 letters, digits, '.', '_' or '-' (not first)");
  }
  if (!is_z85_key(pair.public_key) || !is_z85_key(pair.secret_key)) {
    return invalid_argument("write_curve_key_files: keys must be Z85");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return unavailable("creating " + dir + ": " + ec.message());
  const std::string secret_path = dir + "/" + name + ".key";
  const std::string public_path = dir + "/" + name + ".pub";
  if (!overwrite) {
    for (const std::string& p : {secret_path, public_path}) {
      if (fs::exists(fs::symlink_status(p, ec))) {
        return {StatusCode::kAlreadyExists,
                p + " exists; choose another --name or folder, or pass --force"};
      }
    }
  }
  KILN_RETURN_IF_ERROR(
      write_file(secret_path,
                 "# kiln CURVE secret key '" + name +
                     "', written by `kiln keys new`.\n"
                     "# Keep it private (mode 0600): whoever holds it is admitted as '" +
                     name + "'.\n" + std::string(kSecretLabel) + " " + pair.secret_key + "\n",
                 0600, overwrite));
  return write_public_key_file(public_path, name, pair.public_key, overwrite);
}

Status write_public_key_file(const std::string& path, const std::string& name,
                             const std::string& public_key, bool overwrite) {
  if (!is_z85_key(public_key))
    return invalid_argument("write_public_key_file: the key must be Z85");
  return write_file(
      path,
      "# kiln CURVE public key '" + name +
          "', written by `kiln keys new`.\n"
          "# A worker's: put it on the coordinator's --allow list. The coordinator's: give it\n"
          "# to the workers as --coordinator-key.\n" +
          std::string(kPublicLabel) + " " + public_key + "\n",
      0644, overwrite);
}

Result<CurveKeyPair> read_secret_key_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_small_file(path));
  KILN_ASSIGN_OR_RETURN(std::string secret,
                        parse_key_file(path, text, kSecretLabel, kPublicLabel, kSecretShape));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return failed_precondition(path + " is a secret key that group or others may access (mode " +
                               mode + "); run `chmod 600 " + path + "`");
  }
  KILN_ASSIGN_OR_RETURN(std::string public_key, curve_public_key_of(secret));
  return CurveKeyPair{std::move(public_key), std::move(secret)};
}

Result<std::string> read_public_key_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_small_file(path));
  return parse_key_file(path, text, kPublicLabel, kSecretLabel, kPublicShape);
}

Result<AllowList> read_allow_list(const std::string& path) {
  AllowList list;
  list.source = path;
  std::set<std::string> names;
  auto add = [&](const std::string& name, const std::string& key,
                 const std::string& where) -> Status {
    if (!names.insert(name).second)
      return invalid_argument(where + ": the name '" + name + "' appears twice");
    auto [it, fresh] = list.names_by_key.emplace(key, name);
    if (!fresh) {
      return invalid_argument(where + ": this key is already on the list as '" + it->second +
                              "' (one key, one name)");
    }
    return Status::ok();
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.path().extension() == ".pub") files.push_back(entry.path());
    }
    if (ec) return unavailable("listing " + path + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const std::string name = f.stem().string();
      if (!is_valid_key_name(name)) {
        return invalid_argument(f.string() + ": the file name gives the key's name, and '" + name +
                                "' is not one (1..64 letters, digits, '.', '_' or '-')");
      }
      KILN_ASSIGN_OR_RETURN(std::string key, read_public_key_file(f.string()));
      KILN_RETURN_IF_ERROR(add(name, key, f.string()));
    }
  } else {
    KILN_ASSIGN_OR_RETURN(std::string text, read_small_file(path));
    std::istringstream in(text);
    int number = 0;
    for (std::string raw; std::getline(in, raw);) {
      ++number;
      const std::string line = trim(raw);
      if (line.empty() || line[0] == '#') continue;
      const std::string where = path + " line " + std::to_string(number);
      const std::vector<std::string> w = words(line);
      if (w.size() == 2 && w[0] == kSecretLabel) {
        return invalid_argument(
            path + " is a secret key file; --allow takes workers' public keys. " + kListShape);
      }
      if (w.size() != 2 || !is_valid_key_name(w[0]) || !is_z85_key(w[1])) {
        return invalid_argument(where + " is not `NAME <40 Z85 characters>`; " + kListShape);
      }
      KILN_RETURN_IF_ERROR(add(w[0], w[1], where));
    }
  }
  if (list.names_by_key.empty()) {
    return invalid_argument(path + " admits no worker key; " + kListShape +
                            " (make keys with `kiln keys new --out DIR --name NAME`)");
  }
  return list;
}

Status add_to_allow_list(const std::string& path, const std::string& name,
                         const std::string& public_key) {
  if (!is_valid_key_name(name)) {
    return invalid_argument("key name '" + name +
                            "': use 1..64 letters, digits, '.', '_' or '-' (not first)");
  }
  if (!is_z85_key(public_key)) return invalid_argument("the public key is not 40 Z85 characters");
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (exists) {
    KILN_ASSIGN_OR_RETURN(AllowList list, read_allow_list(path));
    for (const auto& [key, n] : list.names_by_key) {
      if (n == name)
        return {StatusCode::kAlreadyExists, path + " already has a key named '" + name + "'"};
      if (key == public_key)
        return {StatusCode::kAlreadyExists, path + " already admits this key as '" + n + "'"};
    }
  }
  std::ofstream out(path, std::ios::app);
  if (!out) return unavailable("opening " + path + ": " + errno_text(errno));
  if (!exists)
    out << "# kiln coordinator allow-list (--allow): one `NAME <Z85 public key>` per worker key.\n";
  out << name << " " << public_key << "\n";
  out.close();
  if (!out) return unavailable("writing " + path + ": " + errno_text(errno));
  return Status::ok();
}

bool is_loopback_endpoint(std::string_view endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  std::string_view host = endpoint.substr(6);
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    // ::1 however it is written, and IPv4's loopback mapped into IPv6 (::ffff:127.x.y.z); a zone
    // names the interface and changes nothing.
    const std::optional<in6_addr> a = ipv6_address(host.substr(1, close - 1));
    if (!a) return false;
    return IN6_IS_ADDR_LOOPBACK(&*a) || (IN6_IS_ADDR_V4MAPPED(&*a) && a->s6_addr[12] == 127);
  } else {
    host = host.substr(0, host.rfind(':'));
  }
  // A "source;destination" form binds nothing locally of interest here: count it as network.
  if (host.find(';') != std::string_view::npos) return false;
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8, written as a dotted quad.
  if (host.rfind("127.", 0) != 0) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (c < '0' || c > '9')
      return false;
  }
  return dots == 3;
}

}  // namespace kiln::net
