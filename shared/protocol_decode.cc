// Wire protocol: decoding of untrusted bytes into an Envelope. Limits apply before and during
// unpacking; every missing or mistyped key gives an error that names the field.
#include <algorithm>
#include <cstdint>
#include <msgpack.hpp>
#include <new>
#include <string>
#include <utility>
#include <variant>

#include "shared/protocol.h"
#include "shared/protocol_schema.h"

namespace kiln::proto {
namespace {

using schema::printable;
using schema::quote_untrusted;

// The deepest legitimate nesting is 4 (message > parents > a parent > its metrics).
constexpr size_t kMaxDepth = 8;
// The unpacker allocates a container's elements when it reads the header, before they arrive, so
// the claimed count is capped by what the payload could hold and by this bound, far above any
// legitimate container.
constexpr size_t kMaxContainerElements = size_t{1} << 20;

// Where a value sits, e.g. parents[2].metrics.dram_pct; rendered only when an error happens.
struct Path {
  std::string_view type;  // message type; empty for the envelope keys
  const Path* parent = nullptr;
  std::string_view key;  // a schema field name, or an untrusted map key
  size_t index = 0;
  enum class Kind { kRoot, kField, kEntry, kElement } kind = Kind::kRoot;

  static Path root(std::string_view message_type) {
    Path path;
    path.type = message_type;
    return path;
  }
  Path field(std::string_view name) const { return {type, this, name, 0, Kind::kField}; }
  Path entry(std::string_view map_key) const { return {type, this, map_key, 0, Kind::kEntry}; }
  Path element(size_t i) const { return {type, this, {}, i, Kind::kElement}; }

  std::string render() const {
    if (kind == Kind::kRoot) return "";
    std::string prefix = parent->render();
    if (kind == Kind::kElement) return prefix + "[" + std::to_string(index) + "]";
    std::string name = kind == Kind::kEntry ? printable(key) : std::string(key);
    return prefix.empty() ? name : prefix + "." + name;
  }
};

std::string kind_name(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "boolean";
    case msgpack::type::POSITIVE_INTEGER:
      return "unsigned integer";
    case msgpack::type::NEGATIVE_INTEGER:
      return "negative integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "float";
    case msgpack::type::STR:
      return "string";
    case msgpack::type::BIN:
      return "binary";
    case msgpack::type::ARRAY:
      return "array";
    case msgpack::type::MAP:
      return "map";
    default:
      return "extension";
  }
}

Status field_error(const Path& at, const std::string& what) {
  std::string where = "field '" + at.render() + "'";
  if (!at.type.empty()) where += " of '" + std::string(at.type) + "'";
  return invalid_argument(where + ": " + what);
}

Status type_mismatch(const Path& at, const std::string& expected, const msgpack::object& got) {
  return field_error(at, "expected " + expected + ", got " + kind_name(got));
}

std::string_view as_view(const msgpack::object& o) { return {o.via.str.ptr, o.via.str.size}; }

// The value of the first string key equal to `key`, or null.
const msgpack::object* find_key(const msgpack::object_map& map, std::string_view key) {
  for (uint32_t i = 0; i < map.size; ++i) {
    const msgpack::object_kv& kv = map.ptr[i];
    if (kv.key.type == msgpack::type::STR && as_view(kv.key) == key) return &kv.val;
  }
  return nullptr;
}

// One read() per field type of the schema; each replaces `out` or returns an error.
Status read(const msgpack::object& o, std::string& out, const Path& at) {
  if (o.type != msgpack::type::STR) return type_mismatch(at, "string", o);
  out.assign(o.via.str.ptr, o.via.str.size);
  return {};
}

Status read(const msgpack::object& o, uint32_t& out, const Path& at) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return type_mismatch(at, "unsigned integer", o);
  if (o.via.u64 > UINT32_MAX) {
    return field_error(at,
                       "expected unsigned integer below 2^32, got " + std::to_string(o.via.u64));
  }
  out = static_cast<uint32_t>(o.via.u64);
  return {};
}

Status read(const msgpack::object& o, int64_t& out, const Path& at) {
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    out = o.via.i64;
    return {};
  }
  if (o.type != msgpack::type::POSITIVE_INTEGER) return type_mismatch(at, "integer", o);
  if (o.via.u64 > static_cast<uint64_t>(INT64_MAX)) {
    return field_error(at, "expected an integer below 2^63, got " + std::to_string(o.via.u64));
  }
  out = static_cast<int64_t>(o.via.u64);
  return {};
}

Status read(const msgpack::object& o, double& out, const Path& at) {
  switch (o.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      out = o.via.f64;
      return {};
    case msgpack::type::POSITIVE_INTEGER:
      out = static_cast<double>(o.via.u64);
      return {};
    case msgpack::type::NEGATIVE_INTEGER:
      out = static_cast<double>(o.via.i64);
      return {};
    default:
      return type_mismatch(at, "number", o);
  }
}

Status read(const msgpack::object& o, bool& out, const Path& at) {
  if (o.type != msgpack::type::BOOLEAN) return type_mismatch(at, "boolean", o);
  out = o.via.boolean;
  return {};
}

Status read(const msgpack::object& o, Outcome& out, const Path& at) {
  if (o.type != msgpack::type::STR) return type_mismatch(at, "string", o);
  Result<Outcome> outcome = parse_outcome(as_view(o));
  if (!outcome.is_ok()) return field_error(at, outcome.status().message());
  out = *outcome;
  return {};
}

template <class T>
Status read(const msgpack::object& o, std::vector<T>& out, const Path& at);
template <class T>
Status read(const msgpack::object& o, std::map<std::string, T>& out, const Path& at);
template <schema::HasFields S>
Status read(const msgpack::object& o, S& out, const Path& at);

// Checks beyond types, per struct; most have none.
template <class S>
Status validate(const S&, const Path&) {
  return {};
}
Status validate(const Hello& hello, const Path& at) {
  if (hello.role == kRoleEvaluator || hello.role == kRoleAgent) return {};
  return field_error(at.field("role"),
                     "expected 'evaluator' or 'agent', got " + quote_untrusted(hello.role));
}

// Visits a struct's field list and fills each member from the map; stops at the first error.
struct FieldReader {
  const msgpack::object_map& map;
  const Path& at;
  Status status;

  template <class T>
  void operator()(std::string_view key, T& out, schema::Need need) {
    if (!status.is_ok()) return;
    const msgpack::object* value = find_key(map, key);
    if (value == nullptr) {
      if (need == schema::kRequired) status = field_error(at.field(key), "missing");
      return;
    }
    status = read(*value, out, at.field(key));
  }
};

template <class T>
Status read(const msgpack::object& o, std::vector<T>& out, const Path& at) {
  if (o.type != msgpack::type::ARRAY) return type_mismatch(at, "array", o);
  out.clear();
  out.reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    T item{};
    KILN_RETURN_IF_ERROR(read(o.via.array.ptr[i], item, at.element(i)));
    out.push_back(std::move(item));
  }
  return {};
}

template <class T>
Status read(const msgpack::object& o, std::map<std::string, T>& out, const Path& at) {
  if (o.type != msgpack::type::MAP) return type_mismatch(at, "map", o);
  out.clear();
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const msgpack::object_kv& kv = o.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) {
      return field_error(at, "expected string keys, got a key of type " + kind_name(kv.key));
    }
    const std::string_view key = as_view(kv.key);
    T value{};
    KILN_RETURN_IF_ERROR(read(kv.val, value, at.entry(key)));
    // Encoders never repeat a key; a repeat means a forged or corrupted payload.
    if (!out.emplace(std::string(key), std::move(value)).second) {
      return field_error(at, "duplicate key " + quote_untrusted(key));
    }
  }
  return {};
}

template <schema::HasFields S>
Status read(const msgpack::object& o, S& out, const Path& at) {
  if (o.type != msgpack::type::MAP) return type_mismatch(at, "map", o);
  FieldReader reader{o.via.map, at, {}};
  schema::fields(reader, out);
  KILN_RETURN_IF_ERROR(reader.status);
  return validate(out, at);
}

std::string known_types() {
  std::string names;
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((names += (I == 0 ? "" : ", ") + std::string(std::variant_alternative_t<I, Message>::kType)),
     ...);
  }
  (std::make_index_sequence<std::variant_size_v<Message>>{});
  return names;
}

template <size_t I = 0>
Result<Message> decode_body(std::string_view type, const msgpack::object& root) {
  if constexpr (I == std::variant_size_v<Message>) {
    return invalid_argument("unknown message type " + quote_untrusted(type) +
                            "; known types: " + known_types());
  } else {
    using Body = std::variant_alternative_t<I, Message>;
    if (type != Body::kType) return decode_body<I + 1>(type, root);
    Body body{};
    // The envelope keys "v", "type" and "id" sit in the same map and are skipped as unknown.
    KILN_RETURN_IF_ERROR(read(root, body, Path::root(Body::kType)));
    return Message(std::move(body));
  }
}

// Lets strings in the unpacked objects point into `bytes` instead of being copied; the objects do
// not outlive decode().
bool reference_input(msgpack::type::object_type, std::size_t, void*) { return true; }

// An envelope key ("v", "type", "id") as `out`, or an error saying it is missing or mistyped.
template <class T>
Status read_envelope_key(const msgpack::object& root, std::string_view key, T& out) {
  const msgpack::object* value = find_key(root.via.map, key);
  if (value == nullptr) return invalid_argument("message has no '" + std::string(key) + "' key");
  const Path envelope;
  return read(*value, out, envelope.field(key));
}

// decode() once the size is checked; may throw msgpack and allocation errors.
Result<Envelope> decode_unchecked(std::string_view bytes) {
  const size_t size = bytes.size();
  const msgpack::unpack_limit limit(
      /*array=*/std::min(size, kMaxContainerElements),
      /*map=*/std::min(size / 2, kMaxContainerElements),  // a pair takes at least two bytes
      /*str=*/size, /*bin=*/size, /*ext=*/size, /*depth=*/kMaxDepth);
  size_t offset = 0;
  msgpack::object_handle handle =
      msgpack::unpack(bytes.data(), size, offset, reference_input, nullptr, limit);
  if (offset != size) {
    return invalid_argument(std::to_string(size - offset) + " trailing bytes after the message (" +
                            std::to_string(size) + " bytes in all)");
  }
  const msgpack::object& root = handle.get();
  if (root.type != msgpack::type::MAP) {
    return invalid_argument("message must be a msgpack map, got " + kind_name(root));
  }
  Envelope envelope;
  KILN_RETURN_IF_ERROR(read_envelope_key(root, "v", envelope.v));
  if (envelope.v != kProtocolVersion) {
    return unimplemented(
        "protocol version " + std::to_string(envelope.v) +
        " is not supported; supported versions: " + std::to_string(kProtocolVersion));
  }
  std::string type;
  KILN_RETURN_IF_ERROR(read_envelope_key(root, "type", type));
  KILN_RETURN_IF_ERROR(read_envelope_key(root, "id", envelope.id));
  Result<Message> body = decode_body(type, root);
  if (!body.is_ok()) return body.status();
  envelope.body = std::move(body).value();
  return envelope;
}

}  // namespace

Result<Envelope> decode(std::string_view bytes, size_t max_bytes) {
  if (bytes.empty()) return invalid_argument("empty message");
  if (bytes.size() > max_bytes) {
    return out_of_range("message of " + std::to_string(bytes.size()) +
                        " bytes exceeds the limit of " + std::to_string(max_bytes) + " bytes");
  }
  try {
    return decode_unchecked(bytes);
  } catch (const msgpack::insufficient_bytes&) {
    return invalid_argument("truncated msgpack: the message ends inside a value");
  } catch (const msgpack::depth_size_overflow&) {
    return invalid_argument("msgpack containers nested deeper than " + std::to_string(kMaxDepth));
  } catch (const msgpack::size_overflow& e) {
    return invalid_argument("msgpack header claims a container too large for the " +
                            std::to_string(bytes.size()) +
                            "-byte message (truncated or forged: " + e.what() + ")");
  } catch (const msgpack::unpack_error& e) {
    return invalid_argument(std::string("not msgpack: ") + e.what());
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "out of memory decoding a message");
  } catch (const std::exception& e) {
    return invalid_argument(std::string("malformed message: ") + e.what());
  }
}

}  // namespace kiln::proto
