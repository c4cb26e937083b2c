// From `kiln run` to a kernel in the user's hands on the cpu backend, through the real binary: the
// export of the run's best (from its folder and from its Redis) is the candidate the run crowned,
// builds with the host compiler, and computes bit for bit what the same kernel computes when kiln
// compiles it for evaluation; `kiln verify` agrees with the record, and says so when it does not.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::kiln_binary;
using testing::read_file;
using testing::run_command;
using testing::TempDir;

// One run for every test of the file (a search is the slow part).
class CpuExport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    redis_ = new testing::RedisServer();
    ASSERT_TRUE(redis_->started()) << redis_->error();
    std::string out;
    const int rc = run_command(kiln_binary() +
                                   " run --targets reduce,rmsnorm --backend cpu --budget 20s "
                                   "--evaluators 1 --redis unix://" +
                                   redis_->socket_path() + " --out " + run_dir(),
                               &out);
    ASSERT_EQ(rc, 0) << out;
    run_output_ = new std::string(out);
  }
  static void TearDownTestSuite() {
    delete redis_;
    delete dir_;
    delete run_output_;
  }
  static std::string run_dir() { return dir_->file("run"); }

  static TempDir* dir_;
  static testing::RedisServer* redis_;
  static std::string* run_output_;
};
TempDir* CpuExport::dir_ = nullptr;
testing::RedisServer* CpuExport::redis_ = nullptr;
std::string* CpuExport::run_output_ = nullptr;

// A program that fills the inputs of `t` at each shape from a fixed LCG, runs `call` and prints
// every output element as a hex float. `prelude` declares what `call` needs.
std::string output_printer(const TargetSpec& t, const std::vector<Shape>& shapes,
                           const std::string& prelude, const std::string& call) {
  std::string p = prelude +
                  "\n#include <cstdio>\n#include <cstdint>\n#include <vector>\nint main() {\n  "
                  "uint64_t s = 42;\n";
  p += "  auto next = [&] { s = s * 6364136223846793005ULL + 1442695040888963407ULL; return "
       "float((s >> 40) % 2001) / 1000.0f - 1.0f; };\n";
  for (const Shape& sh : shapes) {
    p += "  {\n";
    for (const auto& d : t.dims)
      p += "    const int64_t " + d + " = " + std::to_string(sh.at(d)) + ";\n";
    std::string args;
    for (const auto& a : t.args) {
      if (a.role == TargetArg::Role::kScalar) continue;
      std::string n = "1";
      for (const auto& d : a.shape) n += " * " + d;
      p += "    std::vector<float> " + a.name + "(" + n + ");\n";
      if (a.role == TargetArg::Role::kInput)
        p += "    for (auto& v : " + a.name + ") v = next();\n";
      args += (args.empty() ? "" : ", ") + a.name + ".data()";
    }
    for (const auto& d : t.dims) args += ", " + d;
    for (const auto* sc : t.scalars()) args += ", " + std::to_string(sc->value) + "f";
    p += "    " + call + "(" + args + ");\n";
    for (const auto* o : t.outputs()) {
      p += "    for (float v : " + o->name + ") std::printf(\"%a\\n\", v);\n";
    }
    p += "  }\n";
  }
  return p + "  return 0;\n}\n";
}

TEST_F(CpuExport, TheRunNamesEachWinnerAndHowToExportIt) {
  EXPECT_NE(run_output_->find("winning configurations"), std::string::npos) << *run_output_;
  EXPECT_NE(run_output_->find("kiln export reduce --out " + run_dir() + " --format cpp"),
            std::string::npos)
      << *run_output_;
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " status --out " + run_dir(), &out), 0) << out;
  EXPECT_NE(out.find("kiln export rmsnorm --out " + run_dir()), std::string::npos) << out;
}

TEST_F(CpuExport, ExportIsTheCrownedCandidateAndComputesWhatKilnsBuildComputes) {
  const nlohmann::json best = nlohmann::json::parse(read_file(run_dir() + "/best/reduce.json"));
  const std::string to = dir_->file("reduce-cpp");
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " export reduce --out " + run_dir() + " --to " + to, &out),
            0)
      << out;
  EXPECT_NE(out.find("verifying here"), std::string::npos) << out;
  const nlohmann::json rec = nlohmann::json::parse(read_file(to + "/kiln-export.json"));
  EXPECT_EQ(rec["candidate_id"], best["best_id"]);
  EXPECT_EQ(rec["params"], best["params"]);
  EXPECT_EQ(rec["dtype"], "f32");
  EXPECT_EQ(rec["verified_here"]["outcome"], "verified");
  EXPECT_GE(rec["verified_here"]["stages"].size(), 7u);
  for (const auto& s : rec["verified_here"]["stages"])
    EXPECT_TRUE(s["passed"].get<bool>()) << s.dump();
  EXPECT_GT(rec["verified_here"]["timing"]["median_us"].get<double>(), 0);
  EXPECT_EQ(rec["search"]["outcome"], "verified");
  EXPECT_TRUE(rec["verified_here"]["tools"].contains("version"));

  Result<TargetSpec> t = load_target(to + "/target");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  std::vector<Shape> shapes = t->sweep;
  shapes.insert(shapes.end(), t->edge.begin(), t->edge.end());
  // The export, built as its CMake snippet says.
  std::ofstream(to + "/use.cc") << output_printer(*t, shapes, "#include \"reduce.h\"",
                                                  "kiln_reduce::launch");
  ASSERT_EQ(
      run_command("cd " + to + " && c++ -std=c++17 -O3 -march=native -o use use.cc reduce.cc 2>&1",
                  &out),
      0)
      << out;
  std::string exported;
  ASSERT_EQ(run_command(to + "/use", &exported), 0) << exported;
  // The kernel as kiln's cpu backend compiles it: its prelude, -D parameters, the same flags.
  std::string defines = " -DKILN_DTYPE=float";
  for (const auto& [k, v] : best["params"].items())
    defines += " -D" + k + "=" + v.get<std::string>();
  // The kernel the search crowned (the template's, or the seed's where no child beat it on a
  // loaded machine), by the name and file the record gives.
  const std::string entry = rec["kernel"]["name"].get<std::string>();
  std::ofstream(to + "/kiln_way.cc")
      << "#include <cstdint>\ntypedef KILN_DTYPE T;\n"
      << read_file(to + "/" + rec["kernel"]["file"].get<std::string>());
  std::ofstream(to + "/raw.cc") << output_printer(*t, shapes,
                                                  "#include <cstdint>\nextern \"C\" void " + entry +
                                                      "(const float*, float*, int64_t, int64_t);",
                                                  entry);
  ASSERT_EQ(run_command("cd " + to + " && c++ -std=c++17 -O3 -march=native -fno-exceptions" +
                            defines + " -o raw raw.cc kiln_way.cc 2>&1",
                        &out),
            0)
      << out;
  std::string raw;
  ASSERT_EQ(run_command(to + "/raw", &raw), 0) << raw;
  EXPECT_GT(exported.size(), 1000u);
  EXPECT_EQ(exported, raw);
}

TEST_F(CpuExport, ExportFromTheRunsRedisIsTheSameCandidate) {
  const nlohmann::json best = nlohmann::json::parse(read_file(run_dir() + "/best/rmsnorm.json"));
  const std::string to = dir_->file("rmsnorm-redis");
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " export rmsnorm --redis unix://" + redis_->socket_path() +
                            " --no-verify --to " + to,
                        &out),
            0)
      << out;
  const nlohmann::json rec = nlohmann::json::parse(read_file(to + "/kiln-export.json"));
  EXPECT_EQ(rec["candidate_id"], best["best_id"]);
  EXPECT_EQ(rec["params"], best["params"]);
  EXPECT_EQ(rec["verified_here"]["skipped"], "--no-verify");
  EXPECT_EQ(rec["search"]["outcome"], "verified");
  // The launcher checks the rows it is given.
  std::ofstream(to + "/bad.cc")
      << "#include \"rmsnorm.h\"\n#include <cstdio>\nint main() { std::string why; float x = 0, w "
         "= 0, y = 0;\n"
         "  bool ok = kiln_rmsnorm::launch(&x, &w, &y, 0, 4, 1e-6f, &why);\n"
         "  std::printf(\"%d %s\\n\", ok, why.c_str()); }\n";
  ASSERT_EQ(run_command(
                "cd " + to + " && c++ -std=c++17 -O2 -o bad bad.cc rmsnorm.cc 2>&1 && ./bad", &out),
            0)
      << out;
  EXPECT_EQ(out, "0 M is 0: every dim must be at least 1\n");
}

TEST_F(CpuExport, VerifyAgreesAndSaysWhenTheRecordOrTheKernelWasChanged) {
  const std::string to = dir_->file("reduce-verify");
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " export reduce --out " + run_dir() + " --to " + to, &out),
            0)
      << out;
  ASSERT_EQ(run_command(kiln_binary() + " verify " + to, &out), 0) << out;
  EXPECT_NE(out.find("verdict: agrees with the record"), std::string::npos) << out;

  // A record whose timing is ten times too fast: the re-run disagrees.
  nlohmann::json rec = nlohmann::json::parse(read_file(to + "/kiln-export.json"));
  const double median = rec["verified_here"]["timing"]["median_us"].get<double>();
  rec["verified_here"]["timing"]["median_us"] = median / 10;
  rec["verified_here"]["timing"]["noise_rel"] = 0.01;
  std::ofstream(to + "/kiln-export.json") << rec.dump(2);
  EXPECT_EQ(run_command(kiln_binary() + " verify " + to, &out), 1) << out;
  EXPECT_NE(out.find("verdict: disagrees"), std::string::npos) << out;

  // An edited kernel text is not what the record verified.
  std::ofstream(to + "/" + rec["kernel"]["file"].get<std::string>(), std::ios::app)
      << "// edited\n";
  EXPECT_EQ(run_command(kiln_binary() + " verify " + to, &out), 2) << out;
  EXPECT_NE(out.find("not the kernel text kiln exported"), std::string::npos) << out;
}

TEST_F(CpuExport, TorchAndKernelbenchFilesExposeTheirApi) {
  const std::string torch_dir = dir_->file("reduce-torch");
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " export reduce --out " + run_dir() +
                            " --format torch --no-verify --to " + torch_dir,
                        &out),
            0)
      << out;
  for (const char* f :
       {"reduce.py", "reduce.cc", "reduce.h", "reduce_binding.cpp", "kiln-export.json"}) {
    EXPECT_TRUE(fs::exists(torch_dir + "/" + f)) << f;
  }
  // The module's public function and its keyword outputs, read with Python's own parser.
  const std::string probe =
      "import ast, sys\n"
      "m = ast.parse(open(sys.argv[1]).read())\n"
      "f = {n.name: n for n in m.body if isinstance(n, ast.FunctionDef)}\n"
      "a = f['reduce'].args\n"
      "print([x.arg for x in a.args], [x.arg for x in a.kwonlyargs], '_ext' in f, '_check' in f)\n";
  std::ofstream(dir_->file("probe.py")) << probe;
  ASSERT_EQ(run_command("python3 " + dir_->file("probe.py") + " " + torch_dir + "/reduce.py", &out),
            0)
      << out;
  EXPECT_EQ(out, "['x'] ['y'] True True\n");
  const std::string binding = read_file(torch_dir + "/reduce_binding.cpp");
  EXPECT_NE(binding.find("PYBIND11_MODULE"), std::string::npos);
  EXPECT_NE(binding.find("kiln_reduce::launch("), std::string::npos);

  // KernelBench and GPU MODE are for cuda kernels; a cpu one is refused with the reason.
  EXPECT_EQ(run_command(kiln_binary() + " export reduce --out " + run_dir() +
                            " --format kernelbench --no-verify --to " + dir_->file("kb"),
                        &out),
            2);
  EXPECT_NE(out.find("needs a kernel of the cuda backend"), std::string::npos) << out;
  EXPECT_EQ(run_command(kiln_binary() + " export reduce --out " + run_dir() +
                            " --format cuda --to " + dir_->file("c"),
                        &out),
            2);
  EXPECT_NE(out.find("use --format cpp"), std::string::npos) << out;
}

// Where PyTorch can be imported (KILN_TEST_PYTHON names the interpreter, default python3), the
// torch export of the cpu best is built as a CPU extension and called: its result is the row sums,
// an output passed by keyword is written in place, and wrong arguments get errors saying what to
// do.
TEST_F(CpuExport, TorchModuleBuildsAndComputesWhereTorchIsInstalled) {
  const char* env = std::getenv("KILN_TEST_PYTHON");
  const std::string python = env && *env ? env : "python3";
  std::string out;
  if (run_command(python + " -c 'import torch'", &out) != 0) {
    GTEST_SKIP()
        << python
        << " cannot import torch (set KILN_TEST_PYTHON to one that can): the module was checked "
        << "for its API only";
  }
  const std::string to = dir_->file("reduce-torch-run");
  ASSERT_EQ(run_command(kiln_binary() + " export reduce --out " + run_dir() +
                            " --format torch --no-verify --to " + to,
                        &out),
            0)
      << out;
  std::ofstream(to + "/use.py")
      << "import sys, torch\nsys.path.insert(0, sys.argv[1])\nfrom reduce import reduce\n"
         "x = torch.randn(37, 1031)\ny = reduce(x)\n"
         "torch.testing.assert_close(y.double(), x.double().sum(-1), rtol=1e-4, atol=1e-4)\n"
         "out = torch.empty(37)\nassert reduce(x, y=out) is out and torch.equal(out, y)\n"
         "for bad, kind, says in ((x.half(), TypeError, 'exported for'),\n"
         "                        (x.t(), ValueError, 'contiguous'),\n"
         "                        (x[0], ValueError, 'has 1 dims')):\n"
         "    try:\n        reduce(bad)\n        raise SystemExit('no error for ' + says)\n"
         "    except kind as e:\n        assert says in str(e), str(e)\n"
         "print('ok', tuple(y.shape))\n";
  ASSERT_EQ(run_command("TORCH_EXTENSIONS_DIR=" + dir_->file("ext") + " " + python + " " + to +
                            "/use.py " + to,
                        &out),
            0)
      << out;
  EXPECT_NE(out.find("ok (37,)"), std::string::npos) << out;
}

TEST(ExportErrors, SayWhatToDo) {
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " export reduce", &out), 2);
  EXPECT_NE(out.find("say where the kernel comes from"), std::string::npos) << out;
  EXPECT_EQ(run_command(kiln_binary() + " export no_such_target --seed", &out), 2);
  EXPECT_NE(out.find("no_such_target"), std::string::npos) << out;
  TempDir d;
  EXPECT_EQ(run_command(kiln_binary() + " export reduce --out " + d.path(), &out), 2);
  EXPECT_NE(out.find("has no best/ folder"), std::string::npos) << out;
  EXPECT_EQ(
      run_command(kiln_binary() + " export reduce --template --params BLOCK=7 --no-verify --to " +
                      d.file("x"),
                  &out),
      2);
  EXPECT_NE(out.find("BLOCK"), std::string::npos) << out;
  // A target that is no leaderboard task has no submission.
  EXPECT_EQ(
      run_command(kiln_binary() + " export reduce --template --format gpumode --no-verify --to " +
                      d.file("g"),
                  &out),
      2);
  EXPECT_NE(out.find("not a GPU MODE leaderboard task"), std::string::npos) << out;
  EXPECT_EQ(run_command(kiln_binary() + " verify " + d.path(), &out), 2);
  EXPECT_NE(out.find("kiln-export.json"), std::string::npos) << out;
}

TEST(KernelbenchExport, IsAModelNewWithTheInlineKernel) {
  TempDir d;
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() +
                            " export softmax --template --format kernelbench --no-verify --to " +
                            d.file("kb"),
                        &out),
            0)
      << out;
  const std::string py = read_file(d.file("kb/model_new.py"));
  std::ofstream(d.file("probe.py"))
      << "import ast, sys\nm = ast.parse(open(sys.argv[1]).read())\n"
         "c = [n for n in m.body if isinstance(n, ast.ClassDef) and n.name == 'ModelNew'][0]\n"
         "f = [n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == 'forward'][0]\n"
         "print([a.arg for a in f.args.args])\n";
  ASSERT_EQ(run_command("python3 " + d.file("probe.py") + " " + d.file("kb/model_new.py"), &out), 0)
      << out;
  EXPECT_EQ(out, "['self', 'x']\n");
  EXPECT_NE(py.find("load_inline("), std::string::npos);
  EXPECT_NE(py.find("extern \"C\" __global__ void KILN_BOUNDS softmax("), std::string::npos);
  EXPECT_NE(py.find("::softmax<<<g.grid, g.block, g.shared_bytes, stream>>>("), std::string::npos);
}

}  // namespace
}  // namespace kiln
