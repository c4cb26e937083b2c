#include "shared/config.h"

#include <gtest/gtest.h>

#include <set>

#include "shared/json_fields.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

TEST(Config, EmptyObjectGivesDefaults) {
  Result<KilnConfig> c = parse_config("{}", "run.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->coordinator.bind, "tcp://127.0.0.1:5555");
  EXPECT_EQ(c->search.islands, 2u);
  EXPECT_EQ(c->log.level, "info");
}

TEST(Config, ReadsNestedSectionsOverDefaults) {
  Result<KilnConfig> c = parse_config(R"({"work_dir": "/scratch/k", "targets": ["rmsnorm"],
      "redis": {"url": "unix:///tmp/r.sock", "command_timeout_ms": 250},
      "evaluator": {"backends": ["cpu"], "compile_threads": 2},
      "search": {"islands": 4, "min_gain_rel": 0.02}, "log": {"level": "debug", "json": true}})",
                                      "run.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->work_dir, "/scratch/k");
  EXPECT_EQ(c->targets, std::vector<std::string>{"rmsnorm"});
  EXPECT_EQ(c->redis.url, "unix:///tmp/r.sock");
  EXPECT_EQ(c->redis.command_timeout_ms, 250u);
  EXPECT_EQ(c->evaluator.backends, std::vector<std::string>{"cpu"});
  EXPECT_EQ(c->search.islands, 4u);
  EXPECT_DOUBLE_EQ(c->search.min_gain_rel, 0.02);
  EXPECT_TRUE(c->log.json);
}

struct BadConfigCase {
  const char* json;
  const char* expected;  // substring of the error message
};

void PrintTo(const BadConfigCase& c, std::ostream* os) { *os << c.json; }

class ConfigRejects : public ::testing::TestWithParam<BadConfigCase> {};

TEST_P(ConfigRejects, WithAnErrorNamingFileAndField) {
  Result<KilnConfig> c = parse_config(GetParam().json, "sweep.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("sweep.json"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(GetParam().expected), std::string::npos)
      << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, ConfigRejects,
    ::testing::Values(
        BadConfigCase{R"({"redis": {"port": 6379}})", "field 'redis.port': unknown key"},
        BadConfigCase{R"({"wrk_dir": "x"})", "field 'wrk_dir': unknown key"},
        BadConfigCase{R"({"search": {"islands": "four"}})",
                      "field 'search.islands': expected an integer, got string"},
        BadConfigCase{R"({"search": {"islands": -1}})", "field 'search.islands'"},
        BadConfigCase{R"({"search": {"islands": 0}})", "must be at least 1"},
        BadConfigCase{R"({"search": {"floor_fraction": 1.5}})", "field 'search.floor_fraction'"},
        BadConfigCase{R"({"search": {"speedup_target": 0.5}})", "at least 1"},
        BadConfigCase{R"({"search": {"rank_alpha": -1}})", "field 'search.rank_alpha'"},
        BadConfigCase{R"({"search": {"min_gain_rel": 2}})", "between 0 and 1"},
        BadConfigCase{R"({"evaluator": {"backends": ["rocm"]}})", "unknown backend 'rocm'"},
        BadConfigCase{R"({"evaluator": {"backends": "cpu"}})", "expected an array of strings"},
        BadConfigCase{R"({"targets": [1, 2]})", "field 'targets[0]': expected a string"},
        BadConfigCase{R"({"log": []})", "field 'log': expected an object, got array"},
        BadConfigCase{R"([1, 2])", "top level: expected an object"},
        BadConfigCase{R"({"coordinator": {"http_port": 70000}})", "below 65536"},
        BadConfigCase{R"({"redis": {"url": )", "not valid JSON"}));

TEST(Config, SearchRemembersWhichKeysTheFileNamed) {
  // A resume with a config keeps the run's own islands and patience unless the file names them.
  Result<KilnConfig> c = parse_config(R"({"search": {"islands": 4, "floor_fraction": 0.9}})", "run.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->search.named, (std::set<std::string>{"islands", "floor_fraction"}));
  EXPECT_EQ(c->search.max_proposals_without_gain, 64u);  // the default, not named
  Result<KilnConfig> none = parse_config("{}", "run.json");
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->search.named.empty());
}

TEST(Config, UnknownKeyErrorListsTheKnownKeys) {
  Result<KilnConfig> c = parse_config(R"({"log": {"levle": "debug"}})", "a.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("expected one of: file, json, level"), std::string::npos)
      << c.status().message();
}

TEST(Config, LoadsFromFileAndReportsMissingFile) {
  kiln::testing::TempDir dir;
  std::string path = dir.write("run.json", R"({"search": {"population": 3}})");
  Result<KilnConfig> c = load_config(path);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->search.population, 3u);
  Result<KilnConfig> missing = load_config(dir.file("nope.json"));
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.json"), std::string::npos);
}

TEST(JsonFields, RequiredFieldMissingIsNamed) {
  nlohmann::json j = {{"a", 1}};
  JsonFields f(j, "spec.json", "args");
  std::string name;
  Status s = f.get("name", &name, /*required=*/true);
  EXPECT_EQ(s.message(), "spec.json: field 'args.name': missing (required)");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(Config, ShippedExampleConfigLoads) {
  Result<KilnConfig> c = load_config(std::string(KILN_SOURCE_DIR) + "/configs/run.example.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->search.time_budget_s, 28800u);
  EXPECT_EQ(c->coordinator.bind, "tcp://0.0.0.0:5555");
}

}  // namespace
}  // namespace kiln
