// See worker_sessions.h.
#include "coordinator/worker_sessions.h"

#include <algorithm>

namespace kiln::coordinator {

std::optional<WorkerSessions::Conflict> WorkerSessions::record(Id& id, const proto::Hello& hello) {
  if (id.current.id == hello.session) {
    id.current.node = hello.node;  // a reconnect of the current process
    return std::nullopt;
  }
  const bool came_back = std::any_of(id.replaced.begin(), id.replaced.end(),
                                     [&](const Session& s) { return s.id == hello.session; });
  if (came_back) return Conflict{id.current.node};
  if (!id.current.id.empty()) {
    id.replaced.push_back(id.current);
    if (id.replaced.size() > kReplacedPerId) id.replaced.pop_front();
  }
  id.current = Session{hello.session, hello.node};
  return std::nullopt;
}

}  // namespace kiln::coordinator
