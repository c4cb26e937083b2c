// The timing verdict's parts that need no device: the secret launch schedule of the sandbox child
// (site masks that never repeat, launches kept by reservoir sampling), the statistics that keep
// every sample and only flag a low clock, the refusal of noisy or bimodal sample sets, and the
// samples set aside where a machine probe saw other processes load the machine.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "evaluator/evaluation.h"
#include "evaluator/launch_schedule.h"

namespace kiln::eval {
namespace {

TEST(LaunchSchedule, MasksNeverRepeatOnASetAndNeverUseTheClosingMask) {
  LaunchSchedule schedule(2, 16, 2, /*seed=*/12345);
  std::set<uint32_t> seen[2];
  for (int i = 0; i < 65535 - 1; ++i) {
    for (size_t set = 0; set < 2; ++set) {
      const uint32_t mask = schedule.next_mask(set);
      ASSERT_NE(mask, schedule.full_mask());
      ASSERT_LE(mask, 0xFFFFu);
      ASSERT_TRUE(seen[set].insert(mask).second) << "mask " << mask << " repeated at launch " << i;
      // The first 560 launches change three sites each (few writes before each launch).
      if (i < 560) {
        ASSERT_EQ(__builtin_popcount(mask), 3) << "launch " << i;
      }
    }
  }
}

TEST(LaunchSchedule, DifferentSeedsGiveDifferentMasks) {
  LaunchSchedule a(1, 16, 0, 1), b(1, 16, 0, 2);
  int same = 0;
  for (int i = 0; i < 64; ++i) same += a.next_mask(0) == b.next_mask(0);
  EXPECT_LT(same, 8);
}

TEST(LaunchSchedule, WithoutSitesEveryMaskIsEmpty) {
  LaunchSchedule schedule(2, 0, 1, 7);
  EXPECT_EQ(schedule.full_mask(), 0u);
  EXPECT_EQ(schedule.next_mask(1), 0u);
}

// Reservoir sampling: after n timed launches each one is held with probability slots / n, the
// late ones as often as the early ones, so a kernel cannot tell which of its launches are checked.
TEST(LaunchSchedule, KeptLaunchesAreUniformOverTheRun) {
  constexpr int kRuns = 20000, kLaunches = 50, kSlots = 2;
  std::vector<int> kept(kLaunches, 0);
  for (int run = 0; run < kRuns; ++run) {
    LaunchSchedule schedule(1, 4, kSlots, 1000 + run);  // few sites: the masks are not under test
    int holder[kSlots] = {-1, -1};
    for (int i = 0; i < kLaunches; ++i) {
      const int slot = schedule.keep_slot(i);
      ASSERT_LT(slot, kSlots);
      if (slot >= 0) holder[slot] = i;
    }
    for (int h : holder) {
      ASSERT_GE(h, 0);
      ++kept[h];
    }
  }
  const double expected = static_cast<double>(kRuns) * kSlots / kLaunches;  // 800
  for (int i = 0; i < kLaunches; ++i) {
    EXPECT_NEAR(kept[i], expected, 0.2 * expected) << "launch " << i;
  }
}

TEST(TimingStats, KeepsSamplesTakenAtALowClockAndCountsThem) {
  const std::vector<double> samples = {10, 10, 10, 30, 30};
  const std::vector<double> clocks = {1980, 1980, 1980, 1500, 1500};
  TimingStats t = timing_stats(samples, clocks, 0.95);
  EXPECT_EQ(t.samples, 5u);
  EXPECT_EQ(t.throttled, 2u);
  EXPECT_DOUBLE_EQ(t.median_us, 10);
  EXPECT_DOUBLE_EQ(t.min_clock_mhz, 1500);
  EXPECT_DOUBLE_EQ(t.max_clock_mhz, 1980);
  // Most samples throttled: their times count, so the median is the throttled one.
  TimingStats hot = timing_stats({10, 30, 30, 30, 30}, {1980, 1500, 1500, 1500, 1500}, 0.95);
  EXPECT_DOUBLE_EQ(hot.median_us, 30);
  EXPECT_EQ(hot.throttled, 4u);
}

std::vector<double> around(double center, int n, double spread) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(center * (1 + spread * ((i % 7) - 3) / 3.0));
  return out;
}

TEST(TimingProblem, AcceptsOneClusterWithATail) {
  std::vector<double> s = around(100, 90, 0.02);
  for (int i = 0; i < 10; ++i) s.push_back(180 + i);  // 10% slow outliers: no second mode
  EXPECT_EQ(timing_problem(s), "");
}

TEST(TimingProblem, RefusesTwoClustersAndSaysWhy) {
  std::vector<double> s = around(50, 50, 0.01);
  for (double v : around(100, 50, 0.01)) s.push_back(v);
  const std::string why = timing_problem(s);
  EXPECT_NE(why.find("bimodal"), std::string::npos) << why;
  // A cheap minority of 30% is still a mode (it would pull the median down).
  std::vector<double> minority = around(50, 30, 0.01);
  for (double v : around(100, 70, 0.01)) minority.push_back(v);
  EXPECT_NE(timing_problem(minority).find("bimodal"), std::string::npos);
}

// Launches caught by an interrupt land between the modes; a few of them must not hide the gap
// (an alternating cheat on the cpu backend, 10 us and 33 us, once passed this way).
TEST(TimingProblem, SeesTwoClustersThroughAFewStragglersBetweenThem) {
  std::vector<double> s = around(10, 190, 0.03);
  for (double v : around(33, 200, 0.03)) s.push_back(v);
  for (double v : {13.0, 16.0, 19.0, 22.0, 25.0, 28.0}) s.push_back(v);  // 1.5% of the samples
  const std::string why = timing_problem(s);
  EXPECT_NE(why.find("bimodal"), std::string::npos) << why;
  EXPECT_NE(why.find("190 near 10 us"), std::string::npos) << why;
  // A smear, not two modes: a fifth of the samples spread evenly from one time to three times it.
  std::vector<double> smear = around(10, 320, 0.03);
  for (int i = 0; i < 80; ++i) smear.push_back(10.5 + i * 0.25);
  EXPECT_EQ(timing_problem(smear), "");
}

TEST(TimingProblem, RefusesSamplesTooNoisyForAMedian) {
  std::vector<double> s;
  for (int i = 0; i < 100; ++i) s.push_back(1 + i * i);  // spread over two orders of magnitude
  const std::string why = timing_problem(s);
  EXPECT_NE(why.find("too noisy"), std::string::npos) << why;
}

// Samples of a memory-bound kernel while another process streams memory in bursts, as a 2-core
// box showed them: quiet launches near 28 us with probes near 45 us, busy ones near 57 us with
// probes near 85 us, interleaved in runs; `busy[i]` says which launches were busy.
struct LoadedRun {
  std::vector<double> samples, probes;
};
LoadedRun loaded_run(const std::vector<bool>& busy) {
  LoadedRun run;
  for (size_t i = 0; i < busy.size(); ++i) {
    const double wobble = 1 + 0.02 * static_cast<double>(i % 5);
    run.samples.push_back((busy[i] ? 57.0 : 28.0) * wobble);
    run.probes.push_back((busy[i] ? 85.0 : 45.0) * wobble);
  }
  return run;
}
std::vector<bool> bursts(size_t n, size_t quiet, size_t busy) {  // `quiet` then `busy`, repeated
  std::vector<bool> out;
  while (out.size() < n) out.push_back(out.size() % (quiet + busy) >= quiet);
  return out;
}

TEST(JudgeSamples, SetsAsideTheSamplesTakenWhileTheProbeSawTheMachineBusy) {
  LoadedRun run = loaded_run(bursts(120, 5, 2));  // 2 of every 7 launches busy
  ASSERT_NE(timing_problem(run.samples).find("bimodal"), std::string::npos);
  SampleVerdict v = judge_samples(run.samples, run.probes, 10);
  EXPECT_EQ(v.problem, "");
  EXPECT_NE(v.busy.find("bimodal"), std::string::npos) << v.busy;
  ASSERT_FALSE(v.kept.empty());
  for (size_t i : v.kept) EXPECT_LT(run.samples[i], 40) << "sample " << i;
  EXPECT_EQ(v.kept.size(), 120u - 34u);  // 17 bursts of 2
  // A busy sample or two at a quiet probe (an interrupt) stays in and changes nothing.
  run.samples[0] = 60;
  run.samples[7] = 61;
  EXPECT_EQ(judge_samples(run.samples, run.probes, 10).problem, "");
}

// The probe runs before the kernel, so a kernel that does sixteen times the work on every other
// launch is slow at quiet moments too: setting the busy samples aside leaves it bimodal.
TEST(JudgeSamples, AKernelWhoseWorkDiffersIsRefusedWhateverTheProbeSaw) {
  const std::vector<bool> busy = bursts(120, 5, 2);
  LoadedRun run = loaded_run(busy);
  for (size_t i = 1; i < run.samples.size(); i += 2) run.samples[i] *= 16;
  SampleVerdict v = judge_samples(run.samples, run.probes, 10);
  EXPECT_NE(v.problem.find("work differs between launches"), std::string::npos) << v.problem;
  EXPECT_NE(
      v.problem.find("(34 of 120 samples taken while the machine probe saw the machine busy)"),
      std::string::npos)
      << v.problem;
  EXPECT_TRUE(v.kept.empty());
  EXPECT_EQ(v.busy, "");
}

TEST(JudgeSamples, WithoutUsableProbesEverySampleIsJudged) {
  LoadedRun run = loaded_run(bursts(120, 5, 2));
  const std::string whole = timing_problem(run.samples);
  ASSERT_NE(whole, "");
  for (const std::vector<double>& probes :
       {std::vector<double>{}, std::vector<double>(120, 0.0),
        std::vector<double>(run.probes.begin(), run.probes.end() - 1)}) {
    SampleVerdict v = judge_samples(run.samples, probes, 10);
    EXPECT_EQ(v.problem, whole) << probes.size() << " probes";
    EXPECT_TRUE(v.kept.empty());
  }
  // A set with no problem keeps every sample, busy ones included (an empty `kept` says so).
  LoadedRun calm = loaded_run(bursts(120, 40, 1));
  SampleVerdict v = judge_samples(calm.samples, calm.probes, 10);
  EXPECT_EQ(v.problem, "");
  EXPECT_TRUE(v.kept.empty());
}

// A slowdown the probe does not explain stays in the set: a kernel doing sixteen times the work on
// every other launch of the first half of a timing, while the machine was slower (probes 1.5x)
// through that half -- as a cpu VM is at the start of a timing -- is still refused, though every
// one of its expensive launches fell at a busy probe.
TEST(JudgeSamples, ASlowdownTheProbeDoesNotExplainIsNotSetAside) {
  LoadedRun run;
  for (int i = 0; i < 100; ++i) {
    const bool early = i < 50;
    run.samples.push_back(early && i % 2 == 0 ? 16 * 20.0 : 20.0 * (early ? 1.5 : 1.0));
    run.probes.push_back(early ? 60.0 : 40.0);
  }
  SampleVerdict v = judge_samples(run.samples, run.probes, 10);
  EXPECT_NE(v.problem.find("work differs between launches"), std::string::npos) << v.problem;
  EXPECT_NE(
      v.problem.find("(50 of 100 samples taken while the machine probe saw the machine busy)"),
      std::string::npos)
      << v.problem;
  EXPECT_TRUE(v.kept.empty());
  // Every early launch twice as slow, as the machine's 1.5x with the slack explains: cleared.
  for (int i = 0; i < 50; ++i) run.samples[i] = 40;
  v = judge_samples(run.samples, run.probes, 10);
  EXPECT_EQ(v.problem, "");
  EXPECT_NE(v.busy.find("bimodal"), std::string::npos) << v.busy;
  EXPECT_EQ(v.kept.size(), 50u);
}

// Where the machine was quiet for too few samples, the quiet part is no timing: the whole set is
// refused as it is, and the caller times again. Busy for most of the set, the probes' lower
// quartile is a busy one and nothing stands out; fewer quiet samples than min_quiet are too few.
TEST(JudgeSamples, TooFewQuietSamplesAreNoTiming) {
  LoadedRun mostly_busy = loaded_run(bursts(120, 1, 4));  // 24 quiet of 120
  EXPECT_NE(judge_samples(mostly_busy.samples, mostly_busy.probes, 10).problem, "");
  LoadedRun run = loaded_run(bursts(120, 5, 2));  // 86 quiet
  EXPECT_NE(judge_samples(run.samples, run.probes, 100).problem, "");
  EXPECT_EQ(judge_samples(run.samples, run.probes, 86).problem, "");
}

}  // namespace
}  // namespace kiln::eval
