// Which process speaks for a worker id. A worker process sends one session value in every hello
// (Hello::session, made by net::WorkerLink), reconnects included. Two processes started with one
// id take the coordinator's route to the id from each other (their DEALER sockets carry the id as
// their identity; ROUTER_HANDOVER), and each announces itself again when it loses it. So:
// - a new session under a known id is a restart and takes the id over, unless a live worker of
//   another role holds it (an agent is no restart of an evaluator): then the newcomer is refused;
// - a session that comes back after another replaced it is a second live process while the one
//   that replaced it is connected, and is refused; once that one has left or fallen silent, the
//   session takes its id back.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "shared/protocol.h"

namespace kiln::coordinator {

class WorkerSessions {
 public:
  // Sessions remembered per id after they were replaced, and ids remembered in all (beyond it,
  // the ids whose current session is not live are forgotten).
  static constexpr size_t kReplacedPerId = 16;
  static constexpr size_t kMaxIds = 65536;

  struct Conflict {
    std::string other_node;     // the host of the live process that holds the id
    std::string other_role;     // its role
    std::string other_session;  // its session
  };

  // Records `hello`'s session for its worker id, or returns the conflict that makes the coordinator
  // refuse it (and records nothing). `live(worker_id, session)`: the role of the connected worker
  // that holds `worker_id` under `session`, or nullopt when none is connected. A hello without a
  // session (an older worker) is not tracked.
  template <class Live>
  std::optional<Conflict> on_hello(const proto::Hello& hello, const Live& live) {
    if (hello.session.empty() || hello.worker_id.empty()) return std::nullopt;
    if (ids_.size() >= kMaxIds && !ids_.count(hello.worker_id)) {
      std::erase_if(ids_,
                    [&](const auto& e) { return !live(e.first, e.second.current.id).has_value(); });
    }
    Id& id = ids_[hello.worker_id];
    const std::optional<std::string> current_role =
        id.current.id.empty() ? std::nullopt : live(hello.worker_id, id.current.id);
    return record(id, hello, current_role);
  }

  size_t tracked_ids() const { return ids_.size(); }

 private:
  struct Session {
    std::string id;
    std::string node;
    std::string role;
  };
  struct Id {
    Session current;
    std::deque<Session> replaced;  // oldest first
  };
  // `current_role`: the role of the id's current session while it is connected, else nullopt.
  static std::optional<Conflict> record(Id& id, const proto::Hello& hello,
                                        const std::optional<std::string>& current_role);

  std::map<std::string, Id> ids_;
};

}  // namespace kiln::coordinator
