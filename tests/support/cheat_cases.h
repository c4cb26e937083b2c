// The cheating-kernel regression suite's shared parts (docs/threats.md, "Rules the harness keeps"):
// one case per cheat kernel under tests/cheats/<backend>/, with the outcome and the failing stage
// the evaluator must report, and the check of an EvaluationResult against it. Used by
// tests/evaluator/cheats_test.cc (cpu, CI) and, through tests/support/gpu_cheat_suite.h, by
// tests/gpu/cuda_cheats_test.cc and triton_cheats_test.cc (GPU machines).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>

#include "shared/dtype.h"
#include "shared/protocol.h"
#include "tests/support/test_env.h"

namespace kiln::testing {

struct CheatCase {
  const char* name;           // test name suffix: letters, digits and '_'
  const char* file;           // under tests/cheats/<backend>/
  DType dtype;                // the timing dtype the evaluation runs with
  proto::Outcome outcome;     // what the evaluator must conclude
  const char* failing_stage;  // the stage that must fail (all before it pass); "" for kVerified
  const char* detail = "";    // a substring of that stage's detail; "" for any
  double bandwidth_bytes_per_s = 0;  // EvaluatorOptions' floor ceiling (0: no floor check)
  const char* target = "rmsnorm";    // the built-in target the kernel is a seed of
};

inline void PrintTo(const CheatCase& c, std::ostream* os) {
  *os << c.name << " (" << c.file << ", " << dtype_name(c.dtype) << ", expect "
      << proto::outcome_name(c.outcome)
      << (*c.failing_stage ? std::string(" at ") + c.failing_stage : std::string()) << ")";
}

inline std::string cheat_case_name(const ::testing::TestParamInfo<CheatCase>& info) {
  return info.param.name;
}

// The text of a file, or "" when it cannot be read (the caller asserts on that).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string describe(const proto::EvaluationResult& r) {
  std::string s = "outcome " + proto::outcome_name(r.outcome) + "\n";
  for (const auto& st : r.stages) {
    s += "  " + st.name + ": " + (st.passed ? "passed" : "FAILED") +
         (st.detail.empty() ? "" : " -- " + st.detail) + "\n";
  }
  if (r.timing.samples > 0) {
    s += "  time: median " + std::to_string(r.timing.median_us) + " us over " +
         std::to_string(r.timing.samples) + " samples\n";
  }
  if (!r.log.empty()) s += "log: " + r.log.substr(0, 2000) + "\n";
  return s;
}

// Checks `r` against the case: the outcome, and that the expected stage is the one that failed
// (the last stage reported) with every earlier stage passed; for kVerified, that every stage
// passed, and that the floor was checked when a ceiling was given. One failure message listing
// every mismatch, then every stage.
inline void expect_caught_as_described(const CheatCase& c, const proto::EvaluationResult& r) {
  std::string problems;
  auto problem = [&](const std::string& p) { problems += "  - " + p + "\n"; };
  if (r.outcome != c.outcome) {
    problem("outcome " + proto::outcome_name(r.outcome) + ", expected " +
            proto::outcome_name(c.outcome));
  }
  const std::string expected_stage = c.failing_stage;
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const proto::StageReport& st = r.stages[i];
    const bool last = i + 1 == r.stages.size();
    if (!st.passed && (expected_stage.empty() || !last)) problem("stage " + st.name + " failed");
  }
  if (r.stages.empty()) {
    problem("no stages reported");
  } else if (!expected_stage.empty()) {
    const proto::StageReport& failed = r.stages.back();
    if (failed.name != expected_stage || failed.passed) {
      problem("expected stage " + expected_stage + " to fail, last stage is " + failed.name +
              (failed.passed ? " (passed)" : " (failed)"));
    } else if (*c.detail != '\0' && failed.detail.find(c.detail) == std::string::npos) {
      problem("detail of " + expected_stage + " lacks '" + c.detail + "'");
    }
  } else if (c.bandwidth_bytes_per_s > 0 && r.stages.back().name != "floor") {
    problem("no floor check was made");
  }
  EXPECT_TRUE(problems.empty()) << c.name << ":\n" << problems << describe(r);
}

}  // namespace kiln::testing
