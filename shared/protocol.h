// Wire protocol between the coordinator (ZeroMQ ROUTER) and its workers (DEALER): the message
// structs, their msgpack encoding (one flat map per frame) and a decoder for untrusted bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "shared/status.h"

namespace kiln::proto {

// Every message is ONE msgpack map: {"v": kProtocolVersion, "type": <kType>, "id": <message id>,
// ...the fields of that type as further keys of the same map}.
//
// Decoding rules (the schema itself lives in shared/protocol_schema.h, shared by both directions):
// - "v" (unsigned integer), "type" (string) and "id" (string, may be empty) are required.
// - Fields marked [required] below must be present; every other field may be absent and then keeps
//   its default. A present field of the wrong msgpack type is an error naming the field, e.g.
//   "field 'capacity' of 'hello': expected unsigned integer, got string". nil is not "absent".
// - Keys the decoder does not know are ignored, so a newer peer can add optional fields without a
//   version bump. Removing or retyping a field needs a new kProtocolVersion.
// - Strings are taken as bytes; the decoder does not check UTF-8.
// - double fields accept msgpack floats and integers; uint32 fields accept non-negative integers
//   below 2^32 only.
inline constexpr uint32_t kProtocolVersion = 1;

// Largest message decode() accepts by default; sockets set the same limit (ZMQ_MAXMSGSIZE).
inline constexpr size_t kMaxMessageBytes = size_t{64} << 20;

inline constexpr std::string_view kRoleEvaluator = "evaluator";
inline constexpr std::string_view kRoleAgent = "agent";

// Codes used in Error.code.
inline constexpr std::string_view kErrorBadMessage = "bad_message";  // malformed payload
inline constexpr std::string_view kErrorUnsupportedVersion = "unsupported_version";
inline constexpr std::string_view kErrorTooLarge = "too_large";  // over the size limit
// The coordinator does not know the sender (never said hello, or was dropped as silent): the
// worker must announce itself again (hello and credits) before it gets work.
inline constexpr std::string_view kErrorUnknownPeer = "unknown_peer";
// The coordinator will not take this worker (its target specs differ from the run's, ...): the
// message says why and what to do; the worker stops.
inline constexpr std::string_view kErrorRefused = "refused";

// Bye.code: why the sender leaves, which decides what the receiver does.
inline constexpr std::string_view kByeFinished = "finished";  // the run is over: workers exit
// The coordinator stops without the run being over (SIGTERM, a fatal error): workers keep
// running and reconnect, so that a restarted or resumed coordinator finds them.
inline constexpr std::string_view kByeStopping = "stopping";
inline constexpr std::string_view kByeRefused = "refused";  // this worker may not join: exit
inline constexpr std::string_view kByeLeaving = "leaving";  // a worker stops

// A worker announces itself. [required] role (kRoleEvaluator or kRoleAgent), worker_id.
struct Hello {
  static constexpr std::string_view kType = "hello";
  std::string role;
  std::string node;       // hostname
  std::string worker_id;  // stable across reconnects of the same worker process
  std::string gpu_model;  // e.g. "NVIDIA H100 80GB HBM3"; empty for cpu workers
  std::string arch;       // e.g. "sm_90a/H100" or "cpu/x86_64"
  std::vector<std::string> backends;
  uint32_t capacity = 1;  // tasks it can hold at once
  std::string version;    // kiln version string
  // Evaluators: the spec hash (TargetSpec::spec_hash) of every target it can load, by name. The
  // coordinator refuses an evaluator whose copy of a run's target differs or is missing.
  std::map<std::string, std::string> spec_hashes;
  // Evaluators: the compiler their candidates go through (Compiler::toolchain_version(), e.g.
  // "triton 3.6.0, worker 1a2b3c4d5e6f"). The coordinator refuses a triton evaluator whose
  // toolchain differs from the run's other triton evaluators'.
  std::string toolchain;
  // One value per worker process (WorkerLink makes it; reconnects keep it). Two processes that
  // were started with the same worker_id share a routing id on the coordinator's socket and take
  // it from each other; their sessions tell them apart. Empty from older workers.
  std::string session;
  bool operator==(const Hello&) const = default;
};

// Liveness only; any message counts as a heartbeat too.
struct Heartbeat {
  static constexpr std::string_view kType = "heartbeat";
  bool operator==(const Heartbeat&) const = default;
};

// The worker asks for `count` more tasks. [required] count.
struct Credit {
  static constexpr std::string_view kType = "credit";
  uint32_t count = 0;
  bool operator==(const Credit&) const = default;
};

inline constexpr std::string_view kKindSeed = "seed";
inline constexpr std::string_view kKindTemplate = "template";

// Evaluate one candidate. The evaluator draws its verification seeds itself: the candidate's
// author never sees them. [required] task_id, candidate_id, target, backend, source.
struct EvaluateTask {
  static constexpr std::string_view kType = "evaluate";
  std::string task_id;
  std::string candidate_id;
  std::string target;
  std::string backend;                        // "cuda", "cpu", ...
  std::string source;                         // kernel text
  std::map<std::string, std::string> params;  // -D macro values
  std::vector<std::string> dtypes;
  bool profile = false;
  uint32_t deadline_ms = 0;  // 0: the evaluator's default
  // Only evaluators whose Hello names this GPU model take the task (a population's times come
  // from one model); empty: any evaluator of the backend.
  std::string gpu_model;
  // The spec hash of the target as the coordinator loaded it: an evaluator whose copy differs
  // answers with worker_fault instead of judging the candidate against another spec.
  std::string spec_hash;
  // Which of the target's kernels the source is: kKindSeed or kKindTemplate (its geometry,
  // defines and parameter space). The evaluator never guesses it from the parameters.
  std::string kind;
  // The shape to time at (dim name -> size, every dim of the target), for a population searched
  // at one shape of a sweep (docs/run.md "Shape sweeps"); empty: the target's benchmark shape.
  // Verification always runs at the target's own shapes.
  std::map<std::string, int64_t> shape;
  // Time only until the candidate is clearly slower than this (microseconds; 0: time in full):
  // once even the fastest of the first samples is above it, timing stops and the result says
  // stopped_early. The coordinator sends its parent's time plus a margin (a child slower than
  // its parent is never kept). Retimes and seeds are timed in full.
  double early_stop_us = 0;
  bool operator==(const EvaluateTask&) const = default;
};

// A parent handed to a proposer with its measurements. [required] candidate_id, source.
struct ParentInfo {
  std::string candidate_id;
  std::string source;
  std::map<std::string, std::string> params;
  double time_us = 0;
  std::map<std::string, double> metrics;  // profiler metrics by name
  std::string bottleneck;                 // e.g. "memory-bound"; empty when not profiled
  bool operator==(const ParentInfo&) const = default;
};

// A child an agent proposed that failed to compile or verify, handed back so that the agent can
// repair it from its log. [required] candidate_id, source.
struct FailedChild {
  std::string candidate_id;
  std::string parent_id;
  std::string source;
  std::map<std::string, std::string> params;
  std::string outcome;  // outcome_name(), e.g. "compile_error", "wrong_answer"
  std::string log;      // compile log or failing stage's detail; the sender may shorten it
  bool operator==(const FailedChild&) const = default;
};

// Ask an agent for new candidates. [required] task_id, target, arch, backend.
// `failed_children` (optional, added after version 1 shipped; older peers ignore it): children of
// earlier proposals that failed, for repair. `failure_logs`: short summaries of recent failures.
struct ProposeTask {
  static constexpr std::string_view kType = "propose";
  std::string task_id;
  std::string target;
  std::string arch;
  std::string backend;
  std::vector<ParentInfo> parents;
  std::vector<std::string> failure_logs;
  std::string operator_hint;
  uint32_t count = 1;  // proposals wanted
  std::vector<FailedChild> failed_children;
  // Template configurations the population has evaluated or has in flight (the latest ones, up
  // to kMaxEvaluatedSent), so that an agent does not propose them again.
  std::vector<std::map<std::string, std::string>> evaluated;
  static constexpr size_t kMaxEvaluatedSent = 1024;
  bool operator==(const ProposeTask&) const = default;
};

// How an evaluation ended. On the wire: the lower_snake name (outcome_name()).
enum class Outcome {
  kVerified,
  kCompileError,
  kWrongAnswer,
  kRejected,  // cheating detected, or a speed above the physical floor
  kTimeout,
  kCrash,
  kInternalError,
};

// One verification stage's verdict. [required] name, passed.
struct StageReport {
  std::string name;
  bool passed = false;
  std::string detail;
  double worst_rel_error = 0;
  uint32_t cases = 0;
  bool operator==(const StageReport&) const = default;
};

// Timing of a verified candidate; all keys optional (a map under "timing").
struct Timing {
  double median_us = 0;
  double iqr_us = 0;
  double min_us = 0;
  uint32_t samples = 0;
  double noise_rel = 0;  // relative noise reached when sampling stopped
  double sm_clock_mhz = 0;
  uint32_t throttled_samples = 0;  // samples taken below 95% of the run's highest SM clock (kept)
  // Timing stopped after a few samples: the candidate was clearly slower than the task's
  // early_stop_us, so the median is of those samples only.
  bool stopped_early = false;
  bool operator==(const Timing&) const = default;
};

// The stages a verified result carries, each passed, whatever the backend: the static scan, the
// compile, the five verification stages, the precision comparison with the seed, the check of
// timed outputs and the timing itself. The coordinator refuses a `verified` result without them.
inline constexpr std::array<std::string_view, 10> kVerifiedStages = {
    "scan",        "compile", "smoke",     "sweep",         "adversarial",
    "determinism", "edge",    "precision", "timed_outputs", "timing"};

// Report of one evaluation. [required] task_id, candidate_id, outcome.
struct EvaluationResult {
  static constexpr std::string_view kType = "result";
  std::string task_id;
  std::string candidate_id;
  std::string arch;
  Outcome outcome = Outcome::kInternalError;
  std::vector<StageReport> stages;
  Timing timing;
  std::map<std::string, double> metrics;
  std::string log;  // compile log or crash reason
  double wall_ms = 0;
  // When profiled (EvaluateTask.profile): the bottleneck class ("memory_far_from_peak", ...;
  // evaluator/profile/bottleneck.h) and the numbers behind it, then "; notice: " and why counters
  // are missing when they are. Empty when not profiled.
  std::string bottleneck;
  std::string profile_note;
  // The evaluator could not judge the candidate for a reason of its own (a target it cannot load
  // or whose spec differs, a backend it does not run): `log` says why; the coordinator gives the
  // task to another evaluator and the candidate is not blamed.
  bool worker_fault = false;
  // The shape the evaluator timed at when the task named one (EvaluateTask.shape), echoed: the
  // coordinator refuses the time of an evaluator that timed at another shape.
  std::map<std::string, int64_t> shape;
  // Where the result came from, written by the coordinator when it accepts the result (what a
  // worker puts here is replaced): the population it is for ("target" or "target@GPU model"), and
  // the worker id and GPU model from the hello of the worker that held the task's lease.
  std::string unit;
  std::string evaluator;
  std::string evaluator_gpu_model;
  bool operator==(const EvaluationResult&) const = default;
};

// One candidate from a proposer. [required] source.
struct ProposedCandidate {
  std::string source;
  std::map<std::string, std::string> params;
  std::string operator_name;
  std::string parent_id;
  std::string note;
  std::string model;  // the LLM model that wrote it; empty for a proposer without one
  bool operator==(const ProposedCandidate&) const = default;
};

// What answering one ProposeTask cost on one LLM model (every call, refused replies included).
struct ModelUsage {
  std::string model;
  uint32_t calls = 0;
  uint32_t input_tokens = 0;
  uint32_t output_tokens = 0;
  double cost_usd = 0;
  bool operator==(const ModelUsage&) const = default;
};

// An agent's answer to a ProposeTask. [required] task_id.
struct Proposal {
  static constexpr std::string_view kType = "proposal";
  std::string task_id;
  std::string target;
  std::vector<ProposedCandidate> candidates;
  std::string error;  // empty when fine
  std::vector<ModelUsage> usage;  // per LLM model asked for this answer; empty without an LLM
  bool operator==(const Proposal&) const = default;
};

// Either side rejects a message. [required] code, message.
struct Error {
  static constexpr std::string_view kType = "error";
  std::string code;  // kErrorBadMessage, ...
  std::string message;
  std::string ref_id;  // id of the message it answers; empty when unknown
  // A refusal of one worker session (Hello::session): a worker whose session differs ignores it,
  // since it went to the other process of a shared worker id. Empty: meant for whoever gets it.
  std::string session;
  bool operator==(const Error&) const = default;
};

// The sender is leaving. No required fields. `code` (kByeFinished, ...) is what the receiver acts
// on; `reason` is for people. An empty code from an older peer reads as kByeStopping.
struct Bye {
  static constexpr std::string_view kType = "bye";
  std::string reason;
  std::string code;
  bool operator==(const Bye&) const = default;
};

using Message = std::variant<Hello, Heartbeat, Credit, EvaluateTask, ProposeTask, EvaluationResult,
                             Proposal, Error, Bye>;

struct Envelope {
  uint32_t v = kProtocolVersion;
  std::string id;  // unique per sender (see IdGenerator)
  Message body;
  bool operator==(const Envelope&) const = default;
};

// Encodes one message. Never fails (a string over 4 GiB is a caller bug and aborts).
std::string encode(const Envelope& envelope);

// Decodes and validates untrusted bytes. Errors: kOutOfRange when bytes exceed max_bytes (checked
// before unpacking), kUnimplemented for a protocol version other than kProtocolVersion,
// kResourceExhausted when memory runs out, kInvalidArgument for everything else (empty, not
// msgpack, truncated, trailing bytes, not a map, missing or mistyped field, unknown type, a
// container nested deeper than 8 or claiming more elements than the payload could hold). Never
// throws.
Result<Envelope> decode(std::string_view bytes, size_t max_bytes = kMaxMessageBytes);

// The wire "type" of a message, e.g. "result".
std::string_view type_name(const Message& message);

// Why a `verified` result cannot be one: a stage of kVerifiedStages missing, any stage failed, or
// a timing that is not a positive finite median over at least one sample. Empty when it holds
// together, and for every other outcome.
std::string result_inconsistency(const EvaluationResult& result);

// Bounds on what a hello may hold: every text field up to kMaxHelloText bytes, up to kMaxHelloList
// backends and spec hashes. A real worker's hello is far inside them (worker ids are at most 100
// characters); the coordinator keeps what a hello says for as long as the worker is connected, and
// its session for longer, so a peer must not make it keep megabytes.
inline constexpr size_t kMaxHelloText = 256;
inline constexpr size_t kMaxHelloList = 4096;
// Why `hello` is outside those bounds (the field named), or "".
std::string hello_problem(const Hello& hello);

std::string outcome_name(Outcome outcome);             // "compile_error"
Result<Outcome> parse_outcome(std::string_view name);  // kInvalidArgument if unknown

// The Error.code that answers a decode() failure: kErrorUnsupportedVersion, kErrorTooLarge or
// kErrorBadMessage.
std::string error_code_for(const Status& decode_error);

// An Error reply to the message `ref_id`. Its envelope id is empty: the sender sets it from its
// IdGenerator before encoding.
Envelope make_error_reply(std::string_view ref_id, std::string code, std::string message);

// Message ids "<prefix>-1", "<prefix>-2", ... Owned by one sender and not thread-safe. The prefix
// should make ids unique across restarts too (e.g. worker id plus start time).
class IdGenerator {
 public:
  explicit IdGenerator(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string next();

 private:
  std::string prefix_;
  uint64_t counter_ = 0;
};

}  // namespace kiln::proto
