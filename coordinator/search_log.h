// The search log of a run (kiln:events:{run}): one entry per step of the search, written in the
// same MULTI/EXEC as the records the step changes (redis::SearchStep), and replayed by a resume
// (Engine::resume) through the code that wrote it. Three kinds of entries:
//   submit  a candidate's evaluation task, written BEFORE the task goes to the dispatcher;
//   result  a judged result (seed baseline, child kept/reverted/failed, re-time crowned/rejected)
//           with the result itself, written after it arrived;
//   done    a target converged, stopped or failed.
// Each is a typed event here; to_fields() and parse_search_event() are the one place that knows
// the entries' field names. The stored format is fixed: runs written by one kiln are resumed by
// another (tests/coordinator/search_log_format_test.cc pins it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "coordinator/stored_fields.h"
#include "coordinator/target_report.h"
#include "shared/protocol.h"
#include "shared/redis_store.h"
#include "shared/status.h"

namespace kiln::coordinator {

// What a task evaluates: the target's seed (the baseline), a child of a parent (judged against
// it), or a kept child that would be the new best, timed again before it is crowned.
enum class TaskKind { kSeed, kChild, kRetime };
std::string_view task_kind_name(TaskKind kind);  // "seed", "child", "retime"

// How a result was judged.
enum class Verdict { kBaseline, kFailed, kKept, kReverted, kCrowned, kCrownRejected };
// "baseline", "failed", "kept", "reverted", "crowned", "crown rejected" (also the candidate's
// status in kiln:cand:{id}).
std::string_view verdict_name(Verdict verdict);

struct SubmitEvent {
  uint64_t seq = 0;  // the task's number in the run (task ids are made from it)
  std::string target;
  std::string gpu_model;  // the population's GPU model; "" for any
  std::string shape;      // the population's sweep shape (shape_string); "" for none
  std::string task;       // task id
  std::string candidate;  // candidate id
  TaskKind kind = TaskKind::kChild;
  std::map<std::string, std::string> params;
  std::string source_hash;  // kiln:src:{hash} holds the source text
  // The candidate's lineage (logged for kChild and kRetime; for kSeed only in kiln:cand).
  uint32_t island = 0;
  std::string parent;  // parent's candidate id
  std::string op;      // the operator that made it
  std::string model;   // the LLM model that wrote it ("" when none did; logged only when set)
  uint32_t generation = 0;
  // kChild: the parent's time as the child is judged against it.
  double parent_us = 0;
  double parent_noise = 0;
  // kRetime: the candidate's time before the re-time.
  double median_us = 0;
  double noise_rel = 0;
  bool operator==(const SubmitEvent&) const = default;
};

struct ResultEvent {
  std::string target;
  std::string gpu_model;
  std::string shape;  // the population's sweep shape; "" for none
  TaskKind kind = TaskKind::kChild;
  Verdict verdict = Verdict::kFailed;
  std::string reason;
  proto::EvaluationResult result;  // the entry also names its task, candidate, outcome and time
  double at_s = -1;                // the run's search time when it arrived (logged only when >= 0)
  bool operator==(const ResultEvent&) const = default;
};

struct DoneEvent {
  std::string target;
  std::string gpu_model;
  Phase phase = Phase::kConverged;  // final: converged, stopped or failed
  std::string state;                // the target's state as shown, e.g. "converged: ..."
  std::string shape;                // the population's sweep shape; "" for none
  bool operator==(const DoneEvent&) const = default;
};

using SearchEvent = std::variant<SubmitEvent, ResultEvent, DoneEvent>;

// The entry's fields, in their stored order.
FieldList to_fields(const SearchEvent& event);

// An entry read back. nullopt for an entry type this kiln does not know (written by a newer one
// for its own readers); DATA_LOSS naming the field when a known entry is malformed.
Result<std::optional<SearchEvent>> parse_search_event(const FieldList& fields);

// The entry's type as stored ("submit", "result", "done"; "" when it has none), for messages.
std::string entry_type(const FieldList& fields);

// What kiln:target:{key} records of a target with each judged result.
struct TargetStanding {
  std::string spec_hash;
  std::string best_id;
  double best_us = 0;
  std::string baseline_id;  // the seed's candidate id once it verified; "" before
  double baseline_us = 0;
};

// One step of the search (one MULTI/EXEC) with `event` as its log entry, and the records it
// changes: a submit writes the candidate's record (kiln:cand:{id}; a re-time only marks it
// "re-timing"), a result the candidate's status, time and arch and the target's standing
// (kiln:target:{key}), done the target's state. Sources and populations are the caller's to add.
redis::SearchStep step_of(const SubmitEvent& event);
redis::SearchStep step_of(const ResultEvent& event, const TargetStanding& standing);
redis::SearchStep step_of(const DoneEvent& event);

}  // namespace kiln::coordinator
