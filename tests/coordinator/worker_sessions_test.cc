// WorkerSessions: a restart takes a worker id over, a reconnect keeps it, a session that comes back
// while the one that replaced it is connected is a second live process (and takes the id back once
// that one is gone), and another role is never a restart of a live worker.
#include "coordinator/worker_sessions.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

namespace kiln::coordinator {
namespace {

proto::Hello hello(const std::string& id, const std::string& session, const std::string& node,
                   std::string_view role = proto::kRoleEvaluator) {
  proto::Hello h;
  h.role = std::string(role);
  h.worker_id = id;
  h.session = session;
  h.node = node;
  return h;
}

// The connected workers, as the dispatcher would answer: (id, session) -> role.
struct Connected {
  std::map<std::pair<std::string, std::string>, std::string> roles;
  std::optional<std::string> operator()(const std::string& id, const std::string& session) const {
    auto it = roles.find({id, session});
    return it == roles.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
};

TEST(WorkerSessions, ARestartTakesTheIdOverAndAReconnectKeepsIt) {
  WorkerSessions s;
  Connected live;
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s1", "node-a"), live));
  live.roles[{"gpu0", "s1"}] = "evaluator";
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s1", "node-a"), live));  // reconnect
  // A restart before the old process was noticed gone (still connected): same role, taken over.
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s2", "node-a"), live));
  live.roles.clear();
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s3", "node-a"), live));  // and after it was
  EXPECT_FALSE(s.on_hello(hello("gpu1", "s1", "node-b"), live));  // ids are separate
}

TEST(WorkerSessions, AReplacedSessionIsRefusedWhileItsSuccessorLivesAndTakesTheIdBackAfter) {
  WorkerSessions s;
  Connected live;
  ASSERT_FALSE(s.on_hello(hello("gpu0", "old", "node-a"), live));
  ASSERT_FALSE(s.on_hello(hello("gpu0", "new", "node-b"), live));
  live.roles[{"gpu0", "new"}] = "evaluator";
  auto conflict = s.on_hello(hello("gpu0", "old", "node-a"), live);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_EQ(conflict->other_node, "node-b");
  EXPECT_EQ(conflict->other_role, "evaluator");
  EXPECT_EQ(conflict->other_session, "new");
  EXPECT_FALSE(s.on_hello(hello("gpu0", "new", "node-b"), live));  // the holder keeps it
  EXPECT_TRUE(s.on_hello(hello("gpu0", "old", "node-a"), live).has_value());

  // The holder leaves (a bye, or dropped as silent): the old session takes the id back, and the
  // one that left is now the replaced one.
  live.roles.clear();
  EXPECT_FALSE(s.on_hello(hello("gpu0", "old", "node-a"), live));
  live.roles[{"gpu0", "old"}] = "evaluator";
  EXPECT_TRUE(s.on_hello(hello("gpu0", "new", "node-b"), live).has_value());
}

TEST(WorkerSessions, AnotherRoleIsNoRestartOfALiveWorker) {
  WorkerSessions s;
  Connected live;
  ASSERT_FALSE(s.on_hello(hello("gpu0", "ev", "node-a"), live));
  live.roles[{"gpu0", "ev"}] = "evaluator";
  auto conflict = s.on_hello(hello("gpu0", "ag", "node-a", proto::kRoleAgent), live);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_EQ(conflict->other_role, "evaluator");
  EXPECT_FALSE(s.on_hello(hello("gpu0", "ev", "node-a"), live));  // the evaluator keeps its id
  live.roles.clear();  // once it is gone, an agent may take the id
  EXPECT_FALSE(s.on_hello(hello("gpu0", "ag", "node-a", proto::kRoleAgent), live));
}

TEST(WorkerSessions, HellosWithoutASessionAreNotTracked) {
  WorkerSessions s;
  Connected live;
  EXPECT_FALSE(s.on_hello(hello("gpu0", "", "node-a"), live));
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s1", "node-a"), live));
  EXPECT_FALSE(s.on_hello(hello("gpu0", "", "node-b"), live));
  EXPECT_EQ(s.tracked_ids(), 1u);
}

TEST(WorkerSessions, RemembersABoundedNumberOfReplacedSessionsAndIds) {
  WorkerSessions s;
  Connected live;
  for (size_t i = 0; i <= WorkerSessions::kReplacedPerId + 1; ++i)
    ASSERT_FALSE(s.on_hello(hello("gpu0", "s" + std::to_string(i), "n"), live));
  live.roles[{"gpu0", "s" + std::to_string(WorkerSessions::kReplacedPerId + 1)}] = "evaluator";
  // s0 was pushed out of the bounded list (it reads as a restart); s2 is still remembered.
  EXPECT_FALSE(s.on_hello(hello("gpu0", "s0", "n"), live));
  live.roles[{"gpu0", "s0"}] = "evaluator";
  EXPECT_TRUE(s.on_hello(hello("gpu0", "s2", "n"), live).has_value());

  WorkerSessions full;
  Connected none;
  for (size_t i = 0; i < WorkerSessions::kMaxIds; ++i)
    full.on_hello(hello("w" + std::to_string(i), "s", "n"), none);
  ASSERT_EQ(full.tracked_ids(), WorkerSessions::kMaxIds);
  // A new id when the table is full: the ids not connected now are forgotten.
  Connected one;
  one.roles[{"w7", "s"}] = "evaluator";
  full.on_hello(hello("w-new", "s", "n"), one);
  EXPECT_EQ(full.tracked_ids(), 2u);
}

}  // namespace
}  // namespace kiln::coordinator
