// A farm that binds a network address, as an operator runs one: CURVE keys from `kiln keys`, an
// evaluator whose key is allowed and one whose key is not, and a Redis that admits only an ACL
// user whose password is read from a file. Then `kiln run` on a network address (per-run keys
// for its own evaluators) against the same Redis, and wrong Redis passwords.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

using testing::read_json;

constexpr const char* kAclConfig = "user kiln on >s3cret-acl ~kiln:* &* +@all\nuser default off";

std::string password_file(const testing::TempDir& dir, const std::string& name,
                          const std::string& password) {
  const std::string path = dir.write(name, password + "\n");
  EXPECT_EQ(::chmod(path.c_str(), 0600), 0);
  return path;
}

TEST(SecureFarm, OnlyTheAllowedEvaluatorWorksAndRedisIsReachedAsAnAclUser) {
  testing::RedisServer redis(kAclConfig);
  ASSERT_TRUE(redis.started()) << redis.error();
  testing::TempDir dir;
  const std::string kiln = testing::kiln_binary();
  const std::string out = dir.file("coord");
  std::string output;
  for (const std::string& args : {" --out " + dir.file("keys") + " --name coordinator",
                                  " --out " + dir.file("workers") + " --name gpu-node-1",
                                  " --out " + dir.file("strangers") + " --name intruder"}) {
    ASSERT_EQ(testing::run_command(kiln + " keys new" + args + " 2>&1", &output), 0) << output;
  }
  const std::string pass = password_file(dir, "redis.pass", "s3cret-acl");
  const std::string redis_url = "'unix://" + redis.socket_path() + "?user=kiln'";
  const std::string worker = " --backend cpu --cache-dir " + dir.file("cache") +
                             " --targets-dir " KILN_SOURCE_DIR "/targets --coordinator-key " +
                             dir.file("keys/coordinator.pub");
  const std::string script =
      "set -u\n" + kiln + " coordinator --bind 'tcp://0.0.0.0:*' --curve-secret " +
      dir.file("keys/coordinator.key") + " --allow " + dir.file("workers") + " --redis " +
      redis_url + " --redis-password-file " + pass +
      " --backend cpu --targets reduce --budget 240s --patience 4 --in-flight 2 "
      "--targets-dir " KILN_SOURCE_DIR "/targets --out " +
      out + " > " + dir.file("coord.log") + " 2>&1 & coord=$!\n" +
      "for i in $(seq 1 300); do [ -s " + out + "/endpoint ] && break; sleep 0.1; done\n" + kiln +
      " evaluator --connect $(cat " + out + "/endpoint) --worker-id intruder --curve-secret " +
      dir.file("strangers/intruder.key") + worker + " > " + dir.file("intruder.log") +
      " 2>&1 & bad=$!\n" + kiln + " evaluator --connect $(cat " + out +
      "/endpoint) --worker-id good --curve-secret " + dir.file("workers/gpu-node-1.key") + worker +
      " > " + dir.file("good.log") + " 2>&1 & good=$!\n" +
      "wait $coord; echo rc=$?; kill $bad $good; wait $bad; wait $good\n";
  testing::run_command("bash " + dir.write("farm.sh", script) + " 2>&1", &output);
  std::string coord_log, intruder_log;
  testing::run_command("cat " + dir.file("coord.log"), &coord_log);
  testing::run_command("cat " + dir.file("intruder.log"), &intruder_log);
  ASSERT_TRUE(has(output, "rc=0")) << output << coord_log;
  EXPECT_TRUE(has(coord_log, "CURVE on tcp://0.0.0.0:")) << coord_log;
  EXPECT_TRUE(has(coord_log, "worker good joined: evaluator on")) << coord_log;
  EXPECT_TRUE(has(coord_log, "key 'gpu-node-1'")) << coord_log;
  EXPECT_FALSE(has(coord_log, "worker intruder")) << coord_log;
  EXPECT_TRUE(has(coord_log, "refused a worker from 127.0.0.1: its CURVE key")) << coord_log;
  EXPECT_FALSE(has(coord_log, "s3cret-acl")) << coord_log;
  EXPECT_FALSE(has(intruder_log, "evaluating task")) << intruder_log;
  nlohmann::json summary = read_json(out + "/summary.json");
  ASSERT_TRUE(summary.is_array() && summary.size() == 1) << coord_log;
  EXPECT_GT(summary[0]["evaluations"].get<int>(), 1) << summary.dump();

  // What the search wrote went to Redis as the ACL user (the default user is off).
  ASSERT_EQ(testing::run_command(
                "redis-cli -s " + redis.socket_path() +
                    " --user kiln --pass s3cret-acl --no-auth-warning EXISTS kiln:run 2>&1",
                &output),
            0);
  EXPECT_TRUE(has(output, "1")) << output;
}

TEST(SecureFarm, KilnRunOnANetworkAddressGivesItsEvaluatorsPerRunKeys) {
  testing::RedisServer redis(kAclConfig);
  ASSERT_TRUE(redis.started()) << redis.error();
  testing::TempDir dir;
  const std::string out = dir.file("run");
  const std::string pass = password_file(dir, "redis.pass", "s3cret-acl");
  std::string output;
  const int rc = testing::run_command(
      testing::kiln_binary() +
          " run --bind 'tcp://0.0.0.0:*' --targets reduce --backend cpu --evaluators 1" +
          " --budget 240s --patience 4 --redis 'unix://" + redis.socket_path() +
          "?user=kiln&db=1'" + " --redis-password-file " + pass + " --out " + out +
          " --cache-dir " + dir.file("cache") + " --targets-dir " KILN_SOURCE_DIR "/targets 2>&1",
      &output);
  ASSERT_EQ(rc, 0) << output;
  struct stat st {};
  ASSERT_EQ(::stat((out + "/keys/kiln-run-local.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((out + "/keys/coordinator.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  nlohmann::json summary = read_json(out + "/summary.json");
  ASSERT_TRUE(summary.is_array() && summary.size() == 1) << output;
  EXPECT_GT(summary[0]["evaluations"].get<int>(), 1) << summary.dump();
  std::string evaluator_log;
  testing::run_command("cat " + out + "/evaluator-0.log", &evaluator_log);
  EXPECT_TRUE(has(evaluator_log, "evaluating task")) << evaluator_log;
  EXPECT_FALSE(has(output, "s3cret-acl")) << output;
}

TEST(SecureFarm, AWrongRedisPasswordNamesTheUserNotThePassword) {
  testing::RedisServer redis(kAclConfig);
  ASSERT_TRUE(redis.started()) << redis.error();
  testing::TempDir dir;
  const std::string wrong = password_file(dir, "wrong.pass", "not-the-password");
  const std::string url =
      " --redis 'unix://" + redis.socket_path() + "?user=kiln' --redis-password-file " + wrong;
  for (const std::string command :
       {"run --backend cpu --targets reduce",
        "coordinator --bind 'tcp://127.0.0.1:*' --backend cpu --targets reduce"}) {
    SCOPED_TRACE(command);
    std::string output;
    const int rc = testing::run_command(testing::kiln_binary() + " " + command + url + " --out " +
                                            dir.file("out-" + command.substr(0, 3)) + " 2>&1",
                                        &output);
    EXPECT_EQ(rc, 2) << output;
    EXPECT_TRUE(has(output, "AUTH as user 'kiln': WRONGPASS")) << output;
    EXPECT_FALSE(has(output, "not-the-password")) << output;
  }
  // A password file that others may read is refused before any connection.
  const std::string loose = dir.write("loose.pass", "s3cret-acl\n");
  ASSERT_EQ(::chmod(loose.c_str(), 0644), 0);
  std::string output;
  EXPECT_EQ(testing::run_command(
                testing::kiln_binary() +
                    " coordinator --bind 'tcp://127.0.0.1:*' --backend cpu --redis 'unix://" +
                    redis.socket_path() + "?user=kiln' --redis-password-file " + loose + " --out " +
                    dir.file("loose") + " 2>&1",
                &output),
            2);
  EXPECT_TRUE(has(output, "chmod 600 " + loose)) << output;
  // A user named in the URL with no password anywhere says where to put it.
  EXPECT_EQ(testing::run_command(
                testing::kiln_binary() +
                    " coordinator --bind 'tcp://127.0.0.1:*' --backend cpu --redis 'unix://" +
                    redis.socket_path() + "?user=kiln' --out " + dir.file("nopass") + " 2>&1",
                &output),
            2);
  EXPECT_TRUE(has(output, "--redis-password-file")) << output;
}

}  // namespace
}  // namespace kiln
