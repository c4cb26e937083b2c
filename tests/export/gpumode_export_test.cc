// The GPU MODE submission of a leaderboard target: the #!POPCORN lines first, the CUDA source
// inline, custom_kernel(data) mapping the task's data onto the kernel; written only after the
// kernel verified here (or with --no-verify), and never for a task that needs bit-exact agreement.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::kiln_binary;
using testing::read_file;
using testing::run_command;
using testing::TempDir;

bool have_gpu() {
  std::string out;
  return run_command("nvidia-smi -L", &out) == 0;
}

TEST(GpumodeExport, WritesASubmissionForEachLeaderboardTarget) {
  TempDir d;
  for (const char* t : {"vectorsum_v2", "prefixsum_v2"}) {
    SCOPED_TRACE(t);
    std::string out;
    const std::string to = d.file(t);
    ASSERT_EQ(run_command(kiln_binary() + " export " + t +
                              " --template --format gpumode --no-verify --to " + to,
                          &out),
              0)
        << out;
    const std::string py = read_file(to + "/submission.py");
    // The leaderboard reads its directives until the first line that is not a comment.
    EXPECT_EQ(py.rfind("#!POPCORN leaderboard " + std::string(t) + "\n#!POPCORN gpu H100\n", 0), 0u)
        << py.substr(0, 200);
    EXPECT_NE(py.find("from task import input_t, output_t"), std::string::npos);
    EXPECT_NE(py.find("load_inline("), std::string::npos);
    EXPECT_NE(py.find("__global__"), std::string::npos);
    std::ofstream(d.file("probe.py"))
        << "import ast, sys\nm = ast.parse(open(sys.argv[1]).read())\n"
           "f = [n for n in m.body if isinstance(n, ast.FunctionDef) and n.name == "
           "'custom_kernel'][0]\n"
           "print([a.arg for a in f.args.args], ast.unparse(f.body[-1]))\n";
    ASSERT_EQ(run_command("python3 " + d.file("probe.py") + " " + to + "/submission.py", &out), 0)
        << out;
    const std::string ret = std::string(t) == "vectorsum_v2" ? "return y[0]" : "return y";
    EXPECT_EQ(out, "['data'] " + ret + "\n");
    const nlohmann::json rec = nlohmann::json::parse(read_file(to + "/kiln-export.json"));
    EXPECT_EQ(rec["format"], "gpumode");
    EXPECT_EQ(rec["verified_here"]["skipped"], "--no-verify");
  }
}

TEST(GpumodeExport, IsVerifiedHereFirstOrRefused) {
  if (have_gpu()) GTEST_SKIP() << "this machine has a GPU: the export verifies instead of refusing";
  TempDir d;
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " export vectorsum_v2 --template --format gpumode --to " +
                            d.file("s"),
                        &out),
            1);
  EXPECT_NE(out.find("verified on every shape of the task before it is written"), std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(d.file("s/submission.py")));
}

TEST(GpumodeExport, RefusesATaskThatNeedsBitExactAgreement) {
  TempDir d;
  std::filesystem::create_directories(d.file("mine"));
  std::filesystem::copy(default_targets_dir() + "/vectorsum_v2", d.file("mine/vectorsum_v2"),
                        std::filesystem::copy_options::recursive);
  nlohmann::json j = nlohmann::json::parse(read_file(d.file("mine/vectorsum_v2/target.json")));
  j["leaderboard"]["bit_exact"] = "the checker compares with torch.sum bit for bit";
  std::ofstream(d.file("mine/vectorsum_v2/target.json")) << j.dump(2);
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " export vectorsum_v2 --targets-dir " + d.file("mine") +
                            " --template --format gpumode --no-verify --to " + d.file("s"),
                        &out),
            2);
  EXPECT_NE(
      out.find(
          "needs bit-exact agreement with a vendor library (the checker compares with torch.sum"),
      std::string::npos)
      << out;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Export folders: kiln writes only into a new or empty folder or over its own export (whose files
// it removes first), and names that are keywords in C++ or Python still give code that builds.
TEST(ExportFolder, NeverWritesOverOtherFilesAndReplacesItsOwnExport) {
  TempDir d;
  std::filesystem::create_directories(d.file("project/target"));
  std::ofstream(d.file("project/Cargo.toml")) << "[package]\n";
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " export reduce --seed --backend cpu --no-verify --to " +
                            d.file("project"),
                        &out),
            2);
  EXPECT_NE(out.find("holds other files and no kiln export"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(d.file("project/target")));

  ASSERT_EQ(run_command(kiln_binary() +
                            " export reduce --seed --backend cpu --format torch --no-verify --to " +
                            d.file("e"),
                        &out),
            0)
      << out;
  EXPECT_TRUE(std::filesystem::exists(d.file("e/reduce.py")));
  ASSERT_EQ(run_command(kiln_binary() +
                            " export reduce --seed --backend cpu --format cpp --no-verify --to " +
                            d.file("e"),
                        &out),
            0)
      << out;
  EXPECT_FALSE(
      std::filesystem::exists(d.file("e/reduce.py")));  // the torch export's own file is gone
  EXPECT_TRUE(std::filesystem::exists(d.file("e/reduce.h")));
  EXPECT_EQ(nlohmann::json::parse(read_file(d.file("e/kiln-export.json")))["format"], "cpp");
}

TEST(ExportFolder, KeywordNamesGiveCodeThatBuilds) {
  TempDir d;
  std::filesystem::create_directories(d.file("mine"));
  std::filesystem::copy(default_targets_dir() + "/reduce", d.file("mine/reduce"),
                        std::filesystem::copy_options::recursive);
  std::string spec = read_file(d.file("mine/reduce/target.json"));
  for (auto [from, to] :
       {std::pair<std::string, std::string>{"\"x\"", "\"lambda\""}, {"\"y\"", "\"class\""}}) {
    for (size_t at = spec.find(from); at != std::string::npos;
         at = spec.find(from, at + to.size())) {
      spec.replace(at, from.size(), to);
    }
  }
  std::ofstream(d.file("mine/reduce/target.json")) << spec;
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " export reduce --targets-dir " + d.file("mine") +
                            " --seed --backend cpu --format torch --no-verify --to " + d.file("e"),
                        &out),
            0)
      << out;
  EXPECT_EQ(
      run_command("cd " + d.file("e") + " && c++ -std=c++17 -c reduce.cc -o reduce.o 2>&1", &out),
      0)
      << out;
  EXPECT_EQ(run_command("python3 -c \"import ast; ast.parse(open('" + d.file("e/reduce.py") +
                            "').read())\" 2>&1",
                        &out),
            0)
      << out;
  EXPECT_NE(read_file(d.file("e/reduce.py")).find("def reduce(lambda_, *, class_=None)"),
            std::string::npos)
      << read_file(d.file("e/reduce.py"));
}

}  // namespace
}  // namespace kiln
