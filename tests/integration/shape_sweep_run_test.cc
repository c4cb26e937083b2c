// A shape sweep end to end on the cpu backend: `kiln coordinator --shapes FILE` with two
// `kiln evaluator` processes that announce different GPU models; every (shape, model) population
// is searched with real compiles and timings at its shape, transfer children name their
// neighbours, and `kiln export` of the run writes a dispatch table whose launcher, built with the
// system compiler, picks the entry nearest the shape it is called with and computes the right
// answer there, also at shapes the sweep never saw; `kiln verify` of it re-checks every entry at
// its own shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::read_json;

constexpr const char* kDriver = R"(#include "rmsnorm.h"
#include <cmath>
#include <cstdio>
#include <vector>
int main() {
  const long long shapes[][2] = {{32, 512}, {40, 600}, {128, 2048}, {100, 3000}, {1, 1}};
  for (const auto& s : shapes) {
    const long long M = s[0], N = s[1];
    std::vector<float> x(M * N), w(N), y(M * N);
    for (long long i = 0; i < M * N; ++i) x[i] = std::sin(0.1 * i);
    for (long long i = 0; i < N; ++i) w[i] = 1 + 0.001 * i;
    std::string why;
    const int e = kiln_rmsnorm::entry(M, N);
    const bool ok = kiln_rmsnorm::launch(x.data(), w.data(), y.data(), M, N, 1e-6f, &why);
    double err = 0;
    for (long long r = 0; r < M; ++r) {
      double ss = 0;
      for (long long c = 0; c < N; ++c) ss += x[r * N + c] * x[r * N + c];
      const double inv = 1 / std::sqrt(ss / N + 1e-6);
      for (long long c = 0; c < N; ++c) err = std::fmax(err, std::fabs(y[r * N + c] - x[r * N + c] * inv * w[c]));
    }
    std::printf("M=%lld,N=%lld %s %d %g\n", M, N, e >= 0 ? kiln_rmsnorm::kEntries[e].shape : "none", ok, err);
  }
}
)";

TEST(ShapeSweepRun, EveryShapeAndModelIsSearchedAndTheExportDispatchesByShape) {
  testing::TempDir dir;
  const std::string out = dir.path() + "/coord";
  const std::string kiln = testing::kiln_binary();
  const std::string sweep =
      dir.write("sweep.json", R"({"rmsnorm": [{"M": 32, "N": 512}, {"M": 128, "N": 2048}]})");
  const std::string output = testing::run_two_model_farm(
      dir, "--targets rmsnorm --shapes " + sweep + " --budget 240s --patience 4 --in-flight 2");
  ASSERT_NE(output.find("rc=0"), std::string::npos) << output;
  EXPECT_NE(output.find("shape sweep: rmsnorm at 2 shape(s)"), std::string::npos) << output;

  // Four populations: two shapes on two models, each searched at its shape.
  nlohmann::json summary = read_json(out + "/summary.json");
  ASSERT_TRUE(summary.is_array()) << output;
  std::set<std::string> units;
  for (const auto& t : summary) {
    SCOPED_TRACE(t.dump());
    const std::string unit = "rmsnorm-" + t["shape"].get<std::string>() + "@" +
                             (t["gpu_model"] == "beta" ? "beta" : "Model_Alpha");
    units.insert(unit);
    EXPECT_GT(t["evaluations"].get<int>(), 1);
    EXPECT_GT(t["best_us"].get<double>(), 0);
    nlohmann::json best = read_json(out + "/best/" + unit + ".json");
    ASSERT_TRUE(best.is_object()) << unit;
    EXPECT_EQ(best["verification"]["unit"], unit);
    EXPECT_EQ(best["verification"]["evaluator_gpu_model"], t["gpu_model"]);
    // Timed at its shape: the record and the evaluator's echo name it.
    EXPECT_EQ(best["verification"]["shape"], best["benchmark_shape"]);
  }
  EXPECT_EQ(units, (std::set<std::string>{
                       "rmsnorm-M=32,N=512@Model_Alpha", "rmsnorm-M=32,N=512@beta",
                       "rmsnorm-M=128,N=2048@Model_Alpha", "rmsnorm-M=128,N=2048@beta"}));
  // Every result belongs to the population of its row's shape and its evaluator's model; the larger
  // shape takes longer (the times really are at the shapes).
  std::map<std::string, double> fastest;
  std::ifstream lines(out + "/results.jsonl");
  std::string line;
  size_t transfers = 0;
  while (std::getline(lines, line)) {
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(r.is_discarded()) << line;
    if (r["evaluator"] == "" || r["outcome"] != "verified") continue;
    ASSERT_TRUE(r.contains("shape")) << line;
    const std::string model = r["evaluator_gpu_model"] == "beta" ? "beta" : "Model_Alpha";
    EXPECT_EQ(r["unit"], "rmsnorm-" + r["shape"].get<std::string>() + "@" + model) << line;
    const std::string shape = r["shape"].get<std::string>();
    const double t = r["timing"]["median_us"].get<double>();
    if (!fastest.count(shape) || t < fastest[shape]) fastest[shape] = t;
    transfers += r["op"].get<std::string>().rfind("transfer rmsnorm-", 0) == 0;
  }
  ASSERT_EQ(fastest.size(), 2u);
  EXPECT_GT(fastest["M=128,N=2048"], 4 * fastest["M=32,N=512"]);
  (void)transfers;  // the cpu template's four configurations may all be tried before a best exists

  // kiln report keeps the populations apart: a section per (shape, model) with its own count.
  std::string reported;
  ASSERT_EQ(testing::run_command(
                kiln + " report " + out + " --format md --out " + dir.path() + "/report.md 2>&1",
                &reported),
            0)
      << reported;
  const std::string md = testing::read_file(dir.path() + "/report.md");
  for (const auto& t : summary) {
    const std::string heading = "## rmsnorm " + t["shape"].get<std::string>() + " @ " +
                                t["gpu_model"].get<std::string>() + "\n\n";
    const size_t at = md.find(heading);
    ASSERT_NE(at, std::string::npos) << heading << "\n" << md;
    const std::string evals = std::to_string(t["evaluations"].get<int>()) + " evaluations";
    const std::string section =
        md.substr(at + heading.size(), md.find("\n##", at + heading.size()) - at);
    EXPECT_NE(section.find(". " + evals + ","), std::string::npos)
        << heading << " should say " << evals << ":\n"
        << section;
  }

  // The export: a dispatch table of the four bests, verified here, that links into one program.
  const std::string to = dir.path() + "/rx";
  std::string exported;
  ASSERT_EQ(testing::run_command(kiln + " export rmsnorm --out " + out + " --to " + to +
                                     " --targets-dir " KILN_SOURCE_DIR "/targets 2>&1",
                                 &exported),
            0)
      << exported;
  EXPECT_NE(exported.find("dispatch table of 4 configurations"), std::string::npos) << exported;
  nlohmann::json table = read_json(to + "/dispatch.json");
  ASSERT_TRUE(table.is_array());
  EXPECT_EQ(table.size(), 4u);
  dir.write("rx/driver.cc", kDriver);
  std::string built;
  ASSERT_EQ(testing::run_command(
                "cd " + to +
                    " && c++ -std=c++17 -O2 -I. driver.cc rmsnorm*.cc -o driver 2>&1 && ./driver",
                &built),
            0)
      << built;
  // No GPU model on the cpu: entries of any model; the nearest shape wins, a shape never searched
  // takes its nearest neighbour, and every answer is right.
  const std::map<std::string, std::string> want = {{"M=32,N=512", "M=32,N=512"},
                                                   {"M=40,N=600", "M=32,N=512"},
                                                   {"M=128,N=2048", "M=128,N=2048"},
                                                   {"M=100,N=3000", "M=128,N=2048"},
                                                   {"M=1,N=1", "M=32,N=512"}};
  std::istringstream rows(built);
  size_t checked = 0;
  for (std::string row; std::getline(rows, row);) {
    std::istringstream f(row);
    std::string shape, entry;
    int ok = 0;
    double err = 1;
    f >> shape >> entry >> ok >> err;
    ASSERT_TRUE(want.count(shape)) << row;
    EXPECT_EQ(entry, want.at(shape)) << row;
    EXPECT_EQ(ok, 1) << row;
    EXPECT_LT(err, 1e-4) << row;
    ++checked;
  }
  EXPECT_EQ(checked, want.size()) << built;

  // kiln verify re-checks every entry, each timed at the shape it won, against its own record.
  nlohmann::json record = read_json(to + "/kiln-export.json");
  ASSERT_TRUE(record["entries"].is_array()) << record.dump();
  ASSERT_EQ(record["entries"].size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    const nlohmann::json& e = record["entries"][k];
    EXPECT_EQ(e["shape"], table[k]["shape"]) << e.dump();
    EXPECT_EQ(e["candidate_id"], table[k]["candidate_id"]) << e.dump();
    EXPECT_GT(e["verified_here"]["timing"].value("median_us", 0.0), 0) << e.dump();
    EXPECT_TRUE(std::filesystem::exists(to + "/" + e["kernel"]["file"].get<std::string>()));
  }
  std::string verified;
  ASSERT_EQ(testing::run_command("(" + kiln + " verify " + to + " --json 2>/dev/null)", &verified),
            0)
      << verified;
  nlohmann::json v = nlohmann::json::parse(verified, nullptr, false);
  ASSERT_TRUE(v.is_object() && v["entries"].is_array()) << verified;
  ASSERT_EQ(v["entries"].size(), 4u) << verified;
  for (size_t k = 0; k < 4; ++k) {
    const nlohmann::json& e = v["entries"][k];
    EXPECT_EQ(e["shape"], table[k]["shape"]) << e.dump();
    EXPECT_EQ(e["evaluation"]["outcome"], "verified") << e.dump();
    // Compared with the record's timing of that entry at that shape, not the benchmark shape's.
    EXPECT_EQ(e["record_timing"], record["entries"][k]["verified_here"]["timing"]) << e.dump();
  }
  // One entry's record ten times too fast: that entry, and so the table, disagrees.
  record["entries"][1]["verified_here"]["timing"]["median_us"] =
      record["entries"][1]["verified_here"]["timing"]["median_us"].get<double>() / 10;
  record["entries"][1]["verified_here"]["timing"]["noise_rel"] = 0.01;
  std::ofstream(to + "/kiln-export.json") << record.dump(2);
  ASSERT_EQ(testing::run_command(kiln + " verify " + to + " 2>&1", &verified), 1) << verified;
  EXPECT_NE(verified.find("v1: disagrees with the record"), std::string::npos) << verified;
  EXPECT_NE(verified.find("verdict: disagrees with the record (3 of 4 entries agree)"),
            std::string::npos)
      << verified;
  // An entry's kernel text edited: not what the record verified; nothing is evaluated.
  std::ofstream(to + "/" + record["entries"][3]["kernel"]["file"].get<std::string>(), std::ios::app)
      << "// edited\n";
  ASSERT_EQ(testing::run_command(kiln + " verify " + to + " 2>&1", &verified), 2) << verified;
  EXPECT_NE(verified.find("kernel/v3/"), std::string::npos) << verified;
  EXPECT_NE(verified.find("not the kernel text kiln exported"), std::string::npos) << verified;

  // --gpu-model: the table of that model's populations only; an unknown model, or --candidate
  // (one kernel of a sweep), is refused with what to do.
  std::string one_model;
  ASSERT_EQ(testing::run_command(
                kiln + " export rmsnorm --out " + out + " --gpu-model beta --to " + dir.path() +
                    "/rb --no-verify --targets-dir " KILN_SOURCE_DIR "/targets 2>&1",
                &one_model),
            0)
      << one_model;
  nlohmann::json beta = read_json(dir.path() + "/rb/dispatch.json");
  ASSERT_EQ(beta.size(), 2u) << beta.dump();
  for (const auto& e : beta) EXPECT_EQ(e["gpu_model"], "beta") << e.dump();
  std::string refused;
  EXPECT_EQ(
      testing::run_command(
          kiln + " export rmsnorm --out " + out + " --gpu-model gamma --no-verify 2>&1", &refused),
      2);
  EXPECT_NE(refused.find("no population on 'gamma' (it has: Model Alpha, beta)"), std::string::npos)
      << refused;
  EXPECT_EQ(testing::run_command(kiln + " export rmsnorm --out " + out + " --candidate abc 2>&1",
                                 &refused),
            2);
  EXPECT_NE(refused.find("searched over a shape sweep"), std::string::npos) << refused;
}

}  // namespace
}  // namespace kiln
