// The timing verdict's parts that need no device: the secret launch schedule of the sandbox child
// (site masks that never repeat, launches kept by reservoir sampling), the statistics that keep
// every sample and only flag a low clock, and the refusal of noisy or bimodal sample sets.
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

}  // namespace
}  // namespace kiln::eval
