// The worker side of the coordinator protocol, shared by the evaluator and agent daemons: a DEALER
// with the worker's identity, message ids, and liveness in the Paranoid Pirate manner (a heartbeat
// when nothing else was sent for an interval; when the coordinator stays silent past its liveness,
// a back-off, a new socket under the same identity and a fresh hello), plus the answers every
// worker owes to a malformed message or to one its role does not take. The daemon keeps only
// what is its own: which messages are work, and what it announces.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "shared/heartbeat.h"
#include "shared/protocol.h"
#include "shared/status.h"
#include "shared/transport.h"

namespace kiln::net {

class WorkerLink {
 public:
  // Connects to the coordinator at `endpoint` as `worker_id` (the DEALER's identity, kept across
  // reconnects). `role` ("an evaluator", "an agent") names the worker in the errors it sends back.
  // `curve`: the worker's keypair and the coordinator's public key (docs/security.md), kept across
  // reconnects; empty: no CURVE.
  static Result<WorkerLink> connect(zmq::context_t& context, const std::string& endpoint,
                                    const std::string& worker_id, const HeartbeatPolicy& heartbeat,
                                    std::string role, const CurveClient& curve = {});

  // Sends one message (a failure is logged: the liveness countdown decides about the link). A
  // hello gets this link's session (Hello::session), the same for every hello the link sends. A
  // result or proposal ends the worker's hold on its task (see receive()).
  void send(proto::Message body);

  const std::string& session() const { return session_; }

  // Tasks received and not yet answered.
  size_t tasks_held() const { return held_tasks_.size(); }

  // Waits up to timeout_ms for a message the worker must act on. Heartbeats and errors from the
  // coordinator only prove it alive (nothing is returned), except that an kErrorUnknownPeer
  // error (the coordinator does not know this worker: it never got the hello, or dropped the
  // worker as silent) makes the next keep_alive() announce again, and a kErrorRefused error is
  // returned like a bye, unless it names another session (it was meant for another process with
  // this worker id: logged, nothing returned). A task (evaluate or propose) is held until send()
  // sends its answer; one sent again while held (the coordinator's route to this worker id moved
  // away and back and it handed the task out anew) is not returned: one answer serves both, and
  // the slot the copy took is offered back at once (a credit). A message that does not decode is
  // answered with an error reply and logged. An error: the socket itself failed (the context is
  // shut down); the daemon should stop.
  Result<std::optional<proto::Envelope>> receive(int timeout_ms);

  // Answers a well-formed message that this worker's role does not take.
  void refuse(const proto::Envelope& env);

  // What the worker does about a bye from the coordinator: nullopt: keep running (the coordinator
  // stopped without the run being over; the link reconnects and announces when it is back);
  // OK: stop, the run is finished; an error: stop, this worker was refused (the message says why
  // and what to do).
  std::optional<Status> after_bye(const proto::Bye& bye);

  // Call once per loop turn: sends a heartbeat when one is due; when the coordinator has been
  // silent past its liveness, waits the back-off (cut short when `stop` is set), reconnects and
  // calls `announce` (which sends the hello and credits again). Also announces at once when the
  // coordinator said it does not know this worker.
  void keep_alive(const std::atomic<bool>& stop, const std::function<void()>& announce);

 private:
  WorkerLink(DealerSocket dealer, const HeartbeatPolicy& heartbeat, std::string role, const std::string& worker_id);

  DealerSocket dealer_;
  proto::IdGenerator ids_;
  PeerLiveness liveness_;
  std::string role_;
  bool announce_due_ = false;  // the coordinator answered kErrorUnknownPeer
  std::string worker_id_;
  std::string session_;  // this process's Hello::session, stamped on every hello send() sends
  std::set<std::string> held_tasks_;  // ids of the tasks received and not yet answered
};

// The hello a worker of `role` sends after every (re)connect: this host's name, kiln's version.
// Every worker, test workers included, builds its hello here; the daemon adds what only it knows
// (an evaluator's GPU model, arch and target spec hashes).
proto::Hello worker_hello(std::string_view role, const std::string& worker_id, std::vector<std::string> backends,
                          uint32_t capacity);

// An evaluator's hello: worker_hello() plus its GPU model ("" on the cpu backend: the coordinator
// keeps one population per model and routes a model's tasks only to its evaluators), its arch,
// and the spec hash of every target it can load (the coordinator refuses an evaluator whose
// targets differ from the run's), and its compiler's toolchain version.
proto::Hello evaluator_hello(const std::string& worker_id, const std::string& backend,
                             uint32_t capacity, std::string gpu_model, std::string arch,
                             std::map<std::string, std::string> spec_hashes,
                             std::string toolchain = "");

}  // namespace kiln::net
