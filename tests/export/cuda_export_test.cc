// The cuda export of every built-in target's seed and template, compiled with nvcc as a user's
// build would (no GPU needed to build): the host launcher's check() and geometry() at every shape
// the target lists must say what kiln's own evaluator computes there.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "evaluator/evaluation.h"
#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::kiln_binary;
using testing::run_command;
using testing::TempDir;

bool have_nvcc() {
  std::string out;
  return run_command("command -v nvcc", &out) == 0;
}

// A host program that prints, per shape, "ok gx gy gz bx by bz smem" or "error <message>".
std::string driver(const TargetSpec& t, const std::vector<Shape>& shapes) {
  std::string d =
      "#include <cstdio>\n#include \"" + t.name + ".cuh\"\nint main() {\n  std::string why;\n";
  for (const Shape& s : shapes) {
    std::string args;
    for (const auto& dim : t.dims)
      args += (args.empty() ? "" : ", ") + std::to_string(s.at(dim)) + "LL";
    d += "  why = kiln_" + t.name + "::check(" + args + ");\n";
    d += "  if (!why.empty()) { std::printf(\"error %s\\n\", why.c_str()); } else {\n";
    d += "    auto g = kiln_" + t.name + "::geometry(" + args + ");\n";
    d += "    std::printf(\"ok %u %u %u %u %u %u %zu\\n\", g.grid.x, g.grid.y, g.grid.z, "
         "g.block.x, g.block.y, "
         "g.block.z, g.shared_bytes);\n  }\n";
  }
  return d + "  return 0;\n}\n";
}

// What kiln's evaluator launches at `s`: the same line. (Constraints that name a dim select the
// template's space at the benchmark shape; the evaluator does not apply them per shape.)
std::string expected(const KernelSpec& k, const Shape& s, DType dtype,
                     const std::map<std::string, std::string>& p) {
  Result<eval::LaunchGeometry> g = eval::launch_geometry(k, s, dtype, p);
  if (!g.is_ok()) return "error";
  std::ostringstream o;
  o << "ok " << g->grid[0] << " " << g->grid[1] << " " << g->grid[2] << " " << g->block[0] << " "
    << g->block[1] << " " << g->block[2] << " " << g->shared_bytes;
  return o.str();
}

TEST(CudaExport, EveryBuiltInKernelBuildsWithNvccAndLaunchesAsKilnWould) {
  if (!have_nvcc())
    GTEST_SKIP() << "nvcc is not on PATH: the cuda export's build is not checked here";
  Result<std::vector<TargetSpec>> targets = load_targets(default_targets_dir());
  ASSERT_TRUE(targets.is_ok()) << targets.status().message();
  TempDir dir;
  int checked = 0;
  for (const TargetSpec& t : *targets) {
    const BackendSpec* b = t.backend("cuda");
    if (!b) continue;
    for (const char* which : {"seed", "template"}) {
      if (std::string(which) == "template" && !b->tunable) continue;
      SCOPED_TRACE(t.name + " " + which);
      const std::string to = dir.file(t.name + "-" + which);
      std::string out;
      ASSERT_EQ(run_command(
                    kiln_binary() + " export " + t.name + " --" + which + " --no-verify --to " + to,
                    &out),
                0)
          << out;
      const nlohmann::json rec =
          nlohmann::json::parse(testing::read_file(to + "/kiln-export.json"));
      std::map<std::string, std::string> params =
          rec["params"].get<std::map<std::string, std::string>>();
      const KernelSpec& k = std::string(which) == "seed" ? b->seed : *b->tunable;
      // Every listed shape, and one no kernel can take (a dim of 0).
      std::vector<Shape> shapes = {t.benchmark};
      for (const auto* list : {&t.smoke, &t.sweep, &t.edge})
        shapes.insert(shapes.end(), list->begin(), list->end());
      Shape zero = t.benchmark;
      zero[t.dims.front()] = 0;
      shapes.push_back(zero);
      // The driver is plain C++ that includes the export's header, built by the host compiler as
      // a user's own sources would be (and in a third of nvcc's time); nvcc builds the .cu and
      // links.
      std::ofstream(to + "/driver.cc") << driver(t, shapes);
      const std::string build =
          "cd " + to + " && c++ -std=c++17 -I\"$(dirname \"$(command -v nvcc)\")/../include\" " +
          "-c driver.cc -o driver.o 2>&1 && nvcc -std=c++17 -gencode "
          "arch=compute_90a,code=sm_90a " +
          "-o driver driver.o " + t.name + ".cu 2>&1";
      ASSERT_EQ(run_command(build, &out), 0) << out;
      ASSERT_EQ(run_command(to + "/driver", &out), 0) << out;
      std::istringstream lines(out);
      for (size_t i = 0; i < shapes.size(); ++i) {
        std::string line;
        ASSERT_TRUE(std::getline(lines, line)) << out;
        const std::string want =
            i + 1 == shapes.size() ? "error" : expected(k, shapes[i], b->dtypes.front(), params);
        if (want == "error") {
          EXPECT_EQ(line.rfind("error ", 0), 0u) << shape_string(shapes[i]) << ": " << line;
        } else {
          EXPECT_EQ(line, want) << shape_string(shapes[i]);
        }
      }
      EXPECT_NE(out.find("every dim must be at least 1"), std::string::npos) << out;
      ++checked;
    }
  }
  EXPECT_GE(checked, 18);
}

}  // namespace
}  // namespace kiln
