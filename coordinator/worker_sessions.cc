// See worker_sessions.h.
#include "coordinator/worker_sessions.h"

#include <algorithm>

namespace kiln::coordinator {

std::optional<WorkerSessions::Conflict> WorkerSessions::record(
    Id& id, const proto::Hello& hello, const std::optional<std::string>& current_role) {
  if (id.current.id == hello.session) {
    id.current.node = hello.node;  // a reconnect of the current process
    id.current.role = hello.role;
    return std::nullopt;
  }
  auto earlier = std::find_if(id.replaced.begin(), id.replaced.end(),
                              [&](const Session& s) { return s.id == hello.session; });
  if (current_role) {
    const Conflict conflict{id.current.node, *current_role, id.current.id};
    if (earlier != id.replaced.end()) return conflict;  // came back while its successor lives
    if (*current_role != hello.role) return conflict;   // another role: not a restart
  }
  if (earlier != id.replaced.end()) id.replaced.erase(earlier);
  if (!id.current.id.empty()) {
    id.replaced.push_back(id.current);
    if (id.replaced.size() > kReplacedPerId) id.replaced.pop_front();
  }
  id.current = Session{hello.session, hello.node, hello.role};
  return std::nullopt;
}

}  // namespace kiln::coordinator
