// `kiln selftest` end to end: a real redis-server and real ZeroMQ sockets, driven by the binary.
#include <gtest/gtest.h>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

TEST(Selftest, PassesRedisAndZeroMqRoundTripsOnThisMachine) {
  std::string out;
  int rc = testing::run_command(testing::kiln_binary() + " selftest", &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("redis: ok"), std::string::npos) << out;
  EXPECT_NE(out.find("zeromq: ok"), std::string::npos) << out;
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
}

TEST(Selftest, FailsClearlyWhenRedisServerIsMissing) {
  std::string out;
  int rc = testing::run_command(
      "KILN_REDIS_SERVER=/nonexistent/redis-server " + testing::kiln_binary() + " selftest", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("redis: FAILED"), std::string::npos) << out;
  EXPECT_NE(out.find("/nonexistent/redis-server"), std::string::npos) << out;
  EXPECT_NE(out.find("zeromq: ok"), std::string::npos) << out;  // the other check still runs
}

}  // namespace
}  // namespace kiln
