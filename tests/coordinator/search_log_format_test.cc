// The format a search writes to Redis, pinned: runs written by one kiln are resumed by another,
// and `kiln status`, the integration tests and operators read the log and the records directly.
// A search runs to the end against a real redis-server with a synthetic worker (real sockets),
// then the log's entries are read back raw: each type and kind must carry exactly these field
// names, in this order, and the run, candidate and target records exactly these fields. A change
// here is a change of the stored format (a newer kiln must still read what an older one wrote).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinator/engine.h"
#include "shared/redis_client.h"
#include "shared/redis_keys.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

using Names = std::vector<std::string>;

Names names_of(const std::vector<std::pair<std::string, std::string>>& fields) {
  Names out;
  for (const auto& [k, v] : fields) out.push_back(k);
  return out;
}

std::string value_of(const std::vector<std::pair<std::string, std::string>>& fields,
                     const std::string& name) {
  for (const auto& [k, v] : fields) {
    if (k == name) return v;
  }
  return "";
}

// The expected names of one entry; `gpu`: the population belongs to a GPU model.
Names expected(const std::string& type, const std::string& kind, bool gpu) {
  Names n;
  if (type == "submit") {
    n = {"type", "seq", "target", "task", "cand", "kind", "params", "source"};
    if (gpu) n.push_back("gpu");
    if (kind != "seed") n.insert(n.end(), {"island", "parent", "op", "generation"});
    if (kind == "child") n.insert(n.end(), {"parent_us", "parent_noise"});
    if (kind == "retime") n.insert(n.end(), {"median_us", "noise_rel"});
  } else if (type == "result") {
    n = {"type",      "target",    "task", "cand",     "kind",   "outcome",
         "median_us", "noise_rel", "arch", "decision", "reason", "result"};
    if (gpu) n.push_back("gpu");
    n.push_back("at");  // the search time it arrived (since step 11; older logs have none)
  } else if (type == "done") {
    n = {"type", "target", "state"};
    if (gpu) n.push_back("gpu");
  }
  return n;
}

class SearchLogFormatTest : public EngineFixtureT<::testing::TestWithParam<std::string>> {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start_store());
    ASSERT_NE(add_target("reduce"), nullptr);
  }
  std::map<std::string, std::string> hash(const std::string& key) {
    auto reply = client_->command({"HGETALL", key});
    EXPECT_TRUE(reply.is_ok()) << reply.status().to_string();
    std::map<std::string, std::string> out;
    if (!reply.is_ok()) return out;
    for (size_t i = 0; i + 1 < reply->elements.size(); i += 2)
      out[reply->elements[i].str] = reply->elements[i + 1].str;
    return out;
  }
  static std::set<std::string> keys(const std::map<std::string, std::string>& m) {
    std::set<std::string> out;
    for (const auto& [k, v] : m) out.insert(k);
    return out;
  }
};

TEST_P(SearchLogFormatTest, EveryEntryAndRecordHasTheStoredFieldsInOrder) {
  const std::string model = GetParam();
  auto d = test_dispatcher(ctx_, *store_);
  ASSERT_NE(d, nullptr);
  EngineOptions eo;
  eo.backend = "cpu";
  eo.seed = 5;
  eo.gpu_models = {model};
  eo.limits.max_proposals_without_gain = 8;
  eo.toolchain = "kiln-test";
  Engine engine(targets_, *d, eo, &*store_);
  ASSERT_TRUE(engine.begin().is_ok());
  std::atomic<bool> stop{false};
  {
    testing::SyntheticWorkerOptions w;
    w.gpu_model = model;
    testing::SyntheticWorker worker(ctx_, d->endpoint(), w);
    Status ran = run_engine(engine, stop, 40);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  }
  ASSERT_TRUE(engine.finished());
  const bool gpu = !model.empty();
  const std::string key = unit_key("reduce", model);

  auto events = store_->read_events(engine.record().id, "", 100000);
  ASSERT_TRUE(events.is_ok()) << events.status().to_string();
  std::map<std::string, int> seen;  // "type kind" -> entries
  std::string child_candidate;
  for (const redis::StreamEvent& ev : *events) {
    const std::string type = value_of(ev.fields, "type");
    const std::string kind = type == "done" ? "" : value_of(ev.fields, "kind");
    ++seen[type + " " + kind];
    EXPECT_EQ(names_of(ev.fields), expected(type, kind, gpu))
        << type << " " << kind << " " << ev.id;
    EXPECT_EQ(value_of(ev.fields, "target"), "reduce");
    EXPECT_EQ(value_of(ev.fields, "gpu"), model);  // "" (absent) without a model
    if (type == "submit" && kind == "child" && child_candidate.empty())
      child_candidate = value_of(ev.fields, "cand");
  }
  // The search went through every kind of step. With the synthetic worker's times, only the
  // search on the model has a child that beats the seed (so a best that is re-timed).
  for (const char* step : {"submit seed", "submit child", "result seed", "result child", "done "}) {
    EXPECT_GT(seen[step], 0) << step;
  }
  if (gpu) {
    EXPECT_GT(seen["submit retime"], 0);
    EXPECT_GT(seen["result retime"], 0);
  }
  EXPECT_EQ(seen["done "], 1);

  std::set<std::string> run_fields = {"id",      "targets", "backend",  "gpu_models", "toolchain",
                                      "seed",    "islands", "capacity", "patience",   "budget_s",
                                      "spent_s", "state",   "starts",   "spec.reduce"};
  EXPECT_EQ(keys(hash(redis::keys::run())), run_fields);
  const auto cand = hash(redis::keys::candidate(child_candidate));
  std::set<std::string> cand_fields = keys(cand);
  cand_fields.erase("retime_task");  // a kept child that was re-timed
  cand_fields.erase("bottleneck");   // a profiled one
  EXPECT_EQ(cand_fields, (std::set<std::string>{"target", "kind", "task", "source_hash", "params",
                                                "parent", "operator", "generation", "island",
                                                "status", "median_us", "arch"}))
      << child_candidate;
  EXPECT_EQ(cand.at("target"), key);
  const auto target = hash(redis::keys::target(key));
  for (const char* f : {"spec_hash", "best_id", "best_us", "baseline_id", "baseline_us", "state"}) {
    EXPECT_TRUE(target.count(f)) << f;
  }
  EXPECT_EQ(target.at("state"), engine.reports().at(0).state);
  EXPECT_NE(target.at("state").find("converged"), std::string::npos) << target.at("state");
}

INSTANTIATE_TEST_SUITE_P(AnyAndOneGpuModel, SearchLogFormatTest, ::testing::Values("", "Test GPU"),
                         [](const auto& info) {
                           return info.param.empty() ? "AnyEvaluator" : "OneGpuModel";
                         });

}  // namespace
}  // namespace kiln::coordinator
