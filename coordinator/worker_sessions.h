// Which process speaks for a worker id. A worker process sends one session value in every hello
// (Hello::session, made by net::WorkerLink), reconnects included. A new session under a known id
// is a restart: the old process is gone, and the new one takes the id over. An id whose sessions
// alternate has two live processes: their DEALER sockets carry the id as their identity, so they
// take the routing id from each other (ROUTER_HANDOVER) and each re-announces itself when the
// other has it. The session that comes back after it was replaced is the one to stop.
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
  // the ids that `connected` does not hold are forgotten).
  static constexpr size_t kReplacedPerId = 16;
  static constexpr size_t kMaxIds = 65536;

  struct Conflict {
    std::string other_node;  // the node of the session that replaced this one
  };

  // Records `hello`'s session for its worker id. Returns a conflict when that session was
  // replaced by another that is still the id's current one: two live processes share the id, and
  // this hello's process should be refused. A hello without a session (an older worker) is not
  // tracked. `connected(worker_id)` says whether a worker id is connected now (used only when the
  // table is full).
  template <class Connected>
  std::optional<Conflict> on_hello(const proto::Hello& hello, const Connected& connected) {
    if (hello.session.empty() || hello.worker_id.empty()) return std::nullopt;
    if (ids_.size() >= kMaxIds && !ids_.count(hello.worker_id)) {
      std::erase_if(ids_, [&](const auto& entry) { return !connected(entry.first); });
    }
    return record(ids_[hello.worker_id], hello);
  }

  size_t tracked_ids() const { return ids_.size(); }

 private:
  struct Session {
    std::string id;
    std::string node;
  };
  struct Id {
    Session current;
    std::deque<Session> replaced;  // oldest first
  };
  static std::optional<Conflict> record(Id& id, const proto::Hello& hello);

  std::map<std::string, Id> ids_;
};

}  // namespace kiln::coordinator
