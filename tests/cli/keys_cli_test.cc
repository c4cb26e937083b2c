// `kiln keys` and the CURVE rule of `kiln coordinator`, `kiln evaluator` and `kiln agent`, run as
// the real binary.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "shared/curve_keys.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using kiln::testing::kiln_binary;
using kiln::testing::run_command;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(KilnKeys, NewWritesAPrivateSecretAndItsPublicKey) {
  testing::TempDir dir;
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " keys new --out " + dir.file("workers") +
                            " --name gpu-node-1 2>&1",
                        &out),
            0)
      << out;
  const std::string key = dir.file("workers/gpu-node-1.key"),
                    pub = dir.file("workers/gpu-node-1.pub");
  EXPECT_EQ(mode_of(key), 0600u);
  EXPECT_EQ(mode_of(pub), 0644u);
  Result<net::CurveKeyPair> pair = net::read_secret_key_file(key);
  ASSERT_TRUE(pair.is_ok()) << pair.status().to_string();
  EXPECT_EQ(*net::read_public_key_file(pub), pair->public_key);
  EXPECT_TRUE(has(out, "public key: " + pair->public_key)) << out;
  EXPECT_FALSE(has(out, pair->secret_key)) << out;

  // `show` tells a key file's public half and never prints the secret.
  ASSERT_EQ(run_command(kiln_binary() + " keys show " + key + " 2>&1", &out), 0) << out;
  EXPECT_TRUE(has(out, pair->public_key)) << out;
  EXPECT_FALSE(has(out, pair->secret_key)) << out;

  // Existing files stay unless --force.
  EXPECT_EQ(run_command(kiln_binary() + " keys new --out " + dir.file("workers") +
                            " --name gpu-node-1 2>&1",
                        &out),
            2);
  EXPECT_TRUE(has(out, "exists")) << out;
  EXPECT_EQ(net::read_secret_key_file(key)->secret_key, pair->secret_key);
  ASSERT_EQ(run_command(kiln_binary() + " keys new --force --out " + dir.file("workers") +
                            " --name gpu-node-1 2>&1",
                        &out),
            0)
      << out;
  EXPECT_NE(net::read_secret_key_file(key)->secret_key, pair->secret_key);

  EXPECT_EQ(
      run_command(kiln_binary() + " keys new --out " + dir.path() + " --name ../evil 2>&1", &out),
      2);
  EXPECT_TRUE(has(out, "--name '../evil'")) << out;
}

TEST(KilnKeys, AllowBuildsAListTheCoordinatorReads) {
  testing::TempDir dir;
  std::string out;
  for (const char* name : {"alpha", "beta", "gamma"}) {
    ASSERT_EQ(
        run_command(kiln_binary() + " keys new --out " + dir.path() + " --name " + name + " 2>&1",
                    &out),
        0);
  }
  const std::string list = dir.file("allowed");
  ASSERT_EQ(run_command(kiln_binary() + " keys allow --list " + list + " " + dir.file("alpha.pub") +
                            " " + dir.file("beta.pub") + " 2>&1",
                        &out),
            0)
      << out;
  Result<net::AllowList> read = net::read_allow_list(list);
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(read->names_by_key.at(*net::read_public_key_file(dir.file("alpha.pub"))), "alpha");
  EXPECT_EQ(read->names_by_key.at(*net::read_public_key_file(dir.file("beta.pub"))), "beta");
  ASSERT_EQ(run_command(kiln_binary() + " keys show " + list + " 2>&1", &out), 0) << out;
  EXPECT_TRUE(has(out, "allow-list of 2 key(s)")) << out;
  // The same key twice is refused; so is a secret key given as a public one.
  EXPECT_EQ(run_command(kiln_binary() + " keys allow --list " + list + " " + dir.file("alpha.pub") +
                            " 2>&1",
                        &out),
            2);
  EXPECT_TRUE(has(out, "already has a key named 'alpha'")) << out;
  // A refusal adds none of the keys given with it (gamma was added, then alpha refused).
  EXPECT_EQ(run_command(kiln_binary() + " keys allow --list " + list + " " + dir.file("gamma.pub") +
                            " " + dir.file("alpha.pub") + " 2>&1",
                        &out),
            2);
  EXPECT_TRUE(has(out, "nothing added")) << out;
  Result<net::AllowList> unchanged = net::read_allow_list(list);
  ASSERT_TRUE(unchanged.is_ok()) << unchanged.status().to_string();
  EXPECT_EQ(unchanged->names_by_key.size(), 2u);
  EXPECT_EQ(run_command(kiln_binary() + " keys allow --list " + list + " " + dir.file("alpha.key") +
                            " 2>&1",
                        &out),
            2);
  EXPECT_TRUE(has(out, "is a secret key file")) << out;
}

TEST(KilnCoordinatorCurve, ANetworkAddressWithoutKeysIsRefusedWithHowToMakeThem) {
  testing::TempDir dir;
  std::string out;
  const int rc = run_command(
      kiln_binary() + " coordinator --bind 'tcp://0.0.0.0:*' --backend cpu --targets reduce" +
          " --out " + dir.file("coord") + " 2>&1",
      &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(has(out, "tcp://0.0.0.0:* is reachable from other machines")) << out;
  EXPECT_TRUE(has(out, "kiln keys new --out keys --name coordinator")) << out;
  EXPECT_TRUE(has(out, "--curve-secret keys/coordinator.key --allow workers")) << out;
  EXPECT_TRUE(has(out, "--insecure")) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("coord/redis")))
      << "it stopped before starting Redis";

  // Half the keys: says which one is missing.
  ASSERT_EQ(run_command(
                kiln_binary() + " keys new --out " + dir.path() + " --name coordinator 2>&1", &out),
            0);
  EXPECT_EQ(run_command(kiln_binary() + " coordinator --bind 'tcp://0.0.0.0:*' --curve-secret " +
                            dir.file("coordinator.key") + " --out " + dir.file("coord") + " 2>&1",
                        &out),
            2);
  EXPECT_TRUE(has(out, "--allow is missing")) << out;
  // A public key where the secret belongs: named, with the valid shape.
  EXPECT_EQ(run_command(kiln_binary() + " coordinator --bind 'tcp://0.0.0.0:*' --curve-secret " +
                            dir.file("coordinator.pub") + " --allow " +
                            dir.file("coordinator.pub") + " --out " + dir.file("coord") + " 2>&1",
                        &out),
            2);
  EXPECT_TRUE(has(out, "--curve-secret: " + dir.file("coordinator.pub") + " is a public key file"))
      << out;
  EXPECT_TRUE(has(out, "secret-key <40 Z85 characters>")) << out;
  // --insecure and keys contradict each other.
  EXPECT_EQ(run_command(kiln_binary() +
                            " coordinator --bind 'tcp://0.0.0.0:*' --insecure --curve-secret " +
                            dir.file("coordinator.key") + " --out " + dir.file("coord") + " 2>&1",
                        &out),
            2);
  EXPECT_TRUE(has(out, "--insecure turns CURVE off")) << out;
}

TEST(KilnCoordinatorCurve, InsecureStartsWithALoudWarning) {
  testing::TempDir dir;
  const std::string out_dir = dir.file("coord");
  const std::string script =
      "set -u\n" + kiln_binary() +
      " coordinator --bind 'tcp://0.0.0.0:*' --insecure --backend cpu --targets reduce"
      " --budget 60s --out " +
      out_dir + " > " + dir.file("coord.log") + " 2>&1 & pid=$!\n" +
      "for i in $(seq 1 300); do [ -s " + out_dir +
      "/endpoint ] && break; sleep 0.1; done\n"
      "cat " +
      out_dir + "/endpoint; kill -TERM $pid; wait $pid; echo rc=$?; cat " + dir.file("coord.log");
  std::string out;
  run_command("bash " + dir.write("insecure.sh", script) + " 2>&1", &out);
  EXPECT_TRUE(has(out, "tcp://0.0.0.0:")) << out;  // it bound and wrote its endpoint
  EXPECT_TRUE(has(out, "WARNING: --insecure")) << out;
  EXPECT_TRUE(has(out, "rc=0")) << out;  // it stopped cleanly on SIGTERM
}

TEST(KilnWorkerCurve, BothKeysOrNeither) {
  testing::TempDir dir;
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " keys new --out " + dir.path() + " --name w 2>&1", &out),
            0);
  for (const char* command : {"evaluator --backend cpu", "agent"}) {
    SCOPED_TRACE(command);
    EXPECT_EQ(
        run_command(kiln_binary() + " " + command + " --connect tcp://127.0.0.1:1 --curve-secret " +
                        dir.file("w.key") + " 2>&1",
                    &out),
        2);
    EXPECT_TRUE(has(out, "--coordinator-key is missing")) << out;
    EXPECT_EQ(
        run_command(kiln_binary() + " " + command + " --connect tcp://127.0.0.1:1 --curve-secret " +
                        dir.file("w.pub") + " --coordinator-key " + dir.file("w.pub") + " 2>&1",
                    &out),
        2);
    EXPECT_TRUE(has(out, "is a public key file")) << out;
  }
}

}  // namespace
}  // namespace kiln
