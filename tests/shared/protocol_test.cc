// Tests of the wire protocol: round trips of every message type, rejection of malformed and
// hostile payloads with errors that name the field, forward compatibility, and a mutation fuzz.
#include "shared/protocol.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <msgpack.hpp>
#include <random>
#include <string>
#include <vector>

namespace kiln::proto {
namespace {

// ---- Sample messages with a non-default value in every field. ----

ParentInfo sample_parent(int n) {
  return ParentInfo{"cand-" + std::to_string(n),
                    "__global__ void k() {}",
                    {{"BLOCK", "128"}, {"UNROLL", std::to_string(n)}},
                    12.5 + n,
                    {{"dram_pct", 81.25}, {"sm_pct", 33.0}},
                    "memory-bound"};
}

std::vector<Envelope> sample_envelopes() {
  Hello hello{"evaluator",
              "gpu-node-7",
              "w-42",
              "NVIDIA H100 80GB HBM3",
              "sm_90a/H100",
              {"cuda", "cpu"},
              3,
              "0.1.0",
              {{"softmax_f16", "9f86d081"}, {"reduce", "ab12"}},
              "triton 3.6.0, worker 0123456789ab",
              "w-0123456789abcdef"};
  EvaluateTask evaluate{"t-1",
                        "c-abc",
                        "softmax_f16",
                        "cuda",
                        "__global__ void softmax() {}",
                        {{"BLOCK", "256"}, {"VEC", "4"}},
                        {"f16", "bf16"},
                        true,
                        30000,
                        "NVIDIA H100 80GB HBM3",
                        "9f86d081",
                        "template",
                        {{"M", 4096}, {"N", 4096}},
                        123.25};
  ProposeTask propose{"t-2",
                      "softmax_f16",
                      "sm_90a/H100",
                      "cuda",
                      {sample_parent(1), sample_parent(2)},
                      {"error: x undefined", "timeout"},
                      "memory_access",
                      5,
                      {FailedChild{"c-9",
                                   "cand-1",
                                   "__global__ void k() { x; }",
                                   {{"BLOCK", "64"}},
                                   "compile_error",
                                   "error: identifier \"x\" is undefined"}},
                      {{{"BLOCK", "128"}}, {{"BLOCK", "256"}}}};
  EvaluationResult result{
      "t-1",
      "c-abc",
      "sm_90a/H100",
      Outcome::kWrongAnswer,
      {{"smoke", true, "ok", 1e-6, 4}, {"sweep", false, "bad at 4096", 0.25, 36}},
      Timing{10.5, 0.25, 10.0, 200, 0.004, 1980.0, 3, true},
      {{"dram_pct", 91.5}, {"occupancy", -0.5}},
      "mismatch at index 7",
      1234.5,
      "memory_far_from_peak",
      "DRAM 42% of peak, SM 12%",
      true};
  Proposal proposal{"t-2",
                    "softmax_f16",
                    {{"src1", {{"BLOCK", "64"}}, "param_mutation", "c-1", "smaller blocks"},
                     {"src2", {}, "llm_rewrite", "c-2", "uses TMA", "model-a"}},
                    "rate limited",
                    {{"model-a", 2, 1500, 800, 0.0125}, {"model-b", 1, 0, 0, 0}}};
  return {
      Envelope{1, "m-1", hello},
      Envelope{1, "m-2", Heartbeat{}},
      Envelope{1, "m-3", Credit{7}},
      Envelope{1, "m-4", evaluate},
      Envelope{1, "m-5", propose},
      Envelope{1, "m-6", result},
      Envelope{1, "m-7", proposal},
      Envelope{1, "m-8",
               Error{"refused", "worker id 'w-42' is in use", "m-0", "w-0123456789abcdef"}},
      Envelope{1, "m-9", Bye{"shutting down", "stopping"}},
  };
}

// ---- A hand-made msgpack map, for payloads the encoder would never produce. ----

using Packer = msgpack::packer<msgpack::sbuffer>;
using ValueWriter = std::function<void(Packer&)>;
struct Entry {
  std::string key;
  ValueWriter value;
};

ValueWriter str(std::string s) {
  return [s](Packer& p) {
    p.pack_str(static_cast<uint32_t>(s.size()));
    p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  };
}
ValueWriter uint(uint64_t x) {
  return [x](Packer& p) { p.pack_uint64(x); };
}
ValueWriter sint(int64_t x) {
  return [x](Packer& p) { p.pack_int64(x); };
}
ValueWriter nil() {
  return [](Packer& p) { p.pack_nil(); };
}
ValueWriter map_of(std::vector<Entry> entries) {
  return [entries](Packer& p) {
    p.pack_map(static_cast<uint32_t>(entries.size()));
    for (const Entry& e : entries) {
      str(e.key)(p);
      e.value(p);
    }
  };
}
ValueWriter array_of(std::vector<ValueWriter> items) {
  return [items](Packer& p) {
    p.pack_array(static_cast<uint32_t>(items.size()));
    for (const ValueWriter& item : items) item(p);
  };
}

std::string pack(const ValueWriter& value) {
  msgpack::sbuffer buffer;
  Packer p(buffer);
  value(p);
  return std::string(buffer.data(), buffer.size());
}

std::vector<Entry> header(std::string type) {
  return {{"v", uint(1)}, {"type", str(std::move(type))}, {"id", str("m-1")}};
}
std::vector<Entry> plus(std::vector<Entry> entries, std::vector<Entry> more) {
  entries.insert(entries.end(), more.begin(), more.end());
  return entries;
}
std::vector<Entry> hello_entries() {
  return plus(header("hello"), {{"role", str("agent")}, {"worker_id", str("w-1")}});
}
// `entries` with the value of `key` replaced (or added when absent).
std::vector<Entry> with(std::vector<Entry> entries, const std::string& key, ValueWriter value) {
  for (Entry& e : entries) {
    if (e.key == key) {
      e.value = std::move(value);
      return entries;
    }
  }
  entries.push_back({key, std::move(value)});
  return entries;
}
std::vector<Entry> without(std::vector<Entry> entries, const std::string& key) {
  std::erase_if(entries, [&](const Entry& e) { return e.key == key; });
  return entries;
}

// ---- Round trips. ----

TEST(ProtocolRoundTrip, EveryMessageTypeSurvivesWithAllFieldsSet) {
  for (const Envelope& original : sample_envelopes()) {
    SCOPED_TRACE(std::string(type_name(original.body)));
    Result<Envelope> decoded = decode(encode(original));
    ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
    EXPECT_EQ(decoded->v, original.v);
    EXPECT_EQ(decoded->id, original.id);
    EXPECT_EQ(decoded->body.index(), original.body.index());
    EXPECT_TRUE(*decoded == original);
  }
}

TEST(ProtocolRoundTrip, ResultKeepsEveryNestedField) {
  const Envelope original = sample_envelopes()[5];
  Result<Envelope> decoded = decode(encode(original));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  const auto& want = std::get<EvaluationResult>(original.body);
  const auto& got = std::get<EvaluationResult>(decoded->body);
  EXPECT_EQ(got.outcome, Outcome::kWrongAnswer);
  ASSERT_EQ(got.stages.size(), 2u);
  EXPECT_EQ(got.stages[1], want.stages[1]);
  EXPECT_EQ(got.timing.median_us, 10.5);
  EXPECT_EQ(got.timing.samples, 200u);
  EXPECT_EQ(got.timing.throttled_samples, 3u);
  EXPECT_EQ(got.timing.sm_clock_mhz, 1980.0);
  EXPECT_EQ(got.metrics, want.metrics);
  EXPECT_EQ(got.log, want.log);
  EXPECT_EQ(got.wall_ms, 1234.5);
  EXPECT_EQ(got.bottleneck, "memory_far_from_peak");
  EXPECT_EQ(got.profile_note, "DRAM 42% of peak, SM 12%");
}

TEST(ProtocolCompatibility, ResultWithoutProfileFieldsDecodesWithThemEmpty) {
  // A result from a peer that predates the profile fields: required keys only.
  auto entries = plus(header("result"), {{"task_id", str("t")},
                                         {"candidate_id", str("c")},
                                         {"outcome", str("verified")}});
  Result<Envelope> decoded = decode(pack(map_of(entries)));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  const auto& r = std::get<EvaluationResult>(decoded->body);
  EXPECT_EQ(r.outcome, Outcome::kVerified);
  EXPECT_TRUE(r.bottleneck.empty());
  EXPECT_TRUE(r.profile_note.empty());

  // And a mistyped profile field is named.
  decoded = decode(pack(map_of(plus(entries, {{"bottleneck", uint(3)}}))));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("bottleneck"), std::string::npos)
      << decoded.status().message();
}

TEST(ProtocolRoundTrip, EveryOutcomeHasAWireName) {
  for (Outcome o :
       {Outcome::kVerified, Outcome::kCompileError, Outcome::kWrongAnswer, Outcome::kRejected,
        Outcome::kTimeout, Outcome::kCrash, Outcome::kInternalError}) {
    Result<Outcome> parsed = parse_outcome(outcome_name(o));
    ASSERT_TRUE(parsed.is_ok()) << outcome_name(o);
    EXPECT_EQ(*parsed, o);
  }
  EXPECT_EQ(outcome_name(Outcome::kCompileError), "compile_error");
  EXPECT_EQ(parse_outcome("bogus").status().code(), StatusCode::kInvalidArgument);
}

TEST(ProtocolEncoding, IsOneFlatMapWithEnvelopeKeys) {
  const std::string bytes = encode(Envelope{1, "m-3", Credit{7}});
  msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
  const msgpack::object& root = handle.get();
  ASSERT_EQ(root.type, msgpack::type::MAP);
  ASSERT_EQ(root.via.map.size, 4u);
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < root.via.map.size; ++i) {
    keys.emplace_back(root.via.map.ptr[i].key.via.str.ptr, root.via.map.ptr[i].key.via.str.size);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"v", "type", "id", "count"}));
  EXPECT_EQ(type_name(Message{EvaluationResult{}}), "result");
  EXPECT_EQ(type_name(Message{EvaluateTask{}}), "evaluate");
}

// ---- Forward compatibility and optional fields. ----

TEST(ProtocolCompatibility, UnknownExtraKeysAreIgnored) {
  auto entries =
      plus(hello_entries(), {{"future_field", map_of({{"x", uint(1)}})}, {"gpu_count", uint(8)}});
  Result<Envelope> decoded = decode(pack(map_of(entries)));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(std::get<Hello>(decoded->body).worker_id, "w-1");

  // Also inside nested structs, and with a non-string key.
  auto propose = plus(header("propose"),
                      {{"task_id", str("t")},
                       {"target", str("x")},
                       {"arch", str("a")},
                       {"backend", str("cpu")},
                       {"parents", array_of({map_of({{"candidate_id", str("c")},
                                                     {"source", str("s")},
                                                     {"new_thing", array_of({uint(1)})}})})}});
  msgpack::sbuffer buffer;
  Packer p(buffer);
  p.pack_map(static_cast<uint32_t>(propose.size() + 1));
  for (const Entry& e : propose) {
    str(e.key)(p);
    e.value(p);
  }
  p.pack_uint32(5);  // a non-string key ...
  p.pack_true();     // ... with some value
  decoded = decode(std::string_view(buffer.data(), buffer.size()));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  ASSERT_EQ(std::get<ProposeTask>(decoded->body).parents.size(), 1u);
  EXPECT_EQ(std::get<ProposeTask>(decoded->body).parents[0].candidate_id, "c");
}

TEST(ProtocolCompatibility, AbsentOptionalFieldsKeepDefaults) {
  Result<Envelope> decoded = decode(pack(map_of(hello_entries())));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  const Hello& hello = std::get<Hello>(decoded->body);
  EXPECT_EQ(hello.capacity, 1u);
  EXPECT_TRUE(hello.backends.empty());
  EXPECT_TRUE(hello.gpu_model.empty());

  decoded = decode(pack(map_of(header("heartbeat"))));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_TRUE(std::holds_alternative<Heartbeat>(decoded->body));
}

TEST(ProtocolErrors, WrongFieldTypeNamesTheField) {
  Result<Envelope> decoded = decode(pack(map_of(with(hello_entries(), "capacity", str("4")))));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decoded.status().message(),
            "field 'capacity' of 'hello': expected unsigned integer, got string");

  auto bad_parent =
      plus(header("propose"),
           {{"task_id", str("t")},
            {"target", str("x")},
            {"arch", str("a")},
            {"backend", str("cpu")},
            {"parents", array_of({map_of({{"candidate_id", str("c")}, {"source", str("s")}}),
                                  map_of({{"candidate_id", str("d")},
                                          {"source", str("s")},
                                          {"time_us", str("fast")}})})}});
  decoded = decode(pack(map_of(bad_parent)));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(decoded.status().message(),
            "field 'parents[1].time_us' of 'propose': expected number, got string");
}

TEST(ProtocolCompatibility, ProposeTaskWithoutFailedChildrenDecodesAndAFailedChildNeedsItsSource) {
  auto base = plus(header("propose"), {{"task_id", str("t")},
                                       {"target", str("x")},
                                       {"arch", str("a")},
                                       {"backend", str("cpu")}});
  Result<Envelope> decoded = decode(pack(map_of(base)));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_TRUE(std::get<ProposeTask>(decoded->body).failed_children.empty());

  auto with_failed = plus(base, {{"failed_children",
                                  array_of({map_of({{"candidate_id", str("c")},
                                                    {"source", str("s")},
                                                    {"log", str("error: x")}})})}});
  decoded = decode(pack(map_of(with_failed)));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  ASSERT_EQ(std::get<ProposeTask>(decoded->body).failed_children.size(), 1u);
  EXPECT_EQ(std::get<ProposeTask>(decoded->body).failed_children[0].log, "error: x");

  auto no_source =
      plus(base, {{"failed_children", array_of({map_of({{"candidate_id", str("c")}})})}});
  decoded = decode(pack(map_of(no_source)));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("failed_children[0].source"), std::string::npos)
      << decoded.status().message();
}

TEST(ProtocolErrors, ErrorRepliesAndIds) {
  Envelope reply = make_error_reply("m-9", "bad_message", "field 'x' is wrong");
  IdGenerator ids("coord-1");
  reply.id = ids.next();
  EXPECT_EQ(reply.id, "coord-1-1");
  EXPECT_EQ(ids.next(), "coord-1-2");
  Result<Envelope> decoded = decode(encode(reply));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(std::get<Error>(decoded->body).ref_id, "m-9");

  EXPECT_EQ(error_code_for(Status(StatusCode::kUnimplemented, "v")), kErrorUnsupportedVersion);
  EXPECT_EQ(error_code_for(out_of_range("big")), kErrorTooLarge);
  EXPECT_EQ(error_code_for(invalid_argument("x")), kErrorBadMessage);
}

// ---- Malformed and hostile payloads. ----

struct BadCase {
  std::string name;
  std::string bytes;
  StatusCode code;
  std::string message_part;  // must appear in the error message; empty: anything
  size_t max_bytes = kMaxMessageBytes;
};

std::vector<BadCase> bad_cases() {
  const std::string valid = encode(sample_envelopes()[4]);  // a propose with nested parents
  std::mt19937 rng(7);
  std::string random_bytes(64, '\0');
  for (char& c : random_bytes) c = static_cast<char>(rng());
  random_bytes[0] = static_cast<char>(0xc1);  // a byte msgpack never uses, so it cannot parse

  std::string deep(100,
                   static_cast<char>(0x91));  // 100 nested one-element arrays
  deep += '\0';

  std::vector<BadCase> cases = {
      {"empty", "", StatusCode::kInvalidArgument, "empty"},
      {"random_bytes", random_bytes, StatusCode::kInvalidArgument, "not msgpack"},
      {"truncated_after_header", valid.substr(0, 1), StatusCode::kInvalidArgument, "truncated"},
      {"truncated_in_middle", valid.substr(0, valid.size() / 2), StatusCode::kInvalidArgument,
       "truncated"},
      {"truncated_last_byte", valid.substr(0, valid.size() - 1), StatusCode::kInvalidArgument,
       "truncated"},
      {"array_at_top", pack(array_of({str("v"), uint(1)})), StatusCode::kInvalidArgument,
       "must be a msgpack map, got array"},
      {"scalar_at_top", pack(uint(5)), StatusCode::kInvalidArgument, "got unsigned integer"},
      {"missing_type", pack(map_of(without(hello_entries(), "type"))),
       StatusCode::kInvalidArgument, "'type'"},
      {"missing_id", pack(map_of(without(hello_entries(), "id"))), StatusCode::kInvalidArgument,
       "'id'"},
      {"missing_v", pack(map_of(without(hello_entries(), "v"))), StatusCode::kInvalidArgument,
       "'v'"},
      {"v_is_string", pack(map_of(with(hello_entries(), "v", str("1")))),
       StatusCode::kInvalidArgument, "field 'v': expected unsigned integer, got string"},
      {"v_is_99", pack(map_of(with(hello_entries(), "v", uint(99)))), StatusCode::kUnimplemented,
       "supported versions: 1"},
      {"id_is_nil", pack(map_of(with(hello_entries(), "id", nil()))),
       StatusCode::kInvalidArgument, "field 'id': expected string, got nil"},
      {"unknown_type", pack(map_of(with(hello_entries(), "type", str("frobnicate")))),
       StatusCode::kInvalidArgument, "unknown message type 'frobnicate'"},
      {"params_int_value",
       pack(map_of(plus(header("evaluate"),
                        {{"task_id", str("t")}, {"candidate_id", str("c")}, {"target", str("x")},
                         {"backend", str("cpu")}, {"source", str("s")},
                         {"params", map_of({{"BLOCK", uint(128)}})}}))),
       StatusCode::kInvalidArgument, "field 'params.BLOCK' of 'evaluate': expected string"},
      {"missing_required_field",
       pack(map_of(plus(header("evaluate"), {{"candidate_id", str("c")}, {"target", str("x")},
                                             {"backend", str("cpu")}, {"source", str("s")}}))),
       StatusCode::kInvalidArgument, "field 'task_id' of 'evaluate': missing"},
      {"outcome_bogus",
       pack(map_of(plus(header("result"), {{"task_id", str("t")}, {"candidate_id", str("c")},
                                           {"outcome", str("bogus")}}))),
       StatusCode::kInvalidArgument, "field 'outcome' of 'result': unknown outcome 'bogus'"},
      {"oversized", valid, StatusCode::kOutOfRange, "exceeds the limit of 16 bytes", 16},
      {"trailing_garbage", valid + "xyz", StatusCode::kInvalidArgument, "3 trailing bytes"},
      {"hostile_array_header", std::string("\xdd\xff\xff\xff\xff", 5),
       StatusCode::kInvalidArgument, "too large"},
      {"hostile_map_header", std::string("\xdf\xff\xff\xff\xff", 5), StatusCode::kInvalidArgument,
       "too large"},
      {"hostile_nested_array",
       pack(map_of(with(hello_entries(), "backends",
                        [](Packer& p) { p.pack_array(0xffffffffu); }))),
       StatusCode::kInvalidArgument, "too large"},
      {"deeply_nested_arrays", deep, StatusCode::kInvalidArgument, "nested deeper than 8"},
      {"string_for_vector", pack(map_of(with(hello_entries(), "backends", str("cuda")))),
       StatusCode::kInvalidArgument, "field 'backends' of 'hello': expected array, got string"},
      {"negative_capacity", pack(map_of(with(hello_entries(), "capacity", sint(-1)))),
       StatusCode::kInvalidArgument, "field 'capacity' of 'hello': expected unsigned integer"},
      {"capacity_over_uint32", pack(map_of(with(hello_entries(), "capacity", uint(1ull << 40)))),
       StatusCode::kInvalidArgument, "field 'capacity' of 'hello': expected unsigned integer"},
      {"unknown_role", pack(map_of(with(hello_entries(), "role", str("king")))),
       StatusCode::kInvalidArgument, "field 'role' of 'hello'"},
      {"int_map_key",
       pack(map_of(plus(header("evaluate"),
                        {{"task_id", str("t")}, {"candidate_id", str("c")}, {"target", str("x")},
                         {"backend", str("cpu")}, {"source", str("s")},
                         {"params", [](Packer& p) {
                            p.pack_map(1);
                            p.pack_uint32(1);
                            p.pack_uint32(2);
                          }}}))),
       StatusCode::kInvalidArgument, "field 'params' of 'evaluate': expected string keys"},
      {"stage_not_a_map",
       pack(map_of(plus(header("result"), {{"task_id", str("t")}, {"candidate_id", str("c")},
                                           {"outcome", str("crash")},
                                           {"stages", array_of({str("smoke")})}}))),
       StatusCode::kInvalidArgument, "field 'stages[0]' of 'result': expected map, got string"},
  };
  return cases;
}

TEST(ProtocolErrors, MalformedPayloadsGiveSpecificErrors) {
  const std::vector<BadCase> cases = bad_cases();
  ASSERT_GE(cases.size(), 15u);
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Envelope> decoded = Status(StatusCode::kInternal, "not run");
    ASSERT_NO_THROW(decoded = decode(c.bytes, c.max_bytes));
    ASSERT_FALSE(decoded.is_ok());
    EXPECT_EQ(decoded.status().code(), c.code) << decoded.status().to_string();
    EXPECT_NE(decoded.status().message().find(c.message_part), std::string::npos)
        << "message: " << decoded.status().message();
  }
}

TEST(ProtocolErrors, MessageOverTheDefaultLimitIsRejectedBeforeUnpacking) {
  // Not even valid msgpack: the size check must come first.
  const std::string huge(kMaxMessageBytes + 1, static_cast<char>(0xc1));
  Result<Envelope> decoded = decode(huge);
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kOutOfRange);
}

// ---- Fuzz. ----

TEST(ProtocolFuzz, MutatedEncodingsNeverCrashOrThrow) {
  std::vector<std::string> seeds;
  for (const Envelope& e : sample_envelopes()) seeds.push_back(encode(e));
  std::mt19937_64 rng(12345);
  int decoded_ok = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bytes = seeds[rng() % seeds.size()];
    const int mutation = static_cast<int>(rng() % 4);
    if (mutation == 0 || mutation == 3) {  // flip 1 to 8 bits
      for (int flips = 1 + static_cast<int>(rng() % 8); flips > 0; --flips) {
        bytes[rng() % bytes.size()] ^= static_cast<char>(1u << (rng() % 8));
      }
    }
    if (mutation == 1 || mutation == 3) bytes.resize(rng() % bytes.size());     // truncate
    if (mutation == 2) bytes[rng() % bytes.size()] = static_cast<char>(rng());  // overwrite
    Result<Envelope> decoded = Status(StatusCode::kInternal, "not run");
    ASSERT_NO_THROW(decoded = decode(bytes)) << "iteration " << i;
    if (decoded.is_ok()) {
      ++decoded_ok;
      // Whatever decodes must encode and decode again.
      Result<Envelope> again = Status(StatusCode::kInternal, "not run");
      ASSERT_NO_THROW(again = decode(encode(*decoded)));
      EXPECT_TRUE(again.is_ok()) << again.status().to_string();
    } else {
      EXPECT_FALSE(decoded.status().message().empty());
    }
  }
  // Some mutations (inside string bodies) leave a valid message; most do not.
  EXPECT_GT(decoded_ok, 0);
  EXPECT_LT(decoded_ok, 2000);
}

}  // namespace
}  // namespace kiln::proto
