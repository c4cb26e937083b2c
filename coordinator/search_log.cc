// The search log's entries: see search_log.h.
#include "coordinator/search_log.h"

#include <nlohmann/json.hpp>

namespace kiln::coordinator {
namespace {

constexpr TaskKind kKinds[] = {TaskKind::kSeed, TaskKind::kChild, TaskKind::kRetime};
constexpr Verdict kVerdicts[] = {Verdict::kBaseline, Verdict::kFailed,  Verdict::kKept,
                                 Verdict::kReverted, Verdict::kCrowned, Verdict::kCrownRejected};

std::string params_json(const std::map<std::string, std::string>& params) {
  return nlohmann::json(params).dump();
}

FieldList submit_fields(const SubmitEvent& e) {
  FieldList f = {{"type", "submit"},
                 {"seq", std::to_string(e.seq)},
                 {"target", e.target},
                 {"task", e.task},
                 {"cand", e.candidate},
                 {"kind", std::string(task_kind_name(e.kind))},
                 {"params", params_json(e.params)},
                 {"source", e.source_hash}};
  if (!e.gpu_model.empty()) f.emplace_back("gpu", e.gpu_model);
  if (!e.shape.empty()) f.emplace_back("shape", e.shape);
  if (!e.model.empty()) f.emplace_back("model", e.model);
  if (e.kind != TaskKind::kSeed) {
    f.insert(f.end(), {{"island", std::to_string(e.island)},
                       {"parent", e.parent},
                       {"op", e.op},
                       {"generation", std::to_string(e.generation)}});
  }
  if (e.kind == TaskKind::kChild) {
    f.insert(f.end(), {{"parent_us", exact_number(e.parent_us)},
                       {"parent_noise", exact_number(e.parent_noise)}});
  } else if (e.kind == TaskKind::kRetime) {
    f.insert(f.end(),
             {{"median_us", exact_number(e.median_us)}, {"noise_rel", exact_number(e.noise_rel)}});
  }
  return f;
}

FieldList result_fields(const ResultEvent& e) {
  const proto::EvaluationResult& r = e.result;
  FieldList f = {{"type", "result"},
                 {"target", e.target},
                 {"task", r.task_id},
                 {"cand", r.candidate_id},
                 {"kind", std::string(task_kind_name(e.kind))},
                 {"outcome", proto::outcome_name(r.outcome)},
                 {"median_us", exact_number(r.timing.median_us)},
                 {"noise_rel", exact_number(r.timing.noise_rel)},
                 {"arch", r.arch},
                 {"decision", std::string(verdict_name(e.verdict))},
                 {"reason", e.reason},
                 {"result", proto::encode({proto::kProtocolVersion, r.task_id, r})}};
  if (!e.gpu_model.empty()) f.emplace_back("gpu", e.gpu_model);
  if (!e.shape.empty()) f.emplace_back("shape", e.shape);
  if (e.at_s >= 0) f.emplace_back("at", exact_number(e.at_s));
  return f;
}

FieldList done_fields(const DoneEvent& e) {
  FieldList f = {{"type", "done"}, {"target", e.target}, {"state", e.state}};
  if (!e.gpu_model.empty()) f.emplace_back("gpu", e.gpu_model);
  if (!e.shape.empty()) f.emplace_back("shape", e.shape);
  return f;
}

Result<TaskKind> kind_field(const FieldMap& f) {
  const std::string text = field(f, "kind");
  for (TaskKind k : kKinds) {
    if (text == task_kind_name(k)) return k;
  }
  return data_loss("field kind '" + text + "' is not seed, child or retime");
}

Result<Verdict> verdict_field(const FieldMap& f) {
  const std::string text = field(f, "decision");
  for (Verdict v : kVerdicts) {
    if (text == verdict_name(v)) return v;
  }
  return data_loss("field decision '" + text +
                   "' is not baseline, failed, kept, reverted, crowned or crown rejected");
}

// A field that must be there and not be empty.
Result<std::string> text_field(const FieldMap& f, std::string_view name) {
  std::string text = field(f, name);
  if (text.empty()) return data_loss("field " + std::string(name) + " is missing or empty");
  return text;
}

Result<SubmitEvent> parse_submit(const FieldMap& f) {
  SubmitEvent e;
  KILN_ASSIGN_OR_RETURN(e.seq, integer_field(f, "seq"));
  KILN_ASSIGN_OR_RETURN(e.target, text_field(f, "target"));
  e.gpu_model = field(f, "gpu");
  e.shape = field(f, "shape");
  KILN_ASSIGN_OR_RETURN(e.task, text_field(f, "task"));
  KILN_ASSIGN_OR_RETURN(e.candidate, text_field(f, "cand"));
  KILN_ASSIGN_OR_RETURN(e.kind, kind_field(f));
  nlohmann::json pj = nlohmann::json::parse(field(f, "params"), nullptr, false);
  if (pj.is_discarded() || !pj.is_object()) {
    return data_loss("field params of " + e.candidate + " is not a JSON object");
  }
  for (const auto& [k, v] : pj.items()) {
    if (!v.is_string())
      return data_loss("field params of " + e.candidate + ": " + k + " is not a string");
    e.params[k] = v.get<std::string>();
  }
  KILN_ASSIGN_OR_RETURN(e.source_hash, text_field(f, "source"));
  e.model = field(f, "model");
  if (e.kind != TaskKind::kSeed) {
    KILN_ASSIGN_OR_RETURN(uint64_t island, integer_field(f, "island"));
    KILN_ASSIGN_OR_RETURN(uint64_t generation, integer_field(f, "generation"));
    e.island = static_cast<uint32_t>(island);
    e.generation = static_cast<uint32_t>(generation);
    e.parent = field(f, "parent");
    e.op = field(f, "op");
  }
  if (e.kind == TaskKind::kChild) {
    KILN_ASSIGN_OR_RETURN(e.parent_us, number_field(f, "parent_us"));
    KILN_ASSIGN_OR_RETURN(e.parent_noise, number_field(f, "parent_noise"));
  } else if (e.kind == TaskKind::kRetime) {
    KILN_ASSIGN_OR_RETURN(e.median_us, number_field(f, "median_us"));
    KILN_ASSIGN_OR_RETURN(e.noise_rel, number_field(f, "noise_rel"));
  }
  return e;
}

Result<ResultEvent> parse_result(const FieldMap& f) {
  ResultEvent e;
  KILN_ASSIGN_OR_RETURN(e.target, text_field(f, "target"));
  e.gpu_model = field(f, "gpu");
  e.shape = field(f, "shape");
  KILN_ASSIGN_OR_RETURN(e.kind, kind_field(f));
  KILN_ASSIGN_OR_RETURN(e.verdict, verdict_field(f));
  e.reason = field(f, "reason");
  if (!field(f, "at").empty()) {
    KILN_ASSIGN_OR_RETURN(e.at_s, number_field(f, "at"));
  }
  const std::string task = field(f, "task");
  Result<proto::Envelope> env = proto::decode(field(f, "result"));
  if (!env.is_ok())
    return data_loss("field result of task " + task + ": " + env.status().message());
  auto* r = std::get_if<proto::EvaluationResult>(&env->body);
  if (!r) return data_loss("field result of task " + task + " holds no evaluation result");
  e.result = std::move(*r);
  return e;
}

Result<DoneEvent> parse_done(const FieldMap& f) {
  DoneEvent e;
  KILN_ASSIGN_OR_RETURN(e.target, text_field(f, "target"));
  e.gpu_model = field(f, "gpu");
  e.shape = field(f, "shape");
  e.state = field(f, "state");
  std::optional<Phase> phase = final_phase_of(e.state);
  if (!phase) {
    return data_loss("field state '" + e.state +
                     "' does not begin with converged, stopped or failed");
  }
  e.phase = *phase;
  return e;
}

}  // namespace

std::string_view task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::kSeed:
      return "seed";
    case TaskKind::kChild:
      return "child";
    case TaskKind::kRetime:
      return "retime";
  }
  return "?";
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kBaseline:
      return "baseline";
    case Verdict::kFailed:
      return "failed";
    case Verdict::kKept:
      return "kept";
    case Verdict::kReverted:
      return "reverted";
    case Verdict::kCrowned:
      return "crowned";
    case Verdict::kCrownRejected:
      return "crown rejected";
  }
  return "?";
}

FieldList to_fields(const SearchEvent& event) {
  if (const auto* s = std::get_if<SubmitEvent>(&event)) return submit_fields(*s);
  if (const auto* r = std::get_if<ResultEvent>(&event)) return result_fields(*r);
  return done_fields(std::get<DoneEvent>(event));
}

std::string entry_type(const FieldList& fields) {
  for (const auto& [name, value] : fields) {
    if (name == "type") return value;
  }
  return "";
}

Result<std::optional<SearchEvent>> parse_search_event(const FieldList& fields) {
  const FieldMap f = field_map(fields);
  const std::string type = field(f, "type");
  auto wrap = [&](auto parsed) -> Result<std::optional<SearchEvent>> {
    if (!parsed.is_ok()) return parsed.status().with_context("search log entry (" + type + ")");
    return std::optional<SearchEvent>(std::move(parsed).value());
  };
  if (type == "submit") return wrap(parse_submit(f));
  if (type == "result") return wrap(parse_result(f));
  if (type == "done") return wrap(parse_done(f));
  return std::optional<SearchEvent>();
}

redis::SearchStep step_of(const SubmitEvent& e) {
  redis::SearchStep step;
  step.event = submit_fields(e);
  step.candidate = e.candidate;
  if (e.kind == TaskKind::kRetime) {
    step.candidate_fields = {{"status", "re-timing"}, {"retime_task", e.task}};
    return step;
  }
  step.candidate_fields = {{"target", unit_key(e.target, e.gpu_model, e.shape)},
                           {"kind", std::string(task_kind_name(e.kind))},
                           {"task", e.task},
                           {"source_hash", e.source_hash},
                           {"params", params_json(e.params)},
                           {"parent", e.parent},
                           {"operator", e.kind == TaskKind::kSeed ? "seed" : e.op},
                           {"generation", std::to_string(e.generation)},
                           {"island", std::to_string(e.island)},
                           {"status", "submitted"}};
  return step;
}

redis::SearchStep step_of(const ResultEvent& e, const TargetStanding& standing) {
  const proto::EvaluationResult& r = e.result;
  redis::SearchStep step;
  step.event = result_fields(e);
  step.candidate = r.candidate_id;
  step.candidate_fields = {{"status", std::string(verdict_name(e.verdict))},
                           {"median_us", exact_number(r.timing.median_us)},
                           {"arch", r.arch}};
  if (!r.bottleneck.empty()) step.candidate_fields.emplace_back("bottleneck", r.bottleneck);
  step.target = unit_key(e.target, e.gpu_model, e.shape);
  step.target_fields = {{"spec_hash", standing.spec_hash},
                        {"best_id", standing.best_id},
                        {"best_us", exact_number(standing.best_us)}};
  if (!standing.baseline_id.empty()) {
    step.target_fields.insert(step.target_fields.end(),
                              {{"baseline_id", standing.baseline_id},
                               {"baseline_us", exact_number(standing.baseline_us)}});
  }
  return step;
}

redis::SearchStep step_of(const DoneEvent& e) {
  redis::SearchStep step;
  step.event = done_fields(e);
  step.target = unit_key(e.target, e.gpu_model, e.shape);
  step.target_fields = {{"state", e.state}};
  return step;
}

}  // namespace kiln::coordinator
