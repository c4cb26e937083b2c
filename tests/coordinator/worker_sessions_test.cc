// WorkerSessions: a restart takes a worker id over, a reconnect keeps it, and a session that comes
// back after another replaced it is two live processes sharing the id.
#include "coordinator/worker_sessions.h"

#include <gtest/gtest.h>

namespace kiln::coordinator {
namespace {

proto::Hello hello(const std::string& id, const std::string& session, const std::string& node) {
  proto::Hello h;
  h.role = std::string(proto::kRoleEvaluator);
  h.worker_id = id;
  h.session = session;
  h.node = node;
  return h;
}

const auto kNoneConnected = [](const std::string&) { return false; };

TEST(WorkerSessions, ARestartTakesTheIdOverAndAReconnectKeepsIt) {
  WorkerSessions s;
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s1", "node-a"), kNoneConnected));
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s1", "node-a"), kNoneConnected));  // reconnect
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s2", "node-a"), kNoneConnected));  // restart
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s3", "node-a"), kNoneConnected));  // and another
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s3", "node-a"), kNoneConnected));
  EXPECT_FALSE(s.on_hello(hello("gpu1", "s1", "node-b"), kNoneConnected));  // ids are separate
}

TEST(WorkerSessions, AReplacedSessionThatComesBackSharesTheIdWithALiveProcess) {
  WorkerSessions s;
  ASSERT_FALSE(s.on_hello(hello("gpu0", "old", "node-a"), kNoneConnected));
  ASSERT_FALSE(s.on_hello(hello("gpu0", "new", "node-b"), kNoneConnected));
  auto conflict = s.on_hello(hello("gpu0", "old", "node-a"), kNoneConnected);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_EQ(conflict->other_node, "node-b");
  // The refused session does not become the current one: the newer process keeps the id, and
  // the older is refused every time it comes back.
  EXPECT_FALSE(s.on_hello(hello("gpu0", "new", "node-b"), kNoneConnected));
  EXPECT_TRUE(s.on_hello(hello("gpu0", "old", "node-a"), kNoneConnected).has_value());
}

TEST(WorkerSessions, HellosWithoutASessionAreNotTracked) {
  WorkerSessions s;
  EXPECT_FALSE(s.on_hello(hello("gpu0", "", "node-a"), kNoneConnected));
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s1", "node-a"), kNoneConnected));
  EXPECT_FALSE(s.on_hello(hello("gpu0", "", "node-b"), kNoneConnected));
  EXPECT_EQ(s.tracked_ids(), 1u);
}

TEST(WorkerSessions, RemembersABoundedNumberOfReplacedSessionsAndIds) {
  WorkerSessions s;
  for (size_t i = 0; i <= WorkerSessions::kReplacedPerId + 1; ++i)
    ASSERT_FALSE(s.on_hello(hello("gpu0", "s" + std::to_string(i), "n"), kNoneConnected));
  // s0 was pushed out of the bounded list; s2 is still remembered.
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s0", "n"), kNoneConnected));
  EXPECT_TRUE(s.on_hello(hello("gpu0", "s2", "n"), kNoneConnected).has_value());

  WorkerSessions full;
  for (size_t i = 0; i < WorkerSessions::kMaxIds; ++i)
    full.on_hello(hello("w" + std::to_string(i), "s", "n"), kNoneConnected);
  ASSERT_EQ(full.tracked_ids(), WorkerSessions::kMaxIds);
  // A new id when the table is full: the ids not connected now are forgotten.
  full.on_hello(hello("w-new", "s", "n"), [](const std::string& id) { return id == "w7"; });
  EXPECT_EQ(full.tracked_ids(), 2u);
}

}  // namespace
}  // namespace kiln::coordinator
