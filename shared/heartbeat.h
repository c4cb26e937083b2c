// Paranoid Pirate liveness logic, with no sockets and no clock of its own: callers pass `now`, so
// tests are deterministic. PeerLiveness is a worker's view of the coordinator; PeerTable is the
// coordinator's view of its workers. Any message counts as a heartbeat, both ways.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace kiln::net {

using SteadyTime = std::chrono::steady_clock::time_point;

struct HeartbeatPolicy {
  int interval_ms = 1000;           // send a heartbeat after this long without sending anything
  int liveness = 3;                 // a peer silent for liveness * interval_ms is dead
  int reconnect_initial_ms = 1000;  // first back-off after the server is declared dead
  int reconnect_max_ms = 32000;     // back-off doubles up to this

  std::chrono::milliseconds interval() const { return std::chrono::milliseconds(interval_ms); }
  std::chrono::milliseconds silence_limit() const { return interval() * liveness; }
};

// A worker's view of the server. Typical loop: on every received message call on_message(now);
// when should_send_heartbeat(now), send one and call mark_heartbeat_sent(now) (also call it after
// any other send); when server_dead(now), sleep next_reconnect_delay(), reconnect the socket, send
// hello and call on_reconnect(now).
class PeerLiveness {
 public:
  // `now` counts as both the last message heard and the last one sent (the caller sends its hello
  // right after connecting).
  PeerLiveness(const HeartbeatPolicy& policy, SteadyTime now);

  // Any message from the server: resets the liveness countdown and the reconnect back-off.
  void on_message(SteadyTime now);

  // True when nothing was sent for at least one interval.
  bool should_send_heartbeat(SteadyTime now) const;
  void mark_heartbeat_sent(SteadyTime now);

  // Intervals of silence left before the server is declared dead (liveness .. 0).
  int remaining_liveness(SteadyTime now) const;

  // True once the server was silent for liveness * interval (exactly at that point, not before).
  bool server_dead(SteadyTime now) const;

  // The delay to wait before the next reconnect: reconnect_initial_ms, doubling on each call up to
  // reconnect_max_ms. on_message() starts the sequence over.
  std::chrono::milliseconds next_reconnect_delay();

  // The server said it is going away: it counts as dead from now (the caller reconnects with
  // back-off until it answers again).
  void mark_server_gone() { last_heard_ = SteadyTime{}; }

  // After reconnecting: the new connection gets a full liveness countdown; the back-off is kept
  // (only a message from the server proves it is back).
  void on_reconnect(SteadyTime now);

 private:
  HeartbeatPolicy policy_;
  SteadyTime last_heard_;
  SteadyTime last_sent_;
  std::chrono::milliseconds reconnect_delay_;
};

// The coordinator's view of its workers, keyed by routing id. Ordered, so results are sorted.
class PeerTable {
 public:
  explicit PeerTable(const HeartbeatPolicy& policy) : policy_(policy) {}

  // Any message from `peer`; adds it if new (a new peer counts as just sent to, since the
  // coordinator answers its hello).
  void touch(const std::string& peer, SteadyTime now);

  // Call after sending anything to `peer`, heartbeat or not. Ignores unknown peers.
  void mark_sent(const std::string& peer, SteadyTime now);

  // Removes and returns (sorted) the peers silent for at least liveness * interval.
  std::vector<std::string> expire(SteadyTime now);

  // Peers sent nothing for at least one interval (sorted); the caller heartbeats them and calls
  // mark_sent. Does not change the table.
  std::vector<std::string> peers_due_heartbeat(SteadyTime now) const;

  bool contains(const std::string& peer) const { return peers_.count(peer) != 0; }
  void remove(const std::string& peer) { peers_.erase(peer); }
  size_t size() const { return peers_.size(); }

 private:
  struct Entry {
    SteadyTime last_heard;
    SteadyTime last_sent;
  };
  HeartbeatPolicy policy_;
  std::map<std::string, Entry> peers_;
};

}  // namespace kiln::net
