// Tests of the bottleneck classification and its hints on recorded metric files
// (tests/data/profile/), of the profile reply the sandbox child sends, and of the CUPTI loader's
// failure paths (no GPU here: CUPTI missing or counters not permitted give one clear notice).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "evaluator/profile/bottleneck.h"
#include "evaluator/profile/cupti_metrics.h"
#include "evaluator/profile/metric_names.h"
#include "evaluator/profile/profile_reply.h"

namespace kiln::profile {
namespace {

namespace fs = std::filesystem;

const fs::path kDataDir = fs::path(KILN_SOURCE_DIR) / "tests/data/profile";

struct Recorded {
  std::string name;
  std::map<std::string, double> metrics;  // as EvaluationResult::metrics holds them ("prof.")
  Roofline roofline;
  std::string expect_class;
  int expect_first_tier = -1;
};

// Reads one recorded file; CUPTI names must be ones kiln asks for (the file and
// metric_names.h agree).
Recorded load(const fs::path& path) {
  Recorded r;
  r.name = path.filename().string();
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& [name, value] : j.at("metrics").items()) {
    const char* key = key_of_cupti_metric(name);
    EXPECT_NE(key, nullptr) << r.name << ": kiln does not record " << name;
    if (key != nullptr) r.metrics[metric_key(key)] = value.get<double>();
  }
  for (const auto& [key, value] : j.at("attributes").items()) {
    r.metrics[metric_key(key)] = value.get<double>();
  }
  r.roofline.memory_fraction = j.at("roofline").at("memory_fraction").get<double>();
  r.roofline.compute_fraction = j.at("roofline").at("compute_fraction").get<double>();
  r.expect_class = j.at("expect").at("class").get<std::string>();
  r.expect_first_tier = j.at("expect").at("first_tier").get<int>();
  return r;
}

std::vector<Recorded> load_all() {
  std::vector<Recorded> all;
  for (const auto& entry : fs::directory_iterator(kDataDir)) {
    if (entry.path().extension() == ".json") all.push_back(load(entry.path()));
  }
  std::sort(all.begin(), all.end(),
            [](const Recorded& a, const Recorded& b) { return a.name < b.name; });
  return all;
}

TEST(ProfileBottleneck, RecordedProfilesGetTheirClassAndFirstMove) {
  std::vector<Recorded> all = load_all();
  ASSERT_GE(all.size(), 6u) << "recorded files missing under " << kDataDir;
  std::set<std::string> classes;
  for (const Recorded& r : all) {
    SCOPED_TRACE(r.name);
    Bottleneck b = classify(metrics_from_map(r.metrics), r.roofline);
    EXPECT_EQ(class_name(b.cls), r.expect_class) << b.reason;
    EXPECT_FALSE(b.reason.empty());
    std::vector<Move> moves = hints(b.cls);
    ASSERT_FALSE(moves.empty());
    EXPECT_EQ(static_cast<int>(moves.front().tier), r.expect_first_tier);
    classes.insert(std::string(class_name(b.cls)));
  }
  // The files cover every class but "unknown".
  EXPECT_EQ(classes.size(), 6u);
}

TEST(ProfileBottleneck, ReasonsCarryTheDecidingNumbers) {
  Recorded near = load(kDataDir / "rmsnorm_best_dram_near_peak.json");
  Bottleneck b = classify(metrics_from_map(near.metrics), near.roofline);
  EXPECT_NE(b.reason.find("DRAM 91%"), std::string::npos) << b.reason;
  Recorded spill = load(kDataDir / "matmul_spilling.json");
  b = classify(metrics_from_map(spill.metrics), spill.roofline);
  EXPECT_NE(b.reason.find("184 bytes of local memory"), std::string::npos) << b.reason;
  EXPECT_NE(b.reason.find("255 registers"), std::string::npos) << b.reason;
}

TEST(ProfileBottleneck, TheClassMovesWithTheDecidingCounter) {
  Recorded far = load(kDataDir / "rmsnorm_seed_dram_far_from_peak.json");
  ProfileMetrics m = metrics_from_map(far.metrics);
  EXPECT_EQ(classify(m, far.roofline).cls, BottleneckClass::kMemoryFarFromPeak);
  m.dram_throughput_pct = 85;  // the same kernel at the DRAM roof
  EXPECT_EQ(classify(m, far.roofline).cls, BottleneckClass::kMemoryNearPeak);
  m.dram_throughput_pct = 47.6;
  m.local_bytes = 16;  // spills decide before distance from the roof
  EXPECT_EQ(classify(m, far.roofline).cls, BottleneckClass::kSpilling);

  Recorded compute = load(kDataDir / "matmul_wgmma_compute_bound.json");
  m = metrics_from_map(compute.metrics);
  m.sm_throughput_pct = 35;  // tensor cores idle with one block per SM: their pipes wait on loads
  EXPECT_EQ(classify(m, compute.roofline).cls, BottleneckClass::kLatency);
  // The same counters on the memory side of the roofline: too few warps to cover DRAM latency.
  EXPECT_EQ(classify(m, {0.3, 0.05}).cls, BottleneckClass::kOccupancy);
}

// Local memory limits a kernel only when it is touched often: with the instruction counters, a
// compute-bound kernel that parks a few values per tile keeps its class, and the note still names
// the local memory; the same bytes touched in the hot loop are spilling. Without the counters,
// any local memory counts (the recorded matmul above).
TEST(ProfileBottleneck, LocalMemoryIsSpillingOnlyWhereItsLoadsAndStoresAreFrequent) {
  Recorded compute = load(kDataDir / "matmul_wgmma_compute_bound.json");
  std::map<std::string, double> values = compute.metrics;
  values["prof.local_bytes"] = 52;
  values["prof.inst_executed"] = 4.0e8;
  values["prof.local_load_inst"] = 3.0e5;
  values["prof.local_store_inst"] = 3.0e5;
  ProfileMetrics m = metrics_from_map(values);
  ASSERT_TRUE(m.local_inst_pct.has_value());
  EXPECT_NEAR(*m.local_inst_pct, 0.15, 1e-9);
  Bottleneck b = classify(m, compute.roofline);
  EXPECT_EQ(b.cls, BottleneckClass::kCompute) << b.reason;
  EXPECT_NE(b.reason.find("52 bytes of local memory per thread, its loads and stores 0.15% of "
                          "instructions"),
            std::string::npos)
      << b.reason;

  values["prof.local_load_inst"] = 2.4e7;  // 12%: a spill in the MMA loop
  values["prof.local_store_inst"] = 2.4e7;
  b = classify(metrics_from_map(values), compute.roofline);
  EXPECT_EQ(b.cls, BottleneckClass::kSpilling) << b.reason;
  EXPECT_NE(b.reason.find("12% of instructions"), std::string::npos) << b.reason;

  // A counter missing (or nothing executed): no fraction, and any local memory counts.
  values.erase("prof.local_store_inst");
  m = metrics_from_map(values);
  EXPECT_FALSE(m.local_inst_pct.has_value());
  EXPECT_EQ(classify(m, compute.roofline).cls, BottleneckClass::kSpilling);
  values["prof.local_store_inst"] = 0;
  values["prof.inst_executed"] = 0;
  EXPECT_FALSE(metrics_from_map(values).local_inst_pct.has_value());
}

TEST(ProfileBottleneck, LowOccupancyOnTheComputeSideNeverAsksForSmallerTiles) {
  // A tensor-core kernel runs one large tile per SM by design: whatever its counters say below
  // the bounds, its first move is never to shrink blocks or tiles.
  Recorded low = load(kDataDir / "matmul_low_occupancy.json");
  ProfileMetrics m = metrics_from_map(low.metrics);
  for (double occupancy : {6.0, 12.5, 20.0}) {
    m.achieved_occupancy_pct = occupancy;
    m.theoretical_occupancy_pct = occupancy;
    for (double sm : {10.0, 35.0, 55.0}) {
      m.sm_throughput_pct = sm;
      const BottleneckClass cls = classify(m, low.roofline).cls;
      EXPECT_NE(cls, BottleneckClass::kOccupancy) << "occupancy " << occupancy << "%, SM " << sm << "%";
      EXPECT_GE(hints(cls).front().direction, 0) << class_name(cls);
    }
  }
}

TEST(ProfileBottleneck, WithoutCountersTheRooflineDecides) {
  ProfileMetrics attributes_only;
  attributes_only.registers = 32;
  attributes_only.local_bytes = 0;
  EXPECT_EQ(classify(attributes_only, {0.9, 0.01}).cls, BottleneckClass::kMemoryNearPeak);
  EXPECT_EQ(classify(attributes_only, {0.4, 0.01}).cls, BottleneckClass::kMemoryFarFromPeak);
  EXPECT_EQ(classify(attributes_only, {0.1, 0.7}).cls, BottleneckClass::kCompute);
  EXPECT_EQ(classify(attributes_only, {}).cls, BottleneckClass::kUnknown);
  EXPECT_TRUE(hints(BottleneckClass::kUnknown).empty());
}

TEST(ProfileBottleneck, ClassNamesRoundTripAndUnknownNamesAreUnknown) {
  for (BottleneckClass c : {BottleneckClass::kMemoryNearPeak, BottleneckClass::kMemoryFarFromPeak,
                            BottleneckClass::kCompute, BottleneckClass::kLatency,
                            BottleneckClass::kOccupancy, BottleneckClass::kSpilling}) {
    EXPECT_EQ(parse_class(class_name(c)), c);
  }
  EXPECT_EQ(parse_class(""), BottleneckClass::kUnknown);
  EXPECT_EQ(parse_class("memory-bound"), BottleneckClass::kUnknown);
}

TEST(ProfileBottleneck, HintsPointTheWayTheIssueAsks) {
  // Memory far from peak: wider loads first, larger values.
  std::vector<Move> far = hints(BottleneckClass::kMemoryFarFromPeak);
  EXPECT_EQ(far[0].tier, PlaybookTier::kMemoryAccess);
  EXPECT_EQ(far[0].direction, 1);
  EXPECT_NE(far[0].text.find("wider loads"), std::string::npos);
  // Low occupancy: smaller blocks. Spills: hold less per thread, smaller tiles.
  EXPECT_EQ(hints(BottleneckClass::kOccupancy)[0].direction, -1);
  for (const Move& m : hints(BottleneckClass::kSpilling)) EXPECT_EQ(m.direction, -1) << m.text;
  // describe(): class, reason, every move.
  std::string line = describe({BottleneckClass::kSpilling, "184 bytes"});
  EXPECT_EQ(line.rfind("spilling (184 bytes); next: ", 0), 0u) << line;
  EXPECT_NE(line.find("smaller tiles"), std::string::npos);
}

TEST(ProfileBottleneck, RooflineComesFromTheResultAndTheCeilings) {
  std::map<std::string, double> m = {{"bytes_per_s", 3.0e12}, {"flops_per_s", 1.0e12}};
  Roofline r = roofline_from(m, 3.2e12, 800e12);
  ASSERT_TRUE(r.memory_fraction && r.compute_fraction);
  EXPECT_NEAR(*r.memory_fraction, 0.9375, 1e-9);
  EXPECT_NEAR(*r.compute_fraction, 0.00125, 1e-9);
  r = roofline_from(m, 0, 0);  // ceilings unknown
  EXPECT_FALSE(r.memory_fraction || r.compute_fraction);
}

// ---- The sandbox child's profile reply. ----

nlohmann::json reply_from(const Recorded& r, const std::string& notice = "") {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [key, value] : r.metrics) values[key.substr(kMetricPrefix.size())] = value;
  return {{"ok", true}, {"values", values}, {"notice", notice}};
}

TEST(ProfileReply, FoldsValuesClassAndReasonIntoTheResult) {
  Recorded far = load(kDataDir / "rmsnorm_seed_dram_far_from_peak.json");
  proto::EvaluationResult r;
  r.metrics["bytes_per_s"] = 1.6e12;
  Result<std::string> notice = apply_profile_reply(reply_from(far), far.roofline, &r);
  ASSERT_TRUE(notice.is_ok()) << notice.status().to_string();
  EXPECT_EQ(*notice, "");
  EXPECT_EQ(r.metrics.at("bytes_per_s"), 1.6e12);  // what was there stays
  EXPECT_DOUBLE_EQ(r.metrics.at("prof.dram_throughput_pct"), 47.6);
  EXPECT_DOUBLE_EQ(r.metrics.at("prof.registers"), 18);
  EXPECT_EQ(r.bottleneck, "memory_far_from_peak");
  EXPECT_NE(r.profile_note.find("DRAM 48%"), std::string::npos) << r.profile_note;

  std::vector<std::string> lines = profile_lines(r);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("profile: ", 0), 0u);
  EXPECT_NE(lines[0].find("dram_throughput_pct 47.6"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1].rfind("bottleneck: memory_far_from_peak -- DRAM", 0), 0u) << lines[1];
  EXPECT_NE(lines[2].find("(memory access tier): wider loads"), std::string::npos) << lines[2];
}

TEST(ProfileReply, AttributesOnlyWithANoticeStillClassifyFromTheRoofline) {
  proto::EvaluationResult r;
  nlohmann::json reply = {{"ok", true},
                          {"values", {{"registers", 30}, {"local_bytes", 0}}},
                          {"notice", permission_notice("cuptiProfilerGetCounterAvailability")}};
  Result<std::string> notice = apply_profile_reply(reply, {0.91, 0.001}, &r);
  ASSERT_TRUE(notice.is_ok()) << notice.status().to_string();
  EXPECT_NE(notice->find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos);
  EXPECT_EQ(r.bottleneck, "memory_near_peak");
  EXPECT_NE(r.profile_note.find(std::string(kNoticeSeparator) + "CUPTI hardware counters"),
            std::string::npos)
      << r.profile_note;
  std::vector<std::string> lines = profile_lines(r);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("notice: CUPTI hardware counters are restricted", 0), 0u);
}

TEST(ProfileReply, MalformedRepliesAreRejectedAndChangeNothing) {
  const std::vector<nlohmann::json> bad = {
      nlohmann::json::array(),
      {{"ok", false}, {"values", nlohmann::json::object()}},
      {{"ok", true}},
      {{"ok", true}, {"values", {{"registers", "many"}}}},
      {{"ok", true}, {"values", {{"not_a_metric", 1}}}},
      {{"ok", true}, {"values", {{"registers", 1}}}, {"notice", 5}},
  };
  for (const nlohmann::json& reply : bad) {
    SCOPED_TRACE(reply.dump());
    proto::EvaluationResult r;
    r.metrics["bytes"] = 1;
    Result<std::string> notice = apply_profile_reply(reply, {}, &r);
    EXPECT_EQ(notice.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.metrics.size(), 1u);
    EXPECT_TRUE(r.bottleneck.empty());
  }
}

// ---- The CUPTI loader's failure paths. ----

TEST(CuptiLoader, PrivilegeErrorsGiveTheOneNoticeWithTheFix) {
  for (int code : {kCuptiInsufficientPrivileges, kCuptiVirtualizedInsufficientPrivileges}) {
    Status s = cupti_status(code, "cuptiProfilerGetCounterAvailability",
                            "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
    EXPECT_TRUE(is_permission_denied(s)) << s.to_string();
    EXPECT_NE(s.message().find("ERR_NVGPUCTRPERM"), std::string::npos);
    EXPECT_NE(s.message().find("run kiln as root"), std::string::npos);
    EXPECT_NE(s.message().find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos);
    EXPECT_NE(s.message().find("cuptiProfilerGetCounterAvailability"), std::string::npos);
  }
  // An unknown code whose text speaks of privileges is the same failure.
  EXPECT_TRUE(is_permission_denied(
      cupti_status(999, "cuptiRangeProfilerStart", "user doesn't have sufficient privileges")));
  Status unsupported =
      cupti_status(kCuptiNotSupported, "cuptiRangeProfilerEnable", "NOT_SUPPORTED");
  EXPECT_EQ(unsupported.code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(is_permission_denied(unsupported));
  Status other = cupti_status(1, "cuptiRangeProfilerSetConfig", "CUPTI_ERROR_INVALID_PARAMETER");
  EXPECT_EQ(other.code(), StatusCode::kInternal);
  EXPECT_FALSE(is_permission_denied(other));
}

TEST(CuptiLoader, LooksInTheToolkitToo) {
  std::vector<std::string> paths = default_cupti_paths();
  EXPECT_NE(std::find(paths.begin(), paths.end(), "/usr/local/cuda/lib64/libcupti.so.13"),
            paths.end());
}

#ifdef KILN_HAVE_CUDA
TEST(CuptiLoader, MissingLibraryIsAClearUnavailableNotACrash) {
  auto loaded = CuptiProfiler::load({"/nonexistent/kiln-test/libcupti.so.13"});
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(loaded.status().message().find("CUPTI not found"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("/nonexistent/kiln-test/libcupti.so.13"),
            std::string::npos);
  EXPECT_NE(loaded.status().message().find("without counter metrics"), std::string::npos);
}

TEST(CuptiLoader, TheToolkitsCuptiHasEveryEntryPoint) {
  // Loading needs no GPU; it checks kiln's function table against the installed library.
  auto loaded = CuptiProfiler::load();
  if (!loaded.is_ok()) GTEST_SKIP() << "no CUPTI on this machine: " << loaded.status().message();
  EXPECT_FALSE((*loaded)->path().empty());
}
#endif

}  // namespace
}  // namespace kiln::profile
