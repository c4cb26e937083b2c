// Paranoid Pirate liveness logic: countdowns and back-off computed from caller-supplied times.
#include "shared/heartbeat.h"

#include <algorithm>
#include <cstdint>

namespace kiln::net {

PeerLiveness::PeerLiveness(const HeartbeatPolicy& policy, SteadyTime now)
    : policy_(policy),
      last_heard_(now),
      last_sent_(now),
      reconnect_delay_(policy.reconnect_initial_ms) {}

void PeerLiveness::on_message(SteadyTime now) {
  last_heard_ = now;
  reconnect_delay_ = std::chrono::milliseconds(policy_.reconnect_initial_ms);
}

bool PeerLiveness::should_send_heartbeat(SteadyTime now) const {
  return now - last_sent_ >= policy_.interval();
}

void PeerLiveness::mark_heartbeat_sent(SteadyTime now) { last_sent_ = now; }

int PeerLiveness::remaining_liveness(SteadyTime now) const {
  // A clock that moved backwards (it cannot with steady_clock, but tests pass times) counts as 0.
  const auto silent = std::max(now - last_heard_, SteadyTime::duration::zero());
  const auto intervals = silent / policy_.interval();
  return static_cast<int>(std::max<int64_t>(0, policy_.liveness - intervals));
}

bool PeerLiveness::server_dead(SteadyTime now) const {
  return now - last_heard_ >= policy_.silence_limit();
}

std::chrono::milliseconds PeerLiveness::next_reconnect_delay() {
  const auto delay = reconnect_delay_;
  reconnect_delay_ =
      std::min(reconnect_delay_ * 2, std::chrono::milliseconds(policy_.reconnect_max_ms));
  return delay;
}

void PeerLiveness::on_reconnect(SteadyTime now) {
  last_heard_ = now;
  last_sent_ = now;
}

void PeerTable::touch(const std::string& peer, SteadyTime now) {
  auto [it, inserted] = peers_.try_emplace(peer, Entry{now, now});
  if (!inserted) it->second.last_heard = now;
}

void PeerTable::mark_sent(const std::string& peer, SteadyTime now) {
  auto it = peers_.find(peer);
  if (it != peers_.end()) it->second.last_sent = now;
}

std::vector<std::string> PeerTable::expire(SteadyTime now) {
  std::vector<std::string> expired;
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (now - it->second.last_heard >= policy_.silence_limit()) {
      expired.push_back(it->first);
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

std::vector<std::string> PeerTable::peers_due_heartbeat(SteadyTime now) const {
  std::vector<std::string> due;
  for (const auto& [peer, entry] : peers_) {
    if (now - entry.last_sent >= policy_.interval()) due.push_back(peer);
  }
  return due;
}

}  // namespace kiln::net
