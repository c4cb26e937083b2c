// How the options that take durations, lists and GPU architectures, and the status fields read
// back from Redis or summary.json, are parsed: each value a hostile or careless user gave once
// turned into something else (a budget of 2^63 s wrapped to a negative one, "," meant every
// target, --arch sm_xx failed every compile, a count of -3 showed as 2^64 - 3).
#include <gtest/gtest.h>

#include <string>

#include "cli/option_checks.h"
#include "cli/run_support.h"
#include "cli/status_table.h"

namespace kiln::cli {
namespace {

TEST(OptionParsing, DurationsAreWholeSecondsUpToAYear) {
  for (const auto& [text, seconds] :
       std::vector<std::pair<std::string, int64_t>>{{"90s", 90},
                                                    {"30m", 1800},
                                                    {"1.5h", 5400},
                                                    {"45", 45},
                                                    {"0s", 0},
                                                    {"8784h", 31622400}}) {
    Result<std::chrono::seconds> d = parse_duration(text);
    ASSERT_TRUE(d.is_ok()) << text << ": " << d.status().to_string();
    EXPECT_EQ(d->count(), seconds) << text;
  }
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"9223372036854775807s", "longer than kiln takes"},
           {"9999999999999999999999h", "longer than kiln takes"},
           {"8785h", "longer than kiln takes"},
           {"5.5s", "not a whole number of seconds"},
           {"0.5s", "not a whole number of seconds"},
           {"1e3s", "not a duration"},
           {"-5s", "not a duration"},
           {"0x10", "not a duration"},
           {".5h", "not a duration"},
           {"5.h", "not a duration"},
           {"1.2.3s", "not a duration"},
           {"5 s", "not a duration"},
           {"inf", "not a duration"},
           {"5d", "not a duration"},
           {"", "empty"}}) {
    Result<std::chrono::seconds> d = parse_duration(text, "--budget");
    ASSERT_FALSE(d.is_ok()) << text << " gave " << d->count() << " s";
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(d.status().message().find("--budget"), std::string::npos) << d.status().message();
    EXPECT_NE(d.status().message().find(says), std::string::npos) << d.status().message();
  }
}

TEST(OptionParsing, AListWithAnEmptyItemIsRefused) {
  for (const char* ok : {"reduce", "reduce,matmul", "reduce,matmul,"})
    EXPECT_TRUE(check_list(ok, "--targets").is_ok()) << ok;
  for (const char* bad : {",", "reduce,,matmul", ",reduce", ",,"}) {
    Status st = check_list(bad, "--targets");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("--targets: '" + std::string(bad) + "' has an empty item"),
              std::string::npos)
        << st.message();
  }
}

TEST(OptionParsing, AnArchIsARealGpuArchitecture) {
  for (const char* ok : {"sm_90a", "sm_90", "sm_80", "sm_100a", "sm_120f"})
    EXPECT_EQ(gpu_arch_problem(ok), "") << ok;
  for (const char* bad : {"sm_xx", "compute_90", "sm_9", "sm_9000", "sm_90ab", "sm_90A",
                          "; rm -rf /", "sm_", "90", "SM_90"}) {
    EXPECT_NE(gpu_arch_problem(bad).find("expected a real GPU architecture such as sm_90a"),
              std::string::npos)
        << bad;
  }
}

TEST(OptionParsing, StatusFieldsThatAreNotWhatKilnWritesShowAsNone) {
  const coordinator::TargetReport r = report_from_fields("reduce", {{"evaluations", "-3"},
                                                                    {"failures", "seven"},
                                                                    {"accepted", "12"},
                                                                    {"seed_us", "fast"},
                                                                    {"best_us", "nan"},
                                                                    {"fraction_of_floor", "0.75"}});
  EXPECT_EQ(r.evaluations, 0u);  // was 18446744073709551613
  EXPECT_EQ(r.failures, 0u);
  EXPECT_EQ(r.accepted, 12u);
  EXPECT_EQ(r.seed_us, 0);
  EXPECT_EQ(r.best_us, 0);
  EXPECT_EQ(r.fraction_of_floor, 0.75);
}

}  // namespace
}  // namespace kiln::cli
