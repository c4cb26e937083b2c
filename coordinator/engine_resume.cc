// Engine::resume(): the run's search log replayed through the code that wrote it, then what was
// in flight when the last coordinator stopped folded in, re-queued or sent again (see engine.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "coordinator/engine.h"

namespace kiln::coordinator {

Status Engine::resume() {
  if (!store_) return failed_precondition("the engine has no store to resume from");
  KILN_ASSIGN_OR_RETURN(std::optional<RunRecord> recorded, read_run_record(*store_));
  if (!recorded) return not_found("Redis holds no run to resume (kiln:run is absent)");
  const RunRecord ours = this_run();
  KILN_RETURN_IF_ERROR(check_same_run(*recorded, ours, !options_.discover_gpu_models));
  record_ = *recorded;
  const bool adds_shapes = record_.shapes != ours.shapes;  // a sweep with shapes added
  record_.shapes = ours.shapes;
  if (options_.discover_gpu_models) {
    for (const std::string& model : recorded->gpu_models) add_gpu_model(model);
  }
  spent_before_ = record_.spent_s;

  // Replay the search log through the code that wrote it.
  replaying_ = true;
  std::string after;
  uint64_t steps = 0;
  Status replayed = Status::ok();
  while (replayed.is_ok()) {
    Result<std::vector<redis::StreamEvent>> page = store_->read_events(record_.id, after, 1000);
    if (!page.is_ok()) {
      replayed = page.status();
      break;
    }
    if (page->empty()) break;
    for (const redis::StreamEvent& ev : *page) {
      Result<std::optional<SearchEvent>> event = parse_search_event(ev.fields);
      if (!event.is_ok()) {
        replayed = event.status();
      } else if (*event) {  // other types: written by a newer kiln for its readers
        replayed = replay(**event);
      }
      if (!replayed.is_ok()) {
        replayed = replayed.with_context("replaying step " + ev.id + " (" + entry_type(ev.fields) +
                                         ") of run " + record_.id);
        break;
      }
      ++steps;
      after = ev.id;
    }
  }
  replaying_ = false;
  KILN_RETURN_IF_ERROR(replayed);
  // A new stream of draws: the old generator's state is not recorded.
  rng_.seed(options_.seed + 0x9E3779B97F4A7C15ULL * (steps + 1));

  // A finished run stays finished, unless the sweep added shapes: their populations search now.
  const bool was_finished = (record_.state == "finished" && !adds_shapes) || finished();
  record_.seed = options_.seed;
  record_.gpu_models = record_models_;
  record_.patience = options_.limits.max_proposals_without_gain;
  record_.budget_s = options_.budget.count();
  record_.state = was_finished ? "finished" : "running";
  ++record_.starts;
  KILN_RETURN_IF_ERROR(write_run_record(*store_, record_));
  begun_ = true;
  if (was_finished) {
    if (!pending_.empty())
      spdlog::warn("resume: run {} finished with {} task(s) unanswered", record_.id,
                   pending_.size());
    return Status::ok();
  }

  // What was in flight when the last coordinator stopped.
  size_t folded = 0, leased = 0, resent = 0;
  std::vector<std::string> open;
  for (const auto& [task, p] : pending_) open.push_back(task);
  for (const std::string& task : open) {
    auto it = pending_.find(task);
    if (it == pending_.end()) continue;
    const proto::EvaluateTask sent = it->second.task;
    // The dispatcher writes a result (under its task id) before the engine logs it: such a
    // result is folded in, not evaluated again.
    KILN_ASSIGN_OR_RETURN(auto stored, store_->find_results(sent.candidate_id));
    std::optional<proto::EvaluationResult> found;
    for (const auto& [arch, bytes] : stored) {
      Result<proto::Envelope> env = proto::decode(bytes);
      if (!env.is_ok() || env->id != task) continue;
      if (auto* r = std::get_if<proto::EvaluationResult>(&env->body)) found = *r;
    }
    if (found) {
      KILN_RETURN_IF_ERROR(store_->release_lease(task));
      results_.push_back(*found);
      KILN_RETURN_IF_ERROR(on_result(*found));
      ++folded;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> lease, store_->lease_payload(task));
    if (lease) {
      ++leased;  // Dispatcher::recover() below queues it again
      continue;
    }
    dispatcher_->submit(sent);  // logged, never handed out (or its answer was lost)
    ++resent;
  }
  KILN_ASSIGN_OR_RETURN(size_t recovered, dispatcher_->recover());
  // A kept child pending re-time whose re-time was never logged (a stop between the two steps) is
  // re-timed now.
  size_t retimes = 0;
  for (size_t t = 0; t < targets_.size(); ++t) {
    TargetSearch& st = *targets_[t];
    const std::optional<Individual>& crown = st.population.pending_crown();
    if (st.done() || !crown || !st.backend || !st.backend->tunable ||
        retimes_logged_.count(crown->id))
      continue;
    Pending q;
    q.kind = TaskKind::kRetime;
    q.parent = *crown;
    auto own = st.sources.find(crown->id);  // an agent's child has a source of its own
    const std::string& source = own != st.sources.end() ? own->second : st.backend->tunable->source;
    KILN_RETURN_IF_ERROR(submit(t, std::move(q), source, crown->params, crown->id));
    ++retimes;
  }
  spdlog::info(
      "resumed run {} ({} steps replayed, {:.0f} s already spent): {} result(s) folded in, "
      "{} task(s) re-queued from leases ({} leases), {} sent again, {} re-time(s) added",
      record_.id, steps, spent_before_, folded, recovered, leased, resent, retimes);
  return Status::ok();
}

Status Engine::replay(const SearchEvent& event) {
  if (const auto* s = std::get_if<SubmitEvent>(&event)) return replay_submit(*s);
  if (const auto* r = std::get_if<ResultEvent>(&event)) {
    if (!pending_.count(r->result.task_id)) {
      spdlog::warn(
          "resume: a logged result for task {} that was never logged as submitted; ignored",
          r->result.task_id);
      return Status::ok();
    }
    results_.push_back(r->result);
    replay_at_s_ = r->at_s;
    return on_result(r->result);
  }
  const DoneEvent& d = std::get<DoneEvent>(event);
  if (std::optional<size_t> t = target_index(d.target, d.gpu_model, d.shape))
    targets_[*t]->finish(d.phase, d.state);
  return Status::ok();
}

Status Engine::replay_submit(const SubmitEvent& e) {
  // A model whose populations this process has not made yet (a coordinator that discovers its
  // models) gets them now, as it did when the first evaluator of that model connected.
  if (options_.discover_gpu_models) add_gpu_model(e.gpu_model);
  std::optional<size_t> t = target_index(e.target, e.gpu_model, e.shape);
  if (!t) return data_loss("unknown target '" + unit_key(e.target, e.gpu_model, e.shape) + "'");
  TargetSearch& st = *targets_[*t];
  task_seq_ = std::max(task_seq_, e.seq);
  KILN_ASSIGN_OR_RETURN(std::string source, source_of(e.source_hash));
  Pending p;
  p.target = *t;
  p.kind = e.kind;
  p.source = source;
  p.task = task_for(st, e.task, e.candidate, source, e.params, runs_seed_kernel(e.kind, e.op));
  p.model = e.model;
  Individual subject;
  subject.id = e.candidate;
  subject.params = e.params;
  if (e.kind != TaskKind::kSeed) {
    subject.island = e.island;
    subject.generation = e.generation;
    subject.parent_id = e.parent;
    subject.op = e.op;
  }
  switch (e.kind) {
    case TaskKind::kSeed:
      st.seed_sent(e.candidate, source);
      subject.op = "seed";
      p.child = subject;
      break;
    case TaskKind::kChild: {
      // The same changes top_up() / on_proposal() made when this child was proposed, and the note
      // the proposer made then: the tier progression replays too.
      if (st.proposer) st.proposer->replay_proposal(e.params, e.op);
      st.child_proposed(e.candidate, source, e.params, e.island, e.parent);
      const Individual* parent = e.island < st.population.islands().size()
                                     ? st.population.island(e.island).find(e.parent)
                                     : nullptr;
      if (parent) {
        p.parent = *parent;
      } else {  // not expected: top_up() drew the parent from that island
        p.parent.id = e.parent;
        p.parent.median_us = e.parent_us;
        p.parent.noise_rel = e.parent_noise;
      }
      p.child = subject;
      break;
    }
    case TaskKind::kRetime:
      subject.median_us = e.median_us;
      subject.noise_rel = e.noise_rel;
      p.parent = subject;
      retimes_logged_.insert(e.candidate);
      break;
  }
  track(std::move(p));
  return Status::ok();
}

Result<std::string> Engine::source_of(const std::string& hash) {
  if (auto it = sources_.find(hash); it != sources_.end()) return it->second;
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> text, store_->get_source(hash));
  if (!text) return data_loss("source " + hash + " is not in Redis");
  sources_[hash] = *text;
  return *text;
}

}  // namespace kiln::coordinator
