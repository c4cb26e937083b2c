// Reading a `kiln run --out` folder: a folder written from the synthetic run reads back as that
// run; a damaged line is DATA_LOSS naming its line; a folder that is not a run is NOT_FOUND with
// what to pass; an older folder (no target, parent or arrival time per result) still reads.
#include "report/run_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/report/sample_run.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::sample_run;
using testing::TempDir;

TEST(ReportRunFolder, ReadsBackTheRunItWasWrittenFrom) {
  TempDir dir;
  const report::RunData want = sample_run();
  testing::write_run_folder(want, dir.path());
  Result<report::RunData> got = report::load_run_folder(dir.path());
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got->source, dir.path());
  EXPECT_EQ(got->export_args, "--out " + dir.path());
  EXPECT_EQ(got->run_id, want.run_id);
  EXPECT_EQ(got->backend, "cuda");
  EXPECT_EQ(got->state, "finished");
  EXPECT_EQ(got->spent_s, 60);

  ASSERT_EQ(got->units.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& u = got->units[i];
    const auto& w = want.units[i];
    EXPECT_EQ(u.target, w.target);
    EXPECT_EQ(u.gpu_model, w.gpu_model);
    EXPECT_EQ(u.state, w.state);
    EXPECT_EQ(u.evaluations, w.evaluations);
    EXPECT_EQ(u.failures, w.failures);
    EXPECT_EQ(u.accepted, w.accepted);
    EXPECT_EQ(u.seed_us, w.seed_us);
    EXPECT_EQ(u.best_us, w.best_us);
    EXPECT_EQ(u.fraction_of_floor, w.fraction_of_floor);
    EXPECT_EQ(u.best_id, w.best_id);
    EXPECT_EQ(u.best_label, w.best_label);
    EXPECT_EQ(u.best_params, w.best_params) << u.target;
  }

  ASSERT_EQ(got->rows.size(), want.rows.size());
  for (size_t i = 0; i < want.rows.size(); ++i) {
    const auto& r = got->rows[i];
    const auto& w = want.rows[i];
    SCOPED_TRACE("row " + std::to_string(i + 1));
    EXPECT_EQ(r.at_s, w.at_s);
    EXPECT_EQ(r.target, w.target);
    EXPECT_EQ(r.gpu_model, w.gpu_model);
    EXPECT_EQ(r.task_id, w.task_id);
    EXPECT_EQ(r.candidate_id, w.candidate_id);
    EXPECT_EQ(r.kind, w.kind);
    EXPECT_EQ(r.verdict, w.verdict);
    EXPECT_EQ(r.outcome, w.outcome);
    EXPECT_EQ(r.median_us, w.median_us);
    EXPECT_EQ(r.parent_id, w.parent_id);
    EXPECT_EQ(r.op, w.op);
    EXPECT_EQ(r.model, w.model);
    EXPECT_EQ(r.params, w.params);
    EXPECT_EQ(r.evaluator, w.evaluator);
    EXPECT_DOUBLE_EQ(r.wall_s, w.wall_s);
    EXPECT_EQ(r.bytes_per_s, w.bytes_per_s);
    EXPECT_EQ(r.flops_per_s, w.flops_per_s);
    EXPECT_EQ(r.peak_bytes_per_s, w.peak_bytes_per_s);
    EXPECT_EQ(r.peak_flops_per_s, w.peak_flops_per_s);
    EXPECT_EQ(r.failure, w.failure);
  }

  ASSERT_EQ(got->llm.size(), 1u);
  EXPECT_EQ(got->llm[0].model, "claude-test");
  EXPECT_EQ(got->llm[0].calls, 5u);
  EXPECT_EQ(got->llm[0].input_tokens, 12000u);
  EXPECT_EQ(got->llm[0].output_tokens, 3400u);
  EXPECT_DOUBLE_EQ(got->llm[0].cost_usd, 0.42);
  EXPECT_EQ(got->llm[0].accepted, 1u);
}

TEST(ReportRunFolder, AMalformedLineIsDataLossNamingTheFileAndLine) {
  TempDir dir;
  testing::write_run_folder(sample_run(), dir.path());
  const std::string path = dir.path() + "/results.jsonl";
  std::string text = testing::read_file(path);
  size_t second = text.find('\n') + 1;
  size_t third = text.find('\n', second) + 1;
  text.insert(third, "{\"task_id\": \"t9\", \"outcome\": \n");  // cut short: becomes line 3
  std::ofstream(path) << text;
  Result<report::RunData> got = report::load_run_folder(dir.path());
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find(path + " line 3 "), std::string::npos)
      << got.status().message();
}

TEST(ReportRunFolder, AFolderThatIsNotARunIsNotFoundWithWhatToPass) {
  TempDir dir;
  Result<report::RunData> got = report::load_run_folder(dir.path());
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("is not a kiln run folder"), std::string::npos);
  EXPECT_NE(got.status().message().find("summary.json"), std::string::npos);
  EXPECT_NE(got.status().message().find("kiln run --out"), std::string::npos);

  // summary.json alone is not enough either.
  dir.write("summary.json", "[]");
  got = report::load_run_folder(dir.path());
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("results.jsonl"), std::string::npos);

  got = report::load_run_folder(dir.path() + "/nope");
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("is not a folder"), std::string::npos);
}

TEST(ReportRunFolder, ADamagedSummaryIsDataLoss) {
  TempDir dir;
  dir.write("summary.json", "[{\"target\": ");
  dir.write("results.jsonl", "");
  Result<report::RunData> got = report::load_run_folder(dir.path());
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("summary.json"), std::string::npos);
}

TEST(ReportRunFolder, AnOlderFolderStillReads) {
  // What kiln wrote before results named their target, parent and arrival time.
  TempDir dir;
  dir.write("summary.json",
            R"([{"target": "reduce", "gpu_model": "", "backend": "cpu", "best": "seed",
                 "best_id": "c3f9", "best_us": 7762.9, "seed_us": 7762.9, "evaluations": 2,
                 "failures": 1, "accepted": 0, "state": "converged"}])");
  dir.write("results.jsonl",
            "{\"candidate_id\": \"c3f9\", \"outcome\": \"verified\", \"timing\": {\"median_us\": "
            "7762.9}, \"wall_ms\": 2054.0, \"log\": \"\", \"stages\": []}\n"
            "{\"candidate_id\": \"d4e5\", \"outcome\": \"compile_error\", \"timing\": "
            "{\"median_us\": 0}, \"log\": \"first\\nsecond\", \"stages\": [{\"name\": \"scan\", "
            "\"passed\": true, \"detail\": \"\"}]}\n\n");
  Result<report::RunData> got = report::load_run_folder(dir.path());
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got->backend, "cpu");
  EXPECT_EQ(got->state, "");
  ASSERT_EQ(got->rows.size(), 2u);
  EXPECT_EQ(got->rows[0].target, "reduce");  // the one target of the run
  EXPECT_EQ(got->rows[0].at_s, -1);
  EXPECT_DOUBLE_EQ(got->rows[0].wall_s, 2.054);
  EXPECT_EQ(got->rows[1].failure, "first");  // no failed stage: the log's first line
  EXPECT_TRUE(got->units[0].best_params.empty());
}

}  // namespace
}  // namespace kiln
