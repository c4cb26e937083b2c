// CURVE keys for the link between the coordinator and its workers: making keypairs, the key files
// `kiln keys` writes and the daemons read, the coordinator's allow-list of worker keys, and the
// rule that decides when a coordinator must use CURVE. Keys are Z85 text (40 characters for 32
// bytes), as libzmq takes them. File formats (docs/security.md):
//   NAME.key  mode 0600   '#' comment lines, then `secret-key <Z85>`
//   NAME.pub             '#' comment lines, then `public-key <Z85>`
//   allow-list file      '#' comment lines, blank lines, and one `NAME <Z85 public key>` per line
//   allow-list folder    every NAME.pub in it (NAME is the file name without .pub)
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "shared/status.h"

namespace kiln::net {

inline constexpr size_t kCurveKeyChars = 40;  // Z85 text of a 32-byte key

struct CurveKeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85
};

// The workers a coordinator admits: Z85 public key -> the name it logs and hands on as User-Id.
struct AllowList {
  std::map<std::string, std::string> names_by_key;
  std::string source;  // the file or folder it was read from, for messages
};

// A fresh keypair. kUnimplemented when libzmq was built without CURVE.
Result<CurveKeyPair> generate_curve_keypair();

// Whether `text` is a Z85 CURVE key: 40 characters of the Z85 alphabet.
bool is_z85_key(std::string_view text);

// The public half of a Z85 secret key.
Result<std::string> curve_public_key_of(const std::string& secret_key);

// Key names: 1..64 characters of [A-Za-z0-9._-], not starting with '.' or '-'.
bool is_valid_key_name(std::string_view name);

// Writes DIR/NAME.key (the secret, created with mode 0600) and DIR/NAME.pub, creating DIR.
// kAlreadyExists when either file exists and `overwrite` is false.
Status write_curve_key_files(const std::string& dir, const std::string& name,
                             const CurveKeyPair& pair, bool overwrite);

// Writes one public key file at `path` (mode 0644), as write_curve_key_files does for NAME.pub.
Status write_public_key_file(const std::string& path, const std::string& name,
                             const std::string& public_key, bool overwrite);

// Reads a NAME.key file; the public key is derived from the secret. Refuses a file that group or
// others may read (kFailedPrecondition: chmod 600), a .pub file, and anything malformed, with a
// message that names the file and shows what a valid one looks like.
Result<CurveKeyPair> read_secret_key_file(const std::string& path);

// Reads a NAME.pub file (the coordinator's, for a worker's --coordinator-key). Refuses a secret
// key file: a worker must never hold the coordinator's secret.
Result<std::string> read_public_key_file(const std::string& path);

// Reads an allow-list: a folder of NAME.pub files, or a file of `NAME <Z85>` lines. An empty list,
// a duplicate name or key, or a malformed entry is an error naming the file and line.
Result<AllowList> read_allow_list(const std::string& path);

// Appends `NAME <Z85>` to an allow-list file (created with a header comment when absent).
// kAlreadyExists when the name or the key is already on it.
Status add_to_allow_list(const std::string& path, const std::string& name,
                         const std::string& public_key);

// Whether a coordinator bound to `endpoint` is reachable only from this machine: tcp:// on
// 127.0.0.0/8, ::1 or localhost, and ipc:// and inproc:// (no network). Anything else -- a
// wildcard, a host name, an interface -- counts as reachable from the network.
bool is_loopback_endpoint(std::string_view endpoint);

}  // namespace kiln::net
