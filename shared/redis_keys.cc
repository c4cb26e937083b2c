// Builders for kiln's Redis keys and the check that keeps their components from breaking the
// layout.
#include "shared/redis_keys.h"

#include <initializer_list>

namespace kiln::redis::keys {

namespace {

std::string join(std::initializer_list<std::string_view> parts) {
  std::string key(kPrefix);
  bool first = true;
  for (std::string_view part : parts) {
    if (!first) key += ':';
    key += part;
    first = false;
  }
  return key;
}

// Printable form of a rejected component for error messages (it may hold control bytes).
std::string quoted(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s.substr(0, 64)) {
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 64) out += "...";
  return out + "'";
}

}  // namespace

Status validate_key_component(std::string_view component) {
  if (component.empty()) return invalid_argument("redis key component is empty");
  if (component.size() > kMaxComponentBytes) {
    return invalid_argument("redis key component " + quoted(component) + " is " +
                            std::to_string(component.size()) + " bytes; the limit is " +
                            std::to_string(kMaxComponentBytes));
  }
  for (unsigned char c : component) {
    if (c == ':') {
      return invalid_argument("redis key component " + quoted(component) +
                              " contains ':', which separates the components of kiln's keys");
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
      return invalid_argument("redis key component " + quoted(component) + " contains whitespace");
    }
    if (c < 0x20 || c == 0x7f) {
      return invalid_argument("redis key component " + quoted(component) +
                              " contains a control byte");
    }
    if (c == '*' || c == '?' || c == '[' || c == ']') {
      return invalid_argument("redis key component " + quoted(component) +
                              " contains a glob character (* ? [ ])");
    }
  }
  return Status::ok();
}

std::string safe_key_component(std::string_view text) {
  std::string out(text.substr(0, kMaxComponentBytes));
  for (char& ch : out) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c <= ' ' || c == 0x7f || c == ':' || c == '*' || c == '?' || c == '[' || c == ']') ch = '_';
  }
  return out.empty() ? "_" : out;
}

std::string schema_version() { return join({"schema"}); }
std::string target(std::string_view target) { return join({"target", target}); }
std::string population(std::string_view target, std::string_view arch, std::string_view island) {
  return join({"pop", target, arch, island});
}
std::string candidate(std::string_view id) { return join({"cand", id}); }
std::string source(std::string_view hash) { return join({"src", hash}); }
std::string binary(std::string_view hash, std::string_view arch) {
  return join({"bin", hash, arch});
}
std::string result(std::string_view id, std::string_view arch) {
  return join({"result", id, arch});
}
std::string lease(std::string_view task) { return join({"lease", task}); }
std::string inflight() { return join({"inflight"}); }
std::string targets() { return join({"targets"}); }
std::string run() { return join({"run"}); }
std::string lease() { return join({"lease"}); }
std::string events(std::string_view run) { return join({"events", run}); }
std::string step_token(std::string_view run) { return join({"step", run}); }

}  // namespace kiln::redis::keys
