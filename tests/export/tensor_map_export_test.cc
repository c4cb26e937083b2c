// The cuda export of a kernel that takes a tensor map (tests/support/tma_target.h): its launcher
// encodes the map over the caller's tensor and passes it after the scalars; the unit builds with
// nvcc (no GPU needed to build), and a map whose `when` does not hold is left out. The launch
// itself is checked on a GPU in tests/gpu/tensor_map_gpu_test.cc.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/test_env.h"
#include "tests/support/tma_target.h"

namespace kiln {
namespace {

using testing::kiln_binary;
using testing::read_file;
using testing::run_command;
using testing::TempDir;

// `kiln export tma_scale --seed --no-verify` of the target as written (edited by `edit`) -> the
// export folder, or "" with the output in a failure.
std::string export_tma(TempDir& dir, const std::function<void(nlohmann::json&)>& edit) {
  testing::write_tma_scale_target(dir.file("targets/tma_scale"), 0);
  nlohmann::json j = testing::tma_scale_target_json(0);
  edit(j);
  dir.write("targets/tma_scale/target.json", j.dump(2));
  const std::string to = dir.file("export");
  std::string out;
  const int rc = run_command(kiln_binary() + " export tma_scale --seed --no-verify --targets-dir " +
                                 dir.file("targets") + " --to " + to + " 2>&1",
                             &out);
  EXPECT_EQ(rc, 0) << out;
  return rc == 0 ? to : "";
}

TEST(TensorMapExport, TheLauncherEncodesTheMapOverTheCallersTensorAndBuildsWithNvcc) {
  TempDir dir;
  const std::string to = export_tma(dir, [](nlohmann::json&) {});
  ASSERT_FALSE(to.empty());
  const std::string unit = read_file(to + "/tma_scale.cu");
  EXPECT_NE(unit.find("cuTensorMapEncodeTiled"), std::string::npos);
  EXPECT_NE(unit.find("CU_TENSOR_MAP_DATA_TYPE_FLOAT16"), std::string::npos);
  // Passed after the dims, over the input the map names.
  EXPECT_NE(unit.find("::tma_scale<<<g.grid, g.block, g.shared_bytes, stream>>>(x, y, M, N, "
                      "map_x_tiles)"),
            std::string::npos)
      << unit;
  EXPECT_NE(unit.find("static_cast<const void*>(x)"), std::string::npos);

  std::string out;
  if (run_command("command -v nvcc", &out) != 0)
    GTEST_SKIP() << "nvcc is not on PATH: the export's build is not checked here";
  std::ofstream(to + "/driver.cu")
      << "#include <cstdio>\n#include \"tma_scale.cuh\"\n"
         "int main() {\n"
         "  std::printf(\"%s|\", kiln_tma_scale::check(64, 128).c_str());\n"
         "  auto g = kiln_tma_scale::geometry(64, 128);\n"
         "  std::printf(\"%u %u\\n\", g.grid.x, g.grid.y);\n"
         "  return 0;\n}\n";
  ASSERT_EQ(run_command("cd " + to +
                            " && nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -o driver "
                            "driver.cu tma_scale.cu 2>&1",
                        &out),
            0)
      << out;
  ASSERT_EQ(run_command(to + "/driver", &out), 0) << out;
  EXPECT_EQ(out, "|2 2\n");  // fine at 64 x 128: 2 x 2 tiles of 32 x 64
}

TEST(TensorMapExport, AMapWhoseWhenDoesNotHoldIsNotEncodedOrPassed) {
  TempDir dir;
  const std::string to = export_tma(dir, [](nlohmann::json& j) {
    j["backends"]["cuda"]["seed"]["tensor_maps"][0]["when"] = "ALWAYS_TMA == 1";
  });
  ASSERT_FALSE(to.empty());
  const std::string unit = read_file(to + "/tma_scale.cu");
  EXPECT_EQ(unit.find("cuTensorMapEncodeTiled"), std::string::npos);
  EXPECT_NE(unit.find("stream>>>(x, y, M, N);"), std::string::npos) << unit;
}

}  // namespace
}  // namespace kiln
