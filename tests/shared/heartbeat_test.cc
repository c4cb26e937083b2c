// Tests of the Paranoid Pirate liveness logic, driven by a fake clock (plain time points).
#include "shared/heartbeat.h"

#include <gtest/gtest.h>

namespace kiln::net {
namespace {

using std::chrono::milliseconds;

const SteadyTime kStart = SteadyTime() + std::chrono::hours(1);

TEST(HeartbeatPeerLiveness, DeclaresServerDeadAfterExactlyThreeSilentIntervals) {
  PeerLiveness liveness(HeartbeatPolicy{}, kStart);
  EXPECT_EQ(liveness.remaining_liveness(kStart), 3);
  EXPECT_EQ(liveness.remaining_liveness(kStart + milliseconds(1000)), 2);
  EXPECT_EQ(liveness.remaining_liveness(kStart + milliseconds(2999)), 1);
  EXPECT_FALSE(liveness.server_dead(kStart + milliseconds(2999)));
  EXPECT_TRUE(liveness.server_dead(kStart + milliseconds(3000)));
  EXPECT_EQ(liveness.remaining_liveness(kStart + milliseconds(3000)), 0);
  EXPECT_EQ(liveness.remaining_liveness(kStart + milliseconds(9000)), 0);
}

TEST(HeartbeatPeerLiveness, AnyMessageResetsTheCountdown) {
  PeerLiveness liveness(HeartbeatPolicy{}, kStart);
  liveness.on_message(kStart + milliseconds(2500));
  EXPECT_FALSE(liveness.server_dead(kStart + milliseconds(3000)));
  EXPECT_FALSE(liveness.server_dead(kStart + milliseconds(5499)));
  EXPECT_EQ(liveness.remaining_liveness(kStart + milliseconds(5499)), 1);
  EXPECT_TRUE(liveness.server_dead(kStart + milliseconds(5500)));
}

TEST(HeartbeatPeerLiveness, SendsHeartbeatOnlyAfterAnIntervalWithoutSending) {
  PeerLiveness liveness(HeartbeatPolicy{}, kStart);
  EXPECT_FALSE(liveness.should_send_heartbeat(kStart + milliseconds(999)));
  EXPECT_TRUE(liveness.should_send_heartbeat(kStart + milliseconds(1000)));
  liveness.mark_heartbeat_sent(kStart + milliseconds(1200));
  EXPECT_FALSE(liveness.should_send_heartbeat(kStart + milliseconds(2199)));
  EXPECT_TRUE(liveness.should_send_heartbeat(kStart + milliseconds(2200)));
  // Receiving does not replace sending: the server needs our heartbeats too.
  liveness.on_message(kStart + milliseconds(2200));
  EXPECT_TRUE(liveness.should_send_heartbeat(kStart + milliseconds(2200)));
}

TEST(HeartbeatPeerLiveness, ReconnectDelaysDoubleToTheCapAndResetOnMessage) {
  PeerLiveness liveness(HeartbeatPolicy{}, kStart);
  const int expected_s[] = {1, 2, 4, 8, 16, 32, 32};
  for (int seconds : expected_s) {
    EXPECT_EQ(liveness.next_reconnect_delay(), std::chrono::seconds(seconds));
  }
  liveness.on_message(kStart + milliseconds(100));
  EXPECT_EQ(liveness.next_reconnect_delay(), std::chrono::seconds(1));
  EXPECT_EQ(liveness.next_reconnect_delay(), std::chrono::seconds(2));
}

TEST(HeartbeatPeerLiveness, ReconnectRestoresTheCountdownButKeepsTheBackoff) {
  PeerLiveness liveness(HeartbeatPolicy{}, kStart);
  ASSERT_TRUE(liveness.server_dead(kStart + milliseconds(3000)));
  EXPECT_EQ(liveness.next_reconnect_delay(), std::chrono::seconds(1));
  liveness.on_reconnect(kStart + milliseconds(4000));
  EXPECT_FALSE(liveness.server_dead(kStart + milliseconds(6999)));
  EXPECT_TRUE(liveness.server_dead(kStart + milliseconds(7000)));
  EXPECT_EQ(liveness.next_reconnect_delay(), std::chrono::seconds(2));
}

TEST(HeartbeatPeerLiveness, FollowsACustomPolicy) {
  HeartbeatPolicy policy{
      .interval_ms = 100, .liveness = 5, .reconnect_initial_ms = 50, .reconnect_max_ms = 120};
  PeerLiveness liveness(policy, kStart);
  EXPECT_FALSE(liveness.server_dead(kStart + milliseconds(499)));
  EXPECT_TRUE(liveness.server_dead(kStart + milliseconds(500)));
  EXPECT_EQ(liveness.next_reconnect_delay(), milliseconds(50));
  EXPECT_EQ(liveness.next_reconnect_delay(), milliseconds(100));
  EXPECT_EQ(liveness.next_reconnect_delay(), milliseconds(120));
  EXPECT_EQ(liveness.next_reconnect_delay(), milliseconds(120));
}

TEST(HeartbeatPeerTable, ExpiresPeersSilentForLivenessIntervals) {
  PeerTable table(HeartbeatPolicy{});
  table.touch("b", kStart);
  table.touch("a", kStart);
  table.touch("c", kStart + milliseconds(1000));
  EXPECT_EQ(table.size(), 3u);

  EXPECT_TRUE(table.expire(kStart + milliseconds(2999)).empty());
  table.touch("a", kStart + milliseconds(2999));  // any message keeps a peer alive
  EXPECT_EQ(table.expire(kStart + milliseconds(3000)), std::vector<std::string>{"b"});
  EXPECT_EQ(table.size(), 2u);
  EXPECT_FALSE(table.contains("b"));
  EXPECT_TRUE(table.expire(kStart + milliseconds(3999)).empty());
  EXPECT_EQ(table.expire(kStart + milliseconds(4000)), std::vector<std::string>{"c"});
  EXPECT_TRUE(table.expire(kStart + milliseconds(5998)).empty());
  EXPECT_EQ(table.expire(kStart + milliseconds(5999)), std::vector<std::string>{"a"});
  EXPECT_EQ(table.size(), 0u);
}

TEST(HeartbeatPeerTable, ExpireReturnsPeersSorted) {
  PeerTable table(HeartbeatPolicy{});
  for (const char* peer : {"w3", "w1", "w2"}) table.touch(peer, kStart);
  EXPECT_EQ(table.expire(kStart + milliseconds(3000)),
            (std::vector<std::string>{"w1", "w2", "w3"}));
}

TEST(HeartbeatPeerTable, ListsPeersDueAHeartbeatUntilSentTo) {
  PeerTable table(HeartbeatPolicy{});
  table.touch("a", kStart);
  table.touch("b", kStart + milliseconds(500));
  EXPECT_TRUE(table.peers_due_heartbeat(kStart + milliseconds(999)).empty());
  EXPECT_EQ(table.peers_due_heartbeat(kStart + milliseconds(1000)), std::vector<std::string>{"a"});
  table.mark_sent("a", kStart + milliseconds(1000));
  EXPECT_EQ(table.peers_due_heartbeat(kStart + milliseconds(1500)), std::vector<std::string>{"b"});
  // Hearing from a peer does not make a heartbeat to it unnecessary.
  table.touch("b", kStart + milliseconds(1500));
  EXPECT_EQ(table.peers_due_heartbeat(kStart + milliseconds(1500)), std::vector<std::string>{"b"});
  table.mark_sent("unknown", kStart);  // ignored
  EXPECT_EQ(table.size(), 2u);
  table.remove("a");
  EXPECT_EQ(table.size(), 1u);
}

}  // namespace
}  // namespace kiln::net
