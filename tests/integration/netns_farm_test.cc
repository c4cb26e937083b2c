// Hosts that talk real TCP: the coordinator and two evaluators in three network namespaces joined
// by veth pairs, CURVE on (tests/integration/netns_farm.sh builds them). One evaluator's link is
// cut for 30 s: the coordinator hands its tasks to the other, the run goes on, and the host joins
// again when its link returns and works for the rest of the run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/support/fault_farm.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Why network namespaces cannot be made here, or "" when they can.
std::string why_no_namespaces() {
  if (geteuid() != 0) return "not root";
  std::string out;
  const std::string probe = "kiln-probe-" + std::to_string(getpid());
  if (testing::run_command("ip netns add " + probe + " 2>&1 && ip netns del " + probe + " 2>&1",
                           &out) != 0)
    return "`ip netns add` fails: " + out;
  return "";
}

TEST(NetnsFarm, AHostCutOffFor30sHasItsTasksRequeuedAndJoinsAgainWhenItsLinkReturns) {
  if (std::string why = why_no_namespaces(); !why.empty())
    GTEST_SKIP() << "needs network namespaces (root and iproute2): " << why;
  testing::TempDir dir;
  // reduce with a small cpu benchmark and a PAD parameter the kernel ignores: evaluations take a
  // moment and the space outlasts the budget, so the run is still going when the link returns.
  const std::string targets = dir.file("targets");
  ASSERT_EQ(testing::copy_padded_target(targets, "reduce", 400), "");

  std::string output;
  testing::run_command("bash " KILN_SOURCE_DIR "/tests/integration/netns_farm.sh " +
                           testing::kiln_binary() + " " + dir.path() + " " + targets +
                           " 30 75 2>&1",
                       &output);
  const std::string coord = testing::read_file(dir.file("coord.log"));
  const std::string eval_a = testing::read_file(dir.file("eval-a.log"));
  const std::string context = output + "\n--- coordinator\n" + coord + "\n--- eval-a\n" + eval_a;
  ASSERT_EQ(testing::read_file(dir.file("rc")), "coordinator=0\n") << context;

  // The coordinator noticed the silence and put A's tasks back; A joined again.
  EXPECT_NE(coord.find("worker eval-a is silent"), std::string::npos) << context;
  EXPECT_NE(coord.find("back in the queue"), std::string::npos) << context;
  EXPECT_GE(count_of(coord, "worker eval-a joined"), 2u) << context;
  EXPECT_NE(coord.find("key 'host-a'"), std::string::npos) << "CURVE names the key\n" << context;
  // A evaluated again after its link returned.
  std::ifstream marks(dir.file("marks"));
  std::string word;
  size_t cut_line = 0, restored_line = 0;
  marks >> word >> cut_line >> word >> restored_line;
  ASSERT_GT(restored_line, 0u) << testing::read_file(dir.file("marks"));
  std::istringstream lines(eval_a);
  std::string line;
  size_t n = 0, after = 0;
  while (std::getline(lines, line)) {
    if (++n > restored_line && line.find("evaluating task") != std::string::npos) ++after;
  }
  EXPECT_GT(after, 0u) << "eval-a did no work after its link returned\n" << context;

  // Every task answered once, by the evaluators the coordinator knew.
  std::map<std::string, int> per_task, per_evaluator;
  std::ifstream results(dir.file("out/results.jsonl"));
  while (std::getline(results, line)) {
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(r.is_discarded()) << line;
    ++per_task[r["task_id"].get<std::string>()];
    ++per_evaluator[r["evaluator"].get<std::string>()];
  }
  std::printf(
      "netns farm: %zu results, %d by eval-a (joined %zu times, %zu tasks begun after its "
      "link returned), %d by eval-b\n",
      per_task.size(), per_evaluator["eval-a"], count_of(coord, "worker eval-a joined"), after,
      per_evaluator["eval-b"]);
  for (const auto& [task, count] : per_task) EXPECT_EQ(count, 1) << task;
  EXPECT_GT(per_evaluator["eval-a"], 0) << context;
  EXPECT_GT(per_evaluator["eval-b"], 0) << context;
}

}  // namespace
}  // namespace kiln
