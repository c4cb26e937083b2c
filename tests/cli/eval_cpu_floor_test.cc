// The physical floor on the cpu backend, through the real `kiln` binary: `kiln eval` measures the
// host's ceiling once, says so, caches it, reports floor_us and fraction_of_floor in --json, and
// rejects a time that is impossible against the ceiling at the floor stage; `kiln run`'s cpu
// evaluators give every verified result its floor. No timing is asserted (the box is shared).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::read_file;

namespace fs = std::filesystem;
using testing::kiln_binary;
using testing::TempDir;

// Runs `command` with stdout and stderr kept apart (stdout carries the JSON).
int run_split(const std::string& command, const TempDir& dir, std::string* out, std::string* err) {
  std::string ignored;
  const int rc = testing::run_command(
      "{ " + command + " > " + dir.file("stdout") + " 2> " + dir.file("stderr") + "; }", &ignored);
  *out = read_file(dir.file("stdout"));
  *err = read_file(dir.file("stderr"));
  return rc;
}

// The one ceilings file under `cache`, or "".
std::string ceilings_file(const std::string& cache) {
  const fs::path d = fs::path(cache) / "ceilings";
  if (!fs::exists(d)) return "";
  for (const auto& e : fs::directory_iterator(d)) {
    if (e.path().extension() == ".json") return e.path().string();
  }
  return "";
}

std::string eval_reduce(const TempDir& dir) {
  return kiln_binary() + " eval reduce --backend cpu --shape M=64,N=512 --json --cache-dir " +
         dir.file("cache");
}

TEST(EvalCpuFloor, TheJsonCarriesTheFloorAndASecondRunReadsTheCachedCeiling) {
  TempDir dir;
  std::string out, err;
  ASSERT_EQ(run_split(eval_reduce(dir), dir, &out, &err), 0) << out << err;
  EXPECT_NE(err.find("host ceilings: copy "), std::string::npos) << err;
  EXPECT_NE(err.find("measured now"), std::string::npos) << err;
  const std::string file = ceilings_file(dir.file("cache"));
  ASSERT_NE(file, "") << err;
  EXPECT_NE(err.find("cached in " + file), std::string::npos) << err;

  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["outcome"], "verified") << out;
  const nlohmann::json& m = j["metrics"];
  EXPECT_GT(m.value("floor_us", 0.0), 0.0) << m.dump();
  EXPECT_GT(m.value("fraction_of_floor", 0.0), 0.0) << m.dump();
  EXPECT_LE(m.value("fraction_of_floor", 2.0), 1.03) << m.dump();
  ASSERT_FALSE(j["stages"].empty());
  EXPECT_EQ(j["stages"].back()["name"], "floor") << j["stages"].dump();
  EXPECT_TRUE(j["stages"].back()["passed"].get<bool>()) << j["stages"].dump();

  // The second run reads the cache and says where from.
  ASSERT_EQ(run_split(eval_reduce(dir), dir, &out, &err), 0) << out << err;
  EXPECT_EQ(err.find("measured now"), std::string::npos) << err;
  EXPECT_NE(err.find("cached in " + file), std::string::npos) << err;
}

TEST(EvalCpuFloor, ATimeImpossibleAgainstTheCeilingIsRejectedAtTheFloorStage) {
  TempDir dir;
  std::string out, err;
  ASSERT_EQ(run_split(eval_reduce(dir), dir, &out, &err), 0) << out << err;
  // A fake ceiling of 1 kB/s: the honest seed's 131 kB "take" a minute at it, so its real time
  // is impossible against it.
  const std::string file = ceilings_file(dir.file("cache"));
  ASSERT_NE(file, "");
  nlohmann::json c = nlohmann::json::parse(read_file(file));
  c["bandwidth_bytes_per_s"] = 1000.0;
  std::ofstream(file) << c.dump();

  EXPECT_EQ(run_split(eval_reduce(dir), dir, &out, &err), 1) << out << err;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["outcome"], "rejected") << out;
  ASSERT_FALSE(j["stages"].empty());
  const nlohmann::json& last = j["stages"].back();
  EXPECT_EQ(last["name"], "floor") << j["stages"].dump();
  EXPECT_FALSE(last["passed"].get<bool>());
  EXPECT_NE(last["detail"].get<std::string>().find("below the physical floor"), std::string::npos)
      << last.dump();
  for (size_t i = 0; i + 1 < j["stages"].size(); ++i)
    EXPECT_TRUE(j["stages"][i]["passed"].get<bool>()) << i;
}

TEST(EvalCpuFloor, KilnRunsCpuEvaluatorsGiveEveryVerifiedResultItsFloor) {
  TempDir dir;
  const std::string out = dir.file("run");
  std::string output;
  const std::string cmd =
      kiln_binary() + " run --targets reduce --backend cpu --budget 60s --patience 2" + " --out " +
      out + " --cache-dir " + dir.file("cache") + " --targets-dir " + KILN_SOURCE_DIR "/targets";
  ASSERT_EQ(testing::run_command(cmd, &output), 0) << output;
  EXPECT_NE(read_file(out + "/evaluator-0.log").find("host ceilings: copy "), std::string::npos)
      << read_file(out + "/evaluator-0.log");
  std::ifstream lines(out + "/results.jsonl");
  int verified = 0;
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (!r.is_object() || r.value("outcome", "") != "verified") continue;
    ++verified;
    EXPECT_GT(r["metrics"].value("floor_us", 0.0), 0.0) << line.substr(0, 400);
    EXPECT_LE(r["metrics"].value("fraction_of_floor", 2.0), 1.03) << line.substr(0, 400);
  }
  EXPECT_GE(verified, 1) << output;
}

}  // namespace
}  // namespace kiln
