// A Triton kernel is Python, and every export format writes C++ or CUDA around a C++ source: each
// format refuses a kernel of the triton backend, saying where the verified kernel is instead,
// and writes nothing (it once wrote the Python module into a .cc file and exited 0).
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::kiln_binary;
using testing::run_command;
using testing::TempDir;

TEST(TritonExport, EveryFormatRefusesATritonKernelAndWritesNothing) {
  TempDir d;
  for (const std::string format : {"", "cuda", "cpp", "torch", "gpumode", "kernelbench"}) {
    SCOPED_TRACE("--format " + format);
    const std::string to = d.file("out-" + format);
    std::string out;
    const int rc =
        run_command(kiln_binary() + " export rmsnorm --backend triton --template" +
                        (format.empty() ? "" : " --format " + format) + " --no-verify --to " + to,
                    &out);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("does not write Triton kernels yet"), std::string::npos) << out;
    EXPECT_NE(out.find("best/<target>.json"), std::string::npos) << out;
    EXPECT_FALSE(std::filesystem::exists(to));
  }
}

}  // namespace
}  // namespace kiln
