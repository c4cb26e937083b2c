// CURVE key files and allow-lists (shared/curve_keys.h) on a real file system, and the loopback
// rule that decides when a coordinator must use CURVE.
#include "shared/curve_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/test_env.h"

namespace kiln::net {
namespace {

unsigned mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CurveKeys, WrittenFilesRoundTripWithPrivateSecret) {
  testing::TempDir dir;
  Result<CurveKeyPair> pair = generate_curve_keypair();
  ASSERT_TRUE(pair.is_ok()) << pair.status().to_string();
  EXPECT_TRUE(is_z85_key(pair->public_key));
  EXPECT_TRUE(is_z85_key(pair->secret_key));
  EXPECT_NE(pair->public_key, pair->secret_key);

  ASSERT_TRUE(write_curve_key_files(dir.file("keys"), "gpu-node-1", *pair, false).is_ok());
  EXPECT_EQ(mode_of(dir.file("keys/gpu-node-1.key")), 0600u);
  EXPECT_EQ(mode_of(dir.file("keys/gpu-node-1.pub")), 0644u);

  Result<CurveKeyPair> secret = read_secret_key_file(dir.file("keys/gpu-node-1.key"));
  ASSERT_TRUE(secret.is_ok()) << secret.status().to_string();
  EXPECT_EQ(secret->secret_key, pair->secret_key);
  EXPECT_EQ(secret->public_key, pair->public_key);  // derived from the secret
  Result<std::string> pub = read_public_key_file(dir.file("keys/gpu-node-1.pub"));
  ASSERT_TRUE(pub.is_ok()) << pub.status().to_string();
  EXPECT_EQ(*pub, pair->public_key);
  std::ifstream in(dir.file("keys/gpu-node-1.pub"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(contains(text, pair->secret_key));

  // No silent overwrite; --force replaces both files with the new pair.
  Result<CurveKeyPair> other = generate_curve_keypair();
  ASSERT_TRUE(other.is_ok());
  Status again = write_curve_key_files(dir.file("keys"), "gpu-node-1", *other, false);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.to_string();
  EXPECT_TRUE(contains(again.message(), "--force"));
  ASSERT_TRUE(write_curve_key_files(dir.file("keys"), "gpu-node-1", *other, true).is_ok());
  EXPECT_EQ(read_secret_key_file(dir.file("keys/gpu-node-1.key"))->public_key, other->public_key);
  EXPECT_EQ(mode_of(dir.file("keys/gpu-node-1.key")), 0600u);
}

TEST(CurveKeys, RefusesASecretOthersCanRead) {
  testing::TempDir dir;
  Result<CurveKeyPair> pair = generate_curve_keypair();
  ASSERT_TRUE(pair.is_ok());
  ASSERT_TRUE(write_curve_key_files(dir.path(), "w", *pair, false).is_ok());
  ASSERT_EQ(::chmod(dir.file("w.key").c_str(), 0644), 0);
  Result<CurveKeyPair> got = read_secret_key_file(dir.file("w.key"));
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(contains(got.status().message(), "chmod 600 " + dir.file("w.key")))
      << got.status().message();
  EXPECT_TRUE(contains(got.status().message(), "0644"));
  EXPECT_FALSE(contains(got.status().message(), pair->secret_key));
}

TEST(CurveKeys, MalformedFilesNameTheFileAndTheValidShape) {
  testing::TempDir dir;
  Result<CurveKeyPair> pair = generate_curve_keypair();
  ASSERT_TRUE(pair.is_ok());
  ASSERT_TRUE(write_curve_key_files(dir.path(), "w", *pair, false).is_ok());
  struct Case {
    std::string content;
    std::string part;
  };
  const Case cases[] = {
      {"", "holds no key"},
      {"# only a comment\n", "holds no key"},
      {"secret-key tooshort\n", "not 40 Z85 characters"},
      {"secret-key " + std::string(40, '~') + "\n", "not 40 Z85 characters"},  // '~' is not Z85
      {"secret-key " + pair->secret_key + " extra\n", "is not `secret-key <key>`"},
      {pair->secret_key + "\n", "is not `secret-key <key>`"},
      {"secret-key " + pair->secret_key + "\nsecret-key " + pair->secret_key + "\n",
       "a second key"},
      {"public-key " + pair->public_key + "\n", "is a public key file"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.content);
    const std::string path = dir.write("bad.key", c.content);
    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
    Result<CurveKeyPair> got = read_secret_key_file(path);
    ASSERT_FALSE(got.is_ok());
    EXPECT_TRUE(contains(got.status().message(), path)) << got.status().message();
    EXPECT_TRUE(contains(got.status().message(), c.part)) << got.status().message();
    EXPECT_TRUE(contains(got.status().message(), "kiln keys new")) << got.status().message();
  }
  // A secret where a public key is expected: refused, so a worker never holds the server's secret.
  Result<std::string> pub = read_public_key_file(dir.file("w.key"));
  ASSERT_FALSE(pub.is_ok());
  EXPECT_TRUE(contains(pub.status().message(), "is a secret key file")) << pub.status().message();
  EXPECT_FALSE(contains(pub.status().message(), pair->secret_key));
  Result<std::string> missing = read_public_key_file(dir.file("absent.pub"));
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(contains(missing.status().message(), dir.file("absent.pub") + ": cannot read it"));
}

TEST(CurveKeys, AllowListFromAFolderOrAFile) {
  testing::TempDir dir;
  Result<CurveKeyPair> a = generate_curve_keypair(), b = generate_curve_keypair();
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ASSERT_TRUE(write_curve_key_files(dir.file("workers"), "alpha", *a, false).is_ok());
  ASSERT_TRUE(write_curve_key_files(dir.file("workers"), "beta", *b, false).is_ok());
  Result<AllowList> folder = read_allow_list(dir.file("workers"));  // the .key files are ignored
  ASSERT_TRUE(folder.is_ok()) << folder.status().to_string();
  ASSERT_EQ(folder->names_by_key.size(), 2u);
  EXPECT_EQ(folder->names_by_key.at(a->public_key), "alpha");
  EXPECT_EQ(folder->names_by_key.at(b->public_key), "beta");

  const std::string list = dir.file("allowed");
  ASSERT_TRUE(add_to_allow_list(list, "alpha", a->public_key).is_ok());
  ASSERT_TRUE(add_to_allow_list(list, "beta", b->public_key).is_ok());
  EXPECT_EQ(add_to_allow_list(list, "alpha", b->public_key).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(add_to_allow_list(list, "gamma", a->public_key).code(), StatusCode::kAlreadyExists);
  Result<AllowList> file = read_allow_list(list);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file->names_by_key, folder->names_by_key);

  struct Case {
    std::string content;
    std::string part;
  };
  const Case bad[] = {
      {"# nobody\n", "admits no worker key"},
      {"alpha " + a->public_key + "\nalpha " + b->public_key + "\n",
       "line 2: the name 'alpha' appears twice"},
      {"alpha " + a->public_key + "\nbeta " + a->public_key + "\n",
       "already on the list as 'alpha'"},
      {"alpha\n", "line 1 is not `NAME <40 Z85 characters>`"},
      {"bad/name " + a->public_key + "\n", "line 1 is not `NAME"},
      {"secret-key " + a->secret_key + "\n", "is a secret key file"},
  };
  for (const Case& c : bad) {
    SCOPED_TRACE(c.content);
    Result<AllowList> got = read_allow_list(dir.write("list", c.content));
    ASSERT_FALSE(got.is_ok());
    EXPECT_TRUE(contains(got.status().message(), c.part)) << got.status().message();
    EXPECT_FALSE(contains(got.status().message(), a->secret_key));
  }
}

TEST(CurveKeys, LoopbackRule) {
  for (const char* e :
       {"tcp://127.0.0.1:5555", "tcp://127.0.0.1:*", "tcp://127.1.2.3:9", "tcp://localhost:5555",
        "tcp://[::1]:5555", "tcp://[0:0:0:0:0:0:0:1]:5", "tcp://[::1%lo]:5",
        "tcp://[::ffff:127.0.0.1]:5", "ipc:///tmp/kiln.sock", "inproc://x"}) {
    EXPECT_TRUE(is_loopback_endpoint(e)) << e;
  }
  for (const char* e :
       {"tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://10.0.0.5:5555", "tcp://[::]:5555",
        "tcp://eth0:5555", "tcp://gpu-box:5555", "tcp://127.0.0.1.evil.com:5",
        "tcp://127.0.0.1;10.0.0.1:5", "udp://127.0.0.1:5", "tcp://1270.0.0.1:5",
        "tcp://[::ffff:10.0.0.1]:5", "tcp://[fd00::1]:5", "tcp://[lo]:5"}) {
    EXPECT_FALSE(is_loopback_endpoint(e)) << e;
  }
}

}  // namespace
}  // namespace kiln::net
