// `kiln deploy k8s` as a user runs it: the manifests it writes pass `kubernetes-validate --strict`
// and kiln's own conventions (tests/deploy/check_k8s.py: GPU limits and product selectors on
// evaluators, pinned images, probes, no Secret inlined, non-root pods), and what it refuses it
// refuses with the reason. The YAML writer's output is checked here line by line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/k8s_manifests.h"
#include "cli/yaml_text.h"
#include "tests/support/test_env.h"

namespace kiln::cli {
namespace {

std::string deploy(const std::string& args, std::string* output) {
  const int rc =
      testing::run_command(testing::kiln_binary() + " deploy k8s " + args + " 2>&1", output);
  return "rc=" + std::to_string(rc);
}

const char* kImages =
    " --image registry.example/kiln:0.1.0 --evaluator-image registry.example/kiln-cuda:0.1.0";

TEST(DeployK8s, WritesManifestsThatKubernetesAndKilnsConventionsAccept) {
  testing::TempDir dir;
  const std::string out = dir.file("k8s");
  std::string output;
  ASSERT_EQ(deploy("--out " + out + kImages +
                       " --gpus NVIDIA-H100-80GB-HBM3=4,NVIDIA-H200=2 --targets rmsnorm,softmax"
                       " --budget 6h --sweep-targets reduce,rmsnorm --sweep-gpu NVIDIA-H200",
                   &output),
            "rc=0")
      << output;
  EXPECT_NE(output.find("secrets.sh"), std::string::npos) << output;
  std::string check;
  const int rc = testing::run_command("python3 " KILN_SOURCE_DIR "/tests/deploy/check_k8s.py " +
                                          out + " NVIDIA-H100-80GB-HBM3=4 NVIDIA-H200=2 2>&1",
                                      &check);
  EXPECT_EQ(rc, 0) << check;
  std::printf("%s", check.c_str());
  // The coordinator continues its run when its pod is made again.
  std::ifstream in(out + "/20-coordinator.yaml");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("--resume-if-any"), std::string::npos);
  EXPECT_NE(text.str().find("--gpu-models"), std::string::npos);
}

TEST(DeployK8s, RefusesUnpinnedImagesUnknownProductsAndAFolderInUse) {
  testing::TempDir dir;
  std::string output;
  EXPECT_EQ(deploy("--out " + dir.file("a") +
                       " --image kiln:latest --evaluator-image kiln-cuda:1 --gpus X=1",
                   &output),
            "rc=2");
  EXPECT_NE(output.find("'latest', which moves"), std::string::npos) << output;
  EXPECT_EQ(
      deploy("--out " + dir.file("a") + " --image kiln --evaluator-image kiln-cuda:1 --gpus X=1",
             &output),
      "rc=2");
  EXPECT_NE(output.find("has no tag"), std::string::npos) << output;
  EXPECT_EQ(deploy("--out " + dir.file("a") + kImages + " --gpus 'NVIDIA H100=1'", &output),
            "rc=2");
  EXPECT_NE(output.find("not a node label value"), std::string::npos) << output;
  EXPECT_EQ(deploy("--out " + dir.file("a") + kImages + " --gpus X=zero", &output), "rc=2");
  EXPECT_NE(output.find("PRODUCT=COUNT"), std::string::npos) << output;
  // Each of these was written as given, into manifests that fail when applied or run.
  for (const auto& [options, says] : std::vector<std::pair<std::string, std::string>>{
           {" --gpus 'X=1,X=2'", "'X' is named twice"},
           {" --gpus 'H100.80=1,H100-80=2'", "names the same Job"},
           {" --gpus X=1 --budget forever", "--budget"},
           {" --gpus X=1 --budget 0s", "needs some time"},
           {" --gpus X=1 --storage lots", "a Kubernetes quantity"},
           {" --gpus X=1 --storage-class 'Bad Class!'", "--storage-class"},
           {" --gpus X=1 --targets 'reduce,no such'", "is not a target name"}}) {
    EXPECT_EQ(deploy("--out " + dir.file("a") + kImages + options, &output), "rc=2") << options;
    EXPECT_NE(output.find(says), std::string::npos) << options << ": " << output;
  }
  EXPECT_EQ(deploy("--out " + dir.file("a") +
                       " --image 'kiln:1 --evil' --evaluator-image kiln-cuda:1 --gpus X=1",
                   &output),
            "rc=2");
  EXPECT_NE(output.find("holds a space or control character"), std::string::npos) << output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("a")))
      << "nothing is written when the options are wrong";
  ASSERT_EQ(deploy("--out " + dir.file("a") + kImages + " --gpus X=1", &output), "rc=0") << output;
  EXPECT_EQ(deploy("--out " + dir.file("a") + kImages + " --gpus X=1", &output), "rc=2");
  EXPECT_NE(output.find("--force"), std::string::npos) << output;
  // --force over a deploy with a sweep: the sweep's manifest goes with the sweep.
  ASSERT_EQ(deploy("--out " + dir.file("b") + kImages +
                       " --gpus X=1 --sweep-targets reduce --sweep-gpu X",
                   &output),
            "rc=0")
      << output;
  ASSERT_TRUE(std::filesystem::exists(dir.file("b/50-sweep.yaml"))) << output;
  ASSERT_EQ(deploy("--out " + dir.file("b") + kImages + " --gpus X=1 --force", &output), "rc=0")
      << output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("b/50-sweep.yaml"))) << output;
}

TEST(YamlText, WritesMappingsListsAndScalarsThatReadBackAsTheyWere) {
  nlohmann::json doc = {
      {"kind", "Pod"},
      {"n", 3},
      {"flag", true},
      {"quoted", {"yes", "1.5", "a: b", "-x", ""}},
      {"items", {{{"name", "a"}, {"args", {"x", "y"}}}, nlohmann::json::object()}},
      {"empty", nlohmann::json::array()}};
  EXPECT_EQ(to_yaml(doc),
            "empty: []\n"
            "flag: true\n"
            "items:\n"
            "- args:\n"
            "  - x\n"
            "  - \"y\"\n"  // YAML 1.1 reads y, n, yes, on... as booleans
            "  name: a\n"
            "- {}\n"
            "kind: Pod\n"
            "\"n\": 3\n"
            "quoted:\n"
            "- \"yes\"\n"
            "- \"1.5\"\n"
            "- \"a: b\"\n"
            "- \"-x\"\n"
            "- \"\"\n");
  EXPECT_EQ(k8s_name_part("NVIDIA-H100-80GB-HBM3"), "nvidia-h100-80gb-hbm3");
}

}  // namespace
}  // namespace kiln::cli
