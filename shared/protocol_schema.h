// Internal to the protocol codec: the one list of every struct's wire keys, in wire order, with
// which of them decode requires. Encoding and decoding both walk these lists.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "shared/protocol.h"

namespace kiln::proto::schema {

enum class Need { kRequired, kOptional };
inline constexpr Need kRequired = Need::kRequired;
inline constexpr Need kOptional = Need::kOptional;

// Matches T and const T, so one list serves the encoder (const) and the decoder (mutable).
template <class M, class T>
concept Is = std::is_same_v<std::remove_const_t<M>, T>;

// fields(v, m) calls v(key, member, need) for every field of m. None may be named "v", "type" or
// "id": those keys belong to the envelope.
template <class V>
void fields(V& v, Is<Hello> auto& m) {
  v("role", m.role, kRequired);
  v("node", m.node, kOptional);
  v("worker_id", m.worker_id, kRequired);
  v("gpu_model", m.gpu_model, kOptional);
  v("arch", m.arch, kOptional);
  v("backends", m.backends, kOptional);
  v("capacity", m.capacity, kOptional);
  v("version", m.version, kOptional);
  v("spec_hashes", m.spec_hashes, kOptional);
  v("toolchain", m.toolchain, kOptional);
  v("session", m.session, kOptional);
}

template <class V>
void fields(V&, Is<Heartbeat> auto&) {}

template <class V>
void fields(V& v, Is<Credit> auto& m) {
  v("count", m.count, kRequired);
}

template <class V>
void fields(V& v, Is<EvaluateTask> auto& m) {
  v("task_id", m.task_id, kRequired);
  v("candidate_id", m.candidate_id, kRequired);
  v("target", m.target, kRequired);
  v("backend", m.backend, kRequired);
  v("source", m.source, kRequired);
  v("params", m.params, kOptional);
  v("dtypes", m.dtypes, kOptional);
  v("profile", m.profile, kOptional);
  v("deadline_ms", m.deadline_ms, kOptional);
  v("gpu_model", m.gpu_model, kOptional);
  v("spec_hash", m.spec_hash, kOptional);
  v("kind", m.kind, kOptional);
  v("shape", m.shape, kOptional);
  v("early_stop_us", m.early_stop_us, kOptional);
}

template <class V>
void fields(V& v, Is<ParentInfo> auto& m) {
  v("candidate_id", m.candidate_id, kRequired);
  v("source", m.source, kRequired);
  v("params", m.params, kOptional);
  v("time_us", m.time_us, kOptional);
  v("metrics", m.metrics, kOptional);
  v("bottleneck", m.bottleneck, kOptional);
}

template <class V>
void fields(V& v, Is<FailedChild> auto& m) {
  v("candidate_id", m.candidate_id, kRequired);
  v("parent_id", m.parent_id, kOptional);
  v("source", m.source, kRequired);
  v("params", m.params, kOptional);
  v("outcome", m.outcome, kOptional);
  v("log", m.log, kOptional);
}

template <class V>
void fields(V& v, Is<ProposeTask> auto& m) {
  v("task_id", m.task_id, kRequired);
  v("target", m.target, kRequired);
  v("arch", m.arch, kRequired);
  v("backend", m.backend, kRequired);
  v("parents", m.parents, kOptional);
  v("failure_logs", m.failure_logs, kOptional);
  v("operator_hint", m.operator_hint, kOptional);
  v("count", m.count, kOptional);
  v("failed_children", m.failed_children, kOptional);
  v("evaluated", m.evaluated, kOptional);
}

template <class V>
void fields(V& v, Is<StageReport> auto& m) {
  v("name", m.name, kRequired);
  v("passed", m.passed, kRequired);
  v("detail", m.detail, kOptional);
  v("worst_rel_error", m.worst_rel_error, kOptional);
  v("cases", m.cases, kOptional);
}

template <class V>
void fields(V& v, Is<Timing> auto& m) {
  v("median_us", m.median_us, kOptional);
  v("iqr_us", m.iqr_us, kOptional);
  v("min_us", m.min_us, kOptional);
  v("samples", m.samples, kOptional);
  v("noise_rel", m.noise_rel, kOptional);
  v("sm_clock_mhz", m.sm_clock_mhz, kOptional);
  v("throttled_samples", m.throttled_samples, kOptional);
  v("stopped_early", m.stopped_early, kOptional);
}

template <class V>
void fields(V& v, Is<EvaluationResult> auto& m) {
  v("task_id", m.task_id, kRequired);
  v("candidate_id", m.candidate_id, kRequired);
  v("arch", m.arch, kOptional);
  v("outcome", m.outcome, kRequired);
  v("stages", m.stages, kOptional);
  v("timing", m.timing, kOptional);
  v("metrics", m.metrics, kOptional);
  v("log", m.log, kOptional);
  v("wall_ms", m.wall_ms, kOptional);
  v("bottleneck", m.bottleneck, kOptional);
  v("profile_note", m.profile_note, kOptional);
  v("worker_fault", m.worker_fault, kOptional);
  v("shape", m.shape, kOptional);
  v("unit", m.unit, kOptional);
  v("evaluator", m.evaluator, kOptional);
  v("evaluator_gpu_model", m.evaluator_gpu_model, kOptional);
}

template <class V>
void fields(V& v, Is<ProposedCandidate> auto& m) {
  v("source", m.source, kRequired);
  v("params", m.params, kOptional);
  v("operator_name", m.operator_name, kOptional);
  v("parent_id", m.parent_id, kOptional);
  v("note", m.note, kOptional);
  v("model", m.model, kOptional);
}

template <class V>
void fields(V& v, Is<ModelUsage> auto& m) {
  v("model", m.model, kRequired);
  v("calls", m.calls, kOptional);
  v("input_tokens", m.input_tokens, kOptional);
  v("output_tokens", m.output_tokens, kOptional);
  v("cost_usd", m.cost_usd, kOptional);
}

template <class V>
void fields(V& v, Is<Proposal> auto& m) {
  v("task_id", m.task_id, kRequired);
  v("target", m.target, kOptional);
  v("candidates", m.candidates, kOptional);
  v("error", m.error, kOptional);
  v("usage", m.usage, kOptional);
}

template <class V>
void fields(V& v, Is<Error> auto& m) {
  v("code", m.code, kRequired);
  v("message", m.message, kRequired);
  v("ref_id", m.ref_id, kOptional);
  v("session", m.session, kOptional);
}

template <class V>
void fields(V& v, Is<Bye> auto& m) {
  v("reason", m.reason, kOptional);
  v("code", m.code, kOptional);
}

// True for the structs that have a field list (encoded as nested maps).
struct FieldProbe {
  template <class T>
  void operator()(std::string_view, T&, Need) {}
};
template <class T>
concept HasFields = requires(FieldProbe& probe, T& t) {
  fields(probe, t);
};

// Untrusted text made safe for an error message: at most 64 bytes, with bytes outside printable
// ASCII shown as '?'. quote_untrusted() also wraps it in single quotes.
inline std::string printable(std::string_view text) {
  constexpr size_t kMaxShown = 64;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (text.size() > kMaxShown) out += "...";
  return out;
}
inline std::string quote_untrusted(std::string_view text) { return "'" + printable(text) + "'"; }

}  // namespace kiln::proto::schema
