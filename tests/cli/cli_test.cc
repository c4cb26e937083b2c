// Runs the real `kiln` binary as a user would and checks what it prints and returns.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

using kiln::testing::kiln_binary;
using kiln::testing::run_command;

TEST(Cli, HelpListsEverySubcommandAndExitsZero) {
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " --help", &out), 0) << out;
  for (const char* sub : {"run", "coordinator", "evaluator", "agent", "eval", "status", "export",
                          "report", "profile", "version"}) {
    EXPECT_NE(out.find(sub), std::string::npos) << "missing " << sub << " in:\n" << out;
  }
}

TEST(Cli, EverySubcommandHasItsOwnHelp) {
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " version --help", &out), 0) << out;
  EXPECT_NE(out.find("--json"), std::string::npos) << out;
}

TEST(Cli, VersionWorksWithoutAGpuDriver) {
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " version", &out), 0) << out;
  EXPECT_NE(out.find("kiln 0."), std::string::npos) << out;
  EXPECT_NE(out.find("CUDA driver:"), std::string::npos) << out;
  EXPECT_NE(out.find("NVRTC:"), std::string::npos) << out;
}

TEST(Cli, VersionJsonIsOneParsableObject) {
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " version --json 2>/dev/null", &out), 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_TRUE(j.contains("version"));
  EXPECT_TRUE(j.contains("commit"));
  EXPECT_TRUE(j["gpus"].is_array());
}

TEST(Cli, UnknownSubcommandIsAUsageError) {
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " frobnicate", &out), 2) << out;
}

TEST(Cli, BadLogLevelIsRejectedWithTheChoices) {
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " --log-level loud version", &out), 2) << out;
  EXPECT_NE(out.find("unknown log level 'loud'"), std::string::npos) << out;
}

TEST(Cli, RunWithABrokenConfigNamesTheFileAndTheFieldAndStartsNothing) {
  testing::TempDir dir;
  const std::string cfg = dir.write("run.json", R"({"search": {"floor_fraction": 2}})");
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " run --backend cpu --config " + cfg + " --out " + dir.path() + "/run", &out), 2)
      << out;
  EXPECT_NE(out.find("run.json"), std::string::npos) << out;
  EXPECT_NE(out.find("search.floor_fraction"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/run/redis")) << out;
}

// How often `needle` occurs in `text`.
size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Cli, RunWithZeroIslandsIsRefusedBeforeAnythingStarts) {
  testing::TempDir dir;
  const std::string out = dir.path() + "/run";
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " run --backend cpu --islands 0 --out " + out, &text), 2)
      << text;
  EXPECT_NE(text.find("--islands must be at least 1"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(out)) << "no folder, no private redis-server: " << text;
}

TEST(Cli, RunWithZeroEvaluatorsIsRefusedAndPointsAtTheCoordinator) {
  testing::TempDir dir;
  std::string text;
  EXPECT_EQ(
      run_command(kiln_binary() + " run --backend cpu --evaluators 0 --out " + dir.path() + "/run",
                  &text),
      2)
      << text;
  EXPECT_NE(text.find("--evaluators must be at least 1"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln coordinator"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/run")) << text;
}

TEST(Cli, AnUnknownBackendIsNamedWithTheValidOnes) {
  testing::TempDir dir;
  for (const char* command : {" run", " coordinator"}) {
    std::string text;
    EXPECT_EQ(
        run_command(kiln_binary() + command + " --backend gpu --out " + dir.path() + "/x", &text),
        2)
        << command << ": " << text;
    EXPECT_NE(text.find("unknown backend 'gpu'"), std::string::npos) << text;
    EXPECT_NE(text.find("cuda, cpu"), std::string::npos) << text;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/x"));
}

// Triton kernels compile without a GPU (--check); running them needs one, and without it kiln eval
// says so before it starts anything.
TEST(Cli, TritonKernelsAreCheckedWithoutAGpuAndRunOnlyWhereOneIs) {
  testing::TempDir dir;
  std::string text;
  EXPECT_EQ(run_command(
                kiln_binary() + " eval rmsnorm --backend triton --check --cache-dir " + dir.path(),
                &text),
            0)
      << text;
  EXPECT_NE(text.find("compile bf16: ok"), std::string::npos) << text;
  EXPECT_NE(text.find("check: passed"), std::string::npos) << text;
  const int rc = run_command(
      kiln_binary() + " eval rmsnorm --backend triton --cache-dir " + dir.path(), &text);
  if (text.find("the triton backend cannot run here") != std::string::npos) {  // no GPU here
    EXPECT_EQ(rc, 1) << text;
    EXPECT_NE(text.find("kiln eval --check compiles without a GPU"), std::string::npos) << text;
    // A run with local evaluators stops before it starts anything, instead of a run whose
    // evaluators can never start (it ended with nothing evaluated and exit 0 for cuda too).
    for (const char* backend : {"triton", "cuda"}) {
      const std::string out = dir.file(std::string("run-") + backend);
      EXPECT_EQ(run_command(kiln_binary() + " run --targets rmsnorm --budget 5s --backend " +
                                backend + " --out " + out,
                            &text),
                2)
          << text;
      EXPECT_NE(text.find(std::string("--backend ") + backend + " needs a GPU here"),
                std::string::npos)
          << text;
      EXPECT_FALSE(std::filesystem::exists(out)) << text;
    }
  } else {  // a GPU: the seed verifies and is timed
    EXPECT_EQ(rc, 0) << text;
    EXPECT_NE(text.find("verified"), std::string::npos) << text;
  }
}

// A size that is not a whole number in range, or a key given twice, is a usage error that names
// it -- not an exception's name, and not a prefix of the value read as the size ("1e3" as 1).
TEST(Cli, EvalRefusesShapesAndParamsThatDoNotParse) {
  testing::TempDir dir;
  const std::string eval =
      kiln_binary() + " eval reduce --backend cpu --no-time --cache-dir " + dir.path() + " ";
  for (const char* shape : {"M=1e3,N=64", "M=99999999999999999999,N=64", "M=2147483648,N=64",
                            "M=0,N=64", "M=-4,N=64", "M=12abc,N=64", "M= 12,N=64"}) {
    std::string text;
    EXPECT_EQ(run_command(eval + "--shape '" + std::string(shape) + "'", &text), 2) << text;
    EXPECT_NE(text.find("a size is a whole number from 1 to 2147483647"), std::string::npos)
        << shape << ": " << text;
  }
  std::string text;
  EXPECT_EQ(run_command(eval + "--shape M=4,M=8,N=64", &text), 2) << text;
  EXPECT_NE(text.find("--shape: 'M' is given twice"), std::string::npos) << text;
  EXPECT_EQ(run_command(eval + "--params UNROLL=2,UNROLL=4", &text), 2) << text;
  EXPECT_NE(text.find("--params: 'UNROLL' is given twice"), std::string::npos) << text;
  // A template parameter is a whole number: anything else became a -D macro that failed to
  // compile, or reached the source scan.
  for (const char* value : {"abc", "4;system", "4 -DX", "+4", "0x4"}) {
    EXPECT_EQ(run_command(eval + "--params 'UNROLL=" + std::string(value) + "'", &text), 2) << text;
    EXPECT_NE(text.find("a template parameter is a whole number (UNROLL takes 1, 4, 8"),
              std::string::npos)
        << value << ": " << text;
  }
  EXPECT_EQ(run_command(eval + "--params UNROLL=04", &text), 0) << text;
}

// --gpus names GPU indices; a word, a negative or a repeated index is refused before anything
// starts (a word was read as GPU 0).
TEST(Cli, RunRefusesGpuListsThatAreNotIndices) {
  testing::TempDir dir;
  for (const auto& [gpus, says] :
       {std::pair<std::string, std::string>{"x", "'x' is not a GPU index"},
        {"0,-1", "'-1' is not a GPU index"},
        {"1e3", "'1e3' is not a GPU index"},
        {"0,1,0", "GPU 0 is named twice"}}) {
    std::string text;
    EXPECT_EQ(run_command(kiln_binary() + " run --backend cpu --gpus " + gpus + " --out " +
                              dir.path() + "/run",
                          &text),
              2)
        << text;
    EXPECT_NE(text.find("--gpus: " + says), std::string::npos) << gpus << ": " << text;
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/run/redis")) << gpus;
  }
}

TEST(Cli, ABindPortOutOfRangeIsRefusedInsteadOfListeningElsewhere) {
  testing::TempDir dir;
  for (const char* bind : {"tcp://0.0.0.0:99999", "tcp://0.0.0.0", "udp://0.0.0.0:5555"}) {
    std::string text;
    EXPECT_EQ(run_command(kiln_binary() + " coordinator --backend cpu --bind " + bind + " --out " +
                              dir.path() + "/c",
                          &text),
              2)
        << bind << ": " << text;
    EXPECT_NE(text.find("--bind '" + std::string(bind) + "'"), std::string::npos) << text;
  }
  std::string text;
  run_command(kiln_binary() + " coordinator --backend cpu --bind tcp://0.0.0.0:99999 --out " +
                  dir.path() + "/c",
              &text);
  EXPECT_NE(text.find("port '99999' is not in 1-65535"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/c")) << text;
}

TEST(Cli, WorkersRefuseAnEndpointTheyCannotConnectTo) {
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " evaluator --backend cpu --connect tcp://127.0.0.1:70000",
                        &text),
            2)
      << text;
  EXPECT_NE(text.find("kiln evaluator: --connect 'tcp://127.0.0.1:70000'"), std::string::npos)
      << text;
  EXPECT_EQ(run_command(kiln_binary() + " agent --connect 'tcp://*:5555'", &text), 2) << text;
  EXPECT_NE(text.find("can be bound, not connected to"), std::string::npos) << text;
}

// A --shapes file is parsed once the private Redis runs (it needs the targets); the folder exists
// before, so the run leaves it (and the pid file) where it was.
TEST(Cli, AnErrorAfterThePrivateRedisStartedStopsIt) {
  testing::TempDir dir;
  const std::string out = dir.path() + "/run";
  // redis/ is there before the run (a folder that was there keeps its entries), so that its
  // redis.pid outlives the refused run and says which server to look for.
  std::filesystem::create_directories(out + "/redis");
  std::ofstream(dir.path() + "/bad_shapes.json") << "{not json";
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " run --backend cpu --targets reduce --shapes " +
                            dir.path() + "/bad_shapes.json --out " + out,
                        &text),
            2)
      << text;
  EXPECT_NE(text.find("--shapes: "), std::string::npos) << text;
  EXPECT_NE(text.find("bad_shapes.json"), std::string::npos) << text;
  pid_t pid = -1;
  std::ifstream(out + "/redis/redis.pid") >> pid;
  ASSERT_GT(pid, 0) << "the private redis-server was started first: " << text;
  EXPECT_NE(kill(pid, 0), 0) << "redis-server " << pid << " is still running";
}

TEST(Cli, AFatalErrorIsInTheLogFileWithTheRoleAndPid) {
  testing::TempDir dir;
  const std::string log = dir.file("kiln.log");
  std::string text;
  EXPECT_EQ(
      run_command(kiln_binary() + " --log-file " + log + " run --backend cpu --islands 0", &text),
      2)
      << text;
  std::ifstream in(log);
  std::string line;
  ASSERT_TRUE(std::getline(in, line)) << "empty log; stderr was: " << text;
  EXPECT_NE(line.find("critical [run:"), std::string::npos) << line;
  EXPECT_NE(line.find("kiln run: --islands must be at least 1"), std::string::npos) << line;
}

// A real (short) run on its own Redis: its progress without a terminal, then the command it
// prints to continue it, pasted as printed.
TEST(Cli, ARunPrintsNoTableEverySecondAndAResumeCommandThatWorksWhenPasted) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.started()) << redis.error();
  testing::TempDir dir;
  const std::string out = dir.path() + "/run dir";  // a space: the printed command must quote it
  const std::string targets = testing::builtin_targets_dir();
  const std::string common =
      " --backend cpu --targets reduce --patience 2 --evaluators 1"
      " --redis unix://" +
      redis.socket_path() + " --out '" + out + "' --targets-dir " + targets + " --cache-dir " +
      dir.path() + "/cache";
  std::string text;
  ASSERT_EQ(run_command(kiln_binary() + " run --budget 4s" + common, &text), 0) << text;
  // The table (its header names "evals") is printed once, at the end, on stdout; while it ran,
  // stderr (not a terminal here) got lines per target.
  EXPECT_EQ(count(text, " evals  fails"), 1u) << text;
  EXPECT_GE(count(text, "reduce: "), 1u) << text;

  ASSERT_EQ(run_command(kiln_binary() + " run --budget 4s" + common, &text), 2) << text;
  const size_t start = text.find("`kiln run --resume");
  ASSERT_NE(start, std::string::npos) << text;
  const std::string resume = text.substr(start + 1, text.find('`', start + 1) - start - 1);
  for (const std::string& part : {"--out '" + out + "'", "--redis unix://" + redis.socket_path(),
                                  "--targets-dir " + targets}) {
    EXPECT_NE(resume.find(part), std::string::npos) << part << " missing in: " << resume;
  }
  const std::string pasted = kiln_binary() + resume.substr(std::string("kiln").size());
  EXPECT_EQ(run_command(pasted, &text), 0) << pasted << "\n" << text;
}

}  // namespace
}  // namespace kiln
