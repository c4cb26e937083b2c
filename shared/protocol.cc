// Wire protocol: encoding, names of types and outcomes, error replies and message ids. Decoding
// lives in protocol_decode.cc; both follow the field lists in protocol_schema.h.
#include "shared/protocol.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <msgpack.hpp>
#include <new>
#include <utility>

#include "shared/protocol_schema.h"

namespace kiln::proto {
namespace {

constexpr std::array<std::pair<Outcome, std::string_view>, 7> kOutcomeNames = {{
    {Outcome::kVerified, "verified"},
    {Outcome::kCompileError, "compile_error"},
    {Outcome::kWrongAnswer, "wrong_answer"},
    {Outcome::kRejected, "rejected"},
    {Outcome::kTimeout, "timeout"},
    {Outcome::kCrash, "crash"},
    {Outcome::kInternalError, "internal_error"},
}};

// Lets the packer append straight to the result string (no intermediate sbuffer copy).
struct StringSink {
  std::string* out;
  void write(const char* data, size_t size) { out->append(data, size); }
};
using Packer = msgpack::packer<StringSink>;

uint32_t wire_size(size_t size) {
  KILN_CHECK(size <= UINT32_MAX, "protocol: a string or container over 2^32 elements");
  return static_cast<uint32_t>(size);
}

void put_str(Packer& p, std::string_view s) {
  p.pack_str(wire_size(s.size()));
  p.pack_str_body(s.data(), wire_size(s.size()));
}

// One overload per field type of the schema. bool is matched exactly so that no pointer or
// integer silently converts to it.
void put(Packer& p, const std::string& s) { put_str(p, s); }
void put(Packer& p, uint32_t x) { p.pack_uint32(x); }  // smallest encoding that holds x
void put(Packer& p, double x) { p.pack_double(x); }
void put(Packer& p, int64_t x) { p.pack_int64(x); }  // smallest encoding that holds x
template <std::same_as<bool> B>
void put(Packer& p, B b) {
  if (b) {
    p.pack_true();
  } else {
    p.pack_false();
  }
}
void put(Packer& p, Outcome outcome) { put_str(p, outcome_name(outcome)); }
template <class T>
void put(Packer& p, const std::vector<T>& items);
template <class T>
void put(Packer& p, const std::map<std::string, T>& entries);
template <schema::HasFields S>
void put(Packer& p, const S& record);

struct FieldCounter {
  uint32_t count = 0;
  template <class T>
  void operator()(std::string_view, const T&, schema::Need) {
    ++count;
  }
};

struct FieldWriter {
  Packer& p;
  template <class T>
  void operator()(std::string_view key, const T& value, schema::Need) {
    put_str(p, key);
    put(p, value);
  }
};

template <class T>
void put(Packer& p, const std::vector<T>& items) {
  p.pack_array(wire_size(items.size()));
  for (const T& item : items) put(p, item);
}

template <class T>
void put(Packer& p, const std::map<std::string, T>& entries) {
  p.pack_map(wire_size(entries.size()));
  for (const auto& [key, value] : entries) {
    put_str(p, key);
    put(p, value);
  }
}

template <schema::HasFields S>
void put(Packer& p, const S& record) {
  FieldCounter counter;
  schema::fields(counter, record);
  p.pack_map(counter.count);
  FieldWriter writer{p};
  schema::fields(writer, record);
}

}  // namespace

std::string encode(const Envelope& envelope) {
  try {
    std::string out;
    StringSink sink{&out};
    Packer p(sink);
    std::visit(
        [&](const auto& body) {
          FieldCounter counter;
          schema::fields(counter, body);
          p.pack_map(3 + counter.count);
          put_str(p, "v");
          p.pack_uint32(envelope.v);
          put_str(p, "type");
          put_str(p, body.kType);
          put_str(p, "id");
          put_str(p, envelope.id);
          FieldWriter writer{p};
          schema::fields(writer, body);
        },
        envelope.body);
    return out;
  } catch (const std::bad_alloc&) {
    // Like any other allocation failure of a std::string-returning function, but without letting
    // the exception leave shared/.
    check_failed(__FILE__, __LINE__, "encode", "out of memory while encoding a message");
  }
}

std::string_view type_name(const Message& message) {
  return std::visit([](const auto& body) { return body.kType; }, message);
}

std::string outcome_name(Outcome outcome) {
  for (const auto& [value, name] : kOutcomeNames) {
    if (value == outcome) return std::string(name);
  }
  return "internal_error";  // unreachable for a valid enum value
}

Result<Outcome> parse_outcome(std::string_view name) {
  for (const auto& [value, known] : kOutcomeNames) {
    if (known == name) return value;
  }
  std::string expected;
  for (const auto& [value, known] : kOutcomeNames) {
    if (!expected.empty()) expected += ", ";
    expected += known;
  }
  return invalid_argument("unknown outcome " + schema::quote_untrusted(name) +
                          "; expected one of " + expected);
}

std::string error_code_for(const Status& decode_error) {
  switch (decode_error.code()) {
    case StatusCode::kUnimplemented:
      return std::string(kErrorUnsupportedVersion);
    case StatusCode::kOutOfRange:
      return std::string(kErrorTooLarge);
    default:
      return std::string(kErrorBadMessage);
  }
}

Envelope make_error_reply(std::string_view ref_id, std::string code, std::string message) {
  Envelope envelope;
  envelope.body = Error{std::move(code), std::move(message), std::string(ref_id), ""};
  return envelope;
}

std::string IdGenerator::next() { return prefix_ + "-" + std::to_string(++counter_); }

std::string result_inconsistency(const EvaluationResult& r) {
  if (r.outcome != Outcome::kVerified) return "";
  for (std::string_view name : kVerifiedStages) {
    auto it = std::find_if(r.stages.begin(), r.stages.end(),
                           [&](const StageReport& s) { return s.name == name; });
    if (it == r.stages.end()) return "verified without the '" + std::string(name) + "' stage";
    if (!it->passed) return "verified with the '" + std::string(name) + "' stage failed";
  }
  for (const StageReport& s : r.stages) {
    if (!s.passed) return "verified with a failed stage";
  }
  if (!(std::isfinite(r.timing.median_us) && r.timing.median_us > 0) || r.timing.samples == 0) {
    return "verified without a timing (a positive median over at least one sample)";
  }
  return "";
}

std::string hello_problem(const Hello& h) {
  const std::pair<const char*, const std::string*> texts[] = {
      {"role", &h.role},           {"node", &h.node},      {"worker_id", &h.worker_id},
      {"gpu_model", &h.gpu_model}, {"arch", &h.arch},      {"version", &h.version},
      {"toolchain", &h.toolchain}, {"session", &h.session}};
  for (const auto& [name, text] : texts) {
    if (text->size() > kMaxHelloText) {
      return "field '" + std::string(name) + "' is " + std::to_string(text->size()) +
             " bytes, more than " + std::to_string(kMaxHelloText);
    }
  }
  if (h.backends.size() > kMaxHelloList || h.spec_hashes.size() > kMaxHelloList) {
    return "more than " + std::to_string(kMaxHelloList) + " backends or spec hashes";
  }
  for (const std::string& b : h.backends) {
    if (b.size() > kMaxHelloText)
      return "field 'backends': an entry over " + std::to_string(kMaxHelloText) + " bytes";
  }
  for (const auto& [target, hash] : h.spec_hashes) {
    if (target.size() > kMaxHelloText || hash.size() > kMaxHelloText)
      return "field 'spec_hashes': an entry over " + std::to_string(kMaxHelloText) + " bytes";
  }
  return "";
}

}  // namespace kiln::proto
