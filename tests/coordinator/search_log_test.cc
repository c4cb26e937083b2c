// The search log's typed entries (coordinator/search_log.h): every kind of entry goes to its
// stored fields and back unchanged (numbers with every digit), the stored field names and order
// are the ones older runs hold, the records written with an entry are the expected ones, and a
// malformed entry is DATA_LOSS naming the field.
#include "coordinator/search_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::coordinator {
namespace {

SubmitEvent submit(TaskKind kind, const std::string& gpu = "") {
  SubmitEvent e;
  e.seq = 42;
  e.target = "reduce";
  e.gpu_model = gpu;
  e.task = "t42-0123456789abcdef";
  e.candidate = "0123456789abcdef0123";
  e.kind = kind;
  e.params = {{"BLOCK", "256"}, {"VEC", "4"}};
  e.source_hash = "ab12";
  if (kind != TaskKind::kSeed) {
    e.island = 1;
    e.parent = "parent-id";
    e.op = "mutate guided by memory_far_from_peak";
    e.generation = 3;
  }
  if (kind == TaskKind::kChild) {
    e.parent_us = 0.1;  // not exact in binary: must come back as the same double
    e.parent_noise = 0.0123456789012345678;
  }
  if (kind == TaskKind::kRetime) {
    e.median_us = 12.345678901234567;
    e.noise_rel = 1e-7;
  }
  return e;
}

ResultEvent result(const std::string& gpu = "") {
  ResultEvent e;
  e.target = "reduce";
  e.gpu_model = gpu;
  e.kind = TaskKind::kChild;
  e.verdict = Verdict::kCrownRejected;
  e.reason = "slower than the crowned best by 2.00%";
  e.result.task_id = "t7-abc";
  e.result.candidate_id = "abc";
  e.result.arch = "cpu/x86_64";
  e.result.outcome = proto::Outcome::kVerified;
  e.result.timing.median_us = 1.0 / 3.0;
  e.result.timing.noise_rel = 0.02;
  e.result.timing.samples = 30;
  e.result.metrics = {{"fraction_of_floor", 0.5}};
  e.result.bottleneck = "memory_far_from_peak";
  e.result.log = std::string("bytes \x00\xff kept", 14);
  return e;
}

SearchEvent parse(const FieldList& fields) {
  Result<std::optional<SearchEvent>> e = parse_search_event(fields);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  if (!e.is_ok() || !*e) return DoneEvent{};
  return **e;
}

// The fields of `e` with `name` set to `value` ("" with erase: removed).
FieldList with(FieldList fields, const std::string& name, const std::string& value,
               bool erase = false) {
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    if (it->first != name) continue;
    if (erase) {
      fields.erase(it);
    } else {
      it->second = value;
    }
    return fields;
  }
  ADD_FAILURE() << "no field " << name;
  return fields;
}

// A malformed entry: DATA_LOSS whose message names the entry type and the field.
void expect_data_loss(const FieldList& fields, const std::string& field_name,
                      const std::string& type) {
  Result<std::optional<SearchEvent>> e = parse_search_event(fields);
  ASSERT_FALSE(e.is_ok()) << "accepted a malformed " << field_name;
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss) << e.status().to_string();
  EXPECT_NE(e.status().message().find("field " + field_name), std::string::npos)
      << e.status().to_string();
  EXPECT_NE(e.status().message().find("search log entry (" + type + ")"), std::string::npos)
      << e.status().to_string();
}

TEST(SearchLog, EveryEntryGoesToFieldsAndBackUnchanged) {
  for (const std::string gpu : {"", "NVIDIA H100 80GB HBM3"}) {
    SCOPED_TRACE(gpu);
    for (TaskKind kind : {TaskKind::kSeed, TaskKind::kChild, TaskKind::kRetime}) {
      const SubmitEvent e = submit(kind, gpu);
      EXPECT_EQ(std::get<SubmitEvent>(parse(to_fields(e))), e) << task_kind_name(kind);
    }
    const ResultEvent r = result(gpu);
    EXPECT_EQ(std::get<ResultEvent>(parse(to_fields(r))), r);
    for (Verdict v : {Verdict::kBaseline, Verdict::kFailed, Verdict::kKept, Verdict::kReverted,
                      Verdict::kCrowned, Verdict::kCrownRejected}) {
      ResultEvent judged = r;
      judged.verdict = v;
      EXPECT_EQ(std::get<ResultEvent>(parse(to_fields(judged))).verdict, v) << verdict_name(v);
    }
    for (const auto& [phase, state] : std::vector<std::pair<Phase, std::string>>{
             {Phase::kConverged, "converged: no improvement in 64 proposals"},
             {Phase::kStopped, "stopped: time budget spent"},
             {Phase::kFailed, "failed: the seed did not verify (crash): boom"}}) {
      const DoneEvent d{"reduce", gpu, phase, state};
      EXPECT_EQ(std::get<DoneEvent>(parse(to_fields(d))), d) << state;
    }
  }
}

TEST(SearchLog, FieldsAreStoredUnderTheirNamesInTheirOrder) {
  // What runs written so far hold: a child's submit, with every digit of its parent's time.
  EXPECT_EQ(to_fields(submit(TaskKind::kChild, "Test GPU")),
            (FieldList{{"type", "submit"},
                       {"seq", "42"},
                       {"target", "reduce"},
                       {"task", "t42-0123456789abcdef"},
                       {"cand", "0123456789abcdef0123"},
                       {"kind", "child"},
                       {"params", R"({"BLOCK":"256","VEC":"4"})"},
                       {"source", "ab12"},
                       {"gpu", "Test GPU"},
                       {"island", "1"},
                       {"parent", "parent-id"},
                       {"op", "mutate guided by memory_far_from_peak"},
                       {"generation", "3"},
                       {"parent_us", "0.10000000000000001"},
                       {"parent_noise", "0.012345678901234568"}}));
  const FieldList seed = to_fields(submit(TaskKind::kSeed));
  EXPECT_EQ(seed.size(), 8u);  // no lineage, no times, no gpu
  const FieldList r = to_fields(result());
  std::vector<std::string> names;
  for (const auto& [k, v] : r) names.push_back(k);
  EXPECT_EQ(names, (std::vector<std::string>{"type", "target", "task", "cand", "kind", "outcome",
                                             "median_us", "noise_rel", "arch", "decision", "reason",
                                             "result"}));
  EXPECT_EQ(r[2].second, "t7-abc");
  EXPECT_EQ(r[5].second, "verified");
  EXPECT_EQ(r[6].second, "0.33333333333333331");
  EXPECT_EQ(r[9].second, "crown rejected");
  EXPECT_EQ(to_fields(DoneEvent{"reduce", "G", Phase::kStopped, "stopped: time budget spent"}),
            (FieldList{{"type", "done"},
                       {"target", "reduce"},
                       {"state", "stopped: time budget spent"},
                       {"gpu", "G"}}));
}

TEST(SearchLog, EachStepWritesTheRecordsItsEntryDecides) {
  redis::SearchStep child = step_of(submit(TaskKind::kChild, "Test GPU"));
  EXPECT_EQ(child.event, to_fields(submit(TaskKind::kChild, "Test GPU")));
  EXPECT_EQ(child.candidate, "0123456789abcdef0123");
  EXPECT_EQ(child.candidate_fields,
            (FieldList{{"target", "reduce@Test_GPU"},
                       {"kind", "child"},
                       {"task", "t42-0123456789abcdef"},
                       {"source_hash", "ab12"},
                       {"params", R"({"BLOCK":"256","VEC":"4"})"},
                       {"parent", "parent-id"},
                       {"operator", "mutate guided by memory_far_from_peak"},
                       {"generation", "3"},
                       {"island", "1"},
                       {"status", "submitted"}}));
  EXPECT_TRUE(child.target.empty());
  redis::SearchStep seed = step_of(submit(TaskKind::kSeed));
  EXPECT_EQ(seed.candidate_fields[6], (std::pair<std::string, std::string>{"operator", "seed"}));
  redis::SearchStep retime = step_of(submit(TaskKind::kRetime));
  EXPECT_EQ(retime.candidate_fields,
            (FieldList{{"status", "re-timing"}, {"retime_task", "t42-0123456789abcdef"}}));

  TargetStanding standing{"spec", "best", 2.5, "", 0};
  redis::SearchStep before_seed = step_of(result(), standing);
  EXPECT_EQ(before_seed.candidate, "abc");
  EXPECT_EQ(before_seed.candidate_fields, (FieldList{{"status", "crown rejected"},
                                                     {"median_us", "0.33333333333333331"},
                                                     {"arch", "cpu/x86_64"},
                                                     {"bottleneck", "memory_far_from_peak"}}));
  EXPECT_EQ(before_seed.target, "reduce");
  EXPECT_EQ(before_seed.target_fields,
            (FieldList{{"spec_hash", "spec"}, {"best_id", "best"}, {"best_us", "2.5"}}));
  standing.baseline_id = "seed";
  standing.baseline_us = 4;
  EXPECT_EQ(step_of(result(), standing).target_fields, (FieldList{{"spec_hash", "spec"},
                                                                  {"best_id", "best"},
                                                                  {"best_us", "2.5"},
                                                                  {"baseline_id", "seed"},
                                                                  {"baseline_us", "4"}}));

  redis::SearchStep done =
      step_of(DoneEvent{"reduce", "Test GPU", Phase::kConverged, "converged: x"});
  EXPECT_EQ(done.target, "reduce@Test_GPU");
  EXPECT_EQ(done.target_fields, (FieldList{{"state", "converged: x"}}));
  EXPECT_TRUE(done.candidate.empty());
}

TEST(SearchLog, AMalformedEntryIsDataLossNamingTheField) {
  const FieldList child = to_fields(submit(TaskKind::kChild));
  expect_data_loss(with(child, "seq", "-1"), "seq", "submit");
  expect_data_loss(with(child, "seq", "", true), "seq", "submit");
  expect_data_loss(with(child, "kind", "grandchild"), "kind", "submit");
  expect_data_loss(with(child, "params", "[1,2]"), "params", "submit");
  expect_data_loss(with(child, "params", R"({"BLOCK":256})"), "params", "submit");
  expect_data_loss(with(child, "island", "one"), "island", "submit");
  expect_data_loss(with(child, "parent_us", "fast"), "parent_us", "submit");
  expect_data_loss(with(child, "parent_noise", "", true), "parent_noise", "submit");
  expect_data_loss(with(child, "task", "", true), "task", "submit");
  expect_data_loss(with(to_fields(submit(TaskKind::kRetime)), "median_us", "1e999"), "median_us",
                   "submit");

  const FieldList r = to_fields(result());
  expect_data_loss(with(r, "result", "not msgpack"), "result", "result");
  expect_data_loss(with(r, "decision", "maybe"), "decision", "result");
  expect_data_loss(with(r, "kind", ""), "kind", "result");
  // A message of another type where the result belongs.
  proto::Heartbeat hb;
  expect_data_loss(with(r, "result", proto::encode({proto::kProtocolVersion, "h1", hb})), "result",
                   "result");

  const FieldList done = to_fields(DoneEvent{"reduce", "", Phase::kStopped, "stopped: budget"});
  expect_data_loss(with(done, "state", "paused: for lunch"), "state", "done");
  expect_data_loss(with(done, "target", "", true), "target", "done");
}

TEST(SearchLog, AnEntryOfATypeThisKilnDoesNotKnowIsSkipped) {
  for (const FieldList& f :
       {FieldList{{"type", "note"}, {"text", "from a newer kiln"}}, FieldList{{"x", "y"}}}) {
    Result<std::optional<SearchEvent>> e = parse_search_event(f);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    EXPECT_FALSE(e->has_value());
  }
  EXPECT_EQ(entry_type({{"seq", "1"}, {"type", "submit"}}), "submit");
  EXPECT_EQ(entry_type({{"seq", "1"}}), "");
}

TEST(SearchLog, AFinalPhaseIsReadFromTheStateShown) {
  EXPECT_EQ(final_phase_of("converged: every configuration near the parents was evaluated"),
            Phase::kConverged);
  EXPECT_EQ(final_phase_of("stopped: time budget spent before the seed was evaluated"),
            Phase::kStopped);
  EXPECT_EQ(final_phase_of("failed: no kernels for the cuda backend"), Phase::kFailed);
  EXPECT_EQ(final_phase_of("searching"), std::nullopt);
  EXPECT_EQ(final_phase_of("evaluating the seed"), std::nullopt);
  EXPECT_EQ(final_phase_of("convergedish: no"), std::nullopt);
  for (Phase p : {Phase::kStarting, Phase::kEvaluatingSeed, Phase::kSearching})
    EXPECT_FALSE(is_final(p));
  EXPECT_EQ(phase_name(Phase::kEvaluatingSeed), "evaluating the seed");
}

}  // namespace
}  // namespace kiln::coordinator
