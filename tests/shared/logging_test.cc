#include "shared/logging.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

TEST(Logging, JsonLinesParseEvenWithQuotesAndNewlinesInTheMessage) {
  testing::TempDir dir;
  LogOptions o;
  o.json = true;
  o.file = dir.file("kiln.log");
  o.component = "evaluator";
  ASSERT_TRUE(configure_logging(o).is_ok());
  spdlog::info("task \"t1\": line one\nline two \\ done");
  spdlog::default_logger()->flush();
  std::ifstream in(o.file);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["msg"], "task \"t1\": line one\nline two \\ done");
  EXPECT_EQ(j["component"], "evaluator");
  EXPECT_EQ(j["level"], "info");
  ASSERT_TRUE(configure_logging(LogOptions{}).is_ok());  // back to stderr for later tests
}

TEST(Logging, UnknownLevelIsRejectedWithTheChoices) {
  LogOptions o;
  o.level = "loud";
  Status s = configure_logging(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("trace, debug, info, warn, error or off"), std::string::npos);
}

}  // namespace
}  // namespace kiln
