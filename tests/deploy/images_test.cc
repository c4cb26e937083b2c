// docker/build-images as a user runs it: both images are built from a bundle of this build, then a
// container of each runs `kiln selftest` through the image's own entrypoint and a short `kiln run`
// on the cpu backend, as the image's user. Containers run with buildah's chroot isolation (no
// daemon, no registry). Needs root, buildah and mmdebstrap (scripts/bootstrap) and Debian's
// package mirror.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class Images : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (mmdebstrap, buildah)";
    std::string out;
    if (testing::run_command("command -v buildah mmdebstrap", &out) != 0)
      GTEST_FAIL() << "buildah or mmdebstrap is missing (scripts/bootstrap installs them): " << out;
    buildah_ = "buildah --root " + dir_.file("storage") + " --runroot " + dir_.file("run") +
               " --storage-driver vfs";
  }
  void TearDown() override {
    std::string out;
    if (!buildah_.empty()) testing::run_command(buildah_ + " rm --all", &out);
  }
  // A working container from an OCI archive; returns its name.
  std::string from(const std::string& archive) {
    std::string out;
    EXPECT_EQ(testing::run_command(buildah_ + " from --quiet oci-archive:" + archive, &out), 0)
        << out;
    std::istringstream lines(out);
    std::string name;
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) name = line;
    return name;
  }
  nlohmann::json config(const std::string& container) {
    std::string out;
    EXPECT_EQ(testing::run_command(buildah_ + " inspect --type container " + container, &out), 0)
        << out;
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j["OCIv1"]["config"];
  }
  // Runs `args` after the image's entrypoint, as the image's user, in `container`.
  int run(const std::string& container, const nlohmann::json& cfg, const std::string& args,
          std::string* out) {
    std::string entry;
    for (const auto& part : cfg["Entrypoint"]) entry += " " + part.get<std::string>();
    return testing::run_command(
        buildah_ + " run --isolation chroot " + container + " --" + entry + " " + args, out);
  }

  testing::TempDir dir_;
  std::string buildah_;
};

TEST_F(Images, BothBuildFromTheBundleAndRunSelftestAndACpuRunAsTheirUser) {
  // The bundle of this very build, without building again.
  const fs::path build = fs::path(testing::kiln_binary()).parent_path().parent_path();
  std::string out;
  ASSERT_EQ(testing::run_command("KILN_BUILD_DIR=" + build.string() +
                                     " " KILN_SOURCE_DIR "/scripts/bundle --no-build --out " +
                                     dir_.file("dist"),
                                 &out),
            0)
      << out;
  std::string tarball;
  for (const auto& e : fs::directory_iterator(dir_.file("dist")))
    if (e.path().string().ends_with(".tar.gz")) tarball = e.path().string();
  ASSERT_FALSE(tarball.empty()) << out;
  ASSERT_EQ(testing::run_command(KILN_SOURCE_DIR "/docker/build-images --bundle " + tarball +
                                     " --out " + dir_.file("images") + " --tag test",
                                 &out),
            0)
      << out;

  for (const std::string image : {"kiln", "kiln-evaluator"}) {
    SCOPED_TRACE(image);
    const std::string archive = dir_.file("images/" + image + "-test.oci.tar");
    ASSERT_TRUE(fs::exists(archive)) << out;
    const std::string c = from(archive);
    ASSERT_FALSE(c.empty());
    const nlohmann::json cfg = config(c);
    EXPECT_EQ(cfg.value("User", ""), "10001:10001") << cfg.dump();
    ASSERT_TRUE(cfg["Entrypoint"].is_array() && !cfg["Entrypoint"].empty()) << cfg.dump();
    EXPECT_EQ(cfg["Labels"].value("io.kiln.healthcheck", ""), "kiln selftest") << cfg.dump();

    std::string selftest;
    EXPECT_EQ(run(c, cfg, "selftest", &selftest), 0) << selftest;
    EXPECT_NE(selftest.find("selftest: all checks passed"), std::string::npos) << selftest;
    EXPECT_NE(selftest.find("/opt/kiln/bin/redis-server"), std::string::npos) << selftest;
    // The evaluator image carries NVRTC (the driver comes from the container runtime); the
    // coordinator image has no CUDA at all.
    const bool nvrtc = selftest.find("NVRTC: 1") != std::string::npos;
    EXPECT_EQ(nvrtc, image == "kiln-evaluator") << selftest;

    std::string id;
    ASSERT_EQ(testing::run_command(buildah_ + " run --isolation chroot " + c + " -- id -u", &id), 0)
        << id;
    EXPECT_EQ(id.substr(0, id.find('\n')), "10001");

    std::string run_out;
    ASSERT_EQ(
        run(c, cfg, "run --backend cpu --targets reduce --budget 12s --out /home/kiln/run 2>&1",
            &run_out),
        0)
        << run_out;
    std::string summary;
    ASSERT_EQ(testing::run_command(
                  buildah_ + " run --isolation chroot " + c + " -- cat /home/kiln/run/summary.json",
                  &summary),
              0)
        << summary;
    nlohmann::json s = nlohmann::json::parse(summary, nullptr, false);
    ASSERT_TRUE(s.is_array() && s.size() == 1) << summary;
    EXPECT_EQ(s[0].value("target", ""), "reduce") << summary;
    EXPECT_GT(s[0].value("evaluations", 0), 1) << summary;
  }
}

}  // namespace
}  // namespace kiln
