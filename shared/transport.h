// ZeroMQ transport: a ROUTER for the coordinator, a DEALER for workers and a Poller that lets one
// event loop wait on them and on inproc wake-up sockets. Payloads are opaque bytes; zmq errors
// never leave this API (they become Status).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>
#include <zmq.hpp>

#include "shared/status.h"

namespace kiln::net {

// Options applied to every socket before it binds or connects. ZMTP-level heartbeats stay off:
// liveness is the application's job (Paranoid Pirate, see shared/heartbeat.h), because it must
// also notice a peer whose process is alive but whose event loop is stuck.
struct SocketOptions {
  // Larger incoming messages make libzmq drop the message and close that connection.
  // Not enforced over inproc:// (no wire decoder there).
  int64_t max_message_bytes = int64_t{64} << 20;
  // How long close waits to flush queued outgoing messages; 0 drops them (workers: a dead
  // coordinator must not keep the process alive). The coordinator may raise it.
  int linger_ms = 0;
  // A send blocks at most this long when the peer's queue is full, then fails kUnavailable.
  int send_timeout_ms = 1000;
  int send_hwm = 1000;  // messages queued per peer before sends block
  int recv_hwm = 1000;
};

// One message as the ROUTER sees it. `peer` is the routing id: the DEALER's identity, or a binary
// id libzmq made up when the DEALER set none. Use it only as an opaque key.
// `user_id` is what the coordinator's ZAP handler (shared/zap_auth.h) named the peer's CURVE key
// when it admitted the connection; empty without CURVE.
struct RoutedMessage {
  std::string peer;
  std::string payload;
  std::string user_id;
};

// The ZAP domain kiln's ROUTER asks its handler about.
inline constexpr const char* kZapDomain = "kiln";

// CURVE on the coordinator's ROUTER: its own keypair (Z85, shared/curve_keys.h). Empty: no CURVE.
// With CURVE, every handshake is also put to the ZAP handler on the socket's context
// (shared/zap_auth.h); with none serving it, every worker is refused (never admitted unchecked).
struct CurveServer {
  std::string public_key;
  std::string secret_key;
  bool enabled() const { return !secret_key.empty(); }
};

// CURVE on a worker's DEALER: its own keypair and the coordinator's public key (Z85). Empty: no
// CURVE. A wrong server key or a key the coordinator does not admit fails the handshake: the
// DEALER sees no error, only silence (nothing is delivered either way).
struct CurveClient {
  std::string public_key;
  std::string secret_key;
  std::string server_key;
  bool enabled() const { return !server_key.empty(); }
};

// Coordinator side. Moveable, not copyable; the context must outlive the socket. Not thread-safe:
// use it from the thread that runs the event loop.
class RouterSocket {
 public:
  // Binds to `endpoint` ("tcp://127.0.0.1:*" picks a free port: read last_endpoint()).
  // ROUTER_MANDATORY is on (sending to an unknown peer is an error, not a silent drop) and
  // ROUTER_HANDOVER is on (a DEALER that reconnects with the same identity takes over its id even
  // if the old connection is not yet seen as closed).
  // Errors: kInvalidArgument for a malformed endpoint or unknown transport, kUnavailable when the
  // address is in use, kCancelled when the context is shut down.
  // Hazard: libzmq closes sockets in its I/O thread, so a port stays bound for a moment after the
  // RouterSocket is destroyed; rebinding it in the same process may need a retry.
  // `curve`: see CurveServer (kInvalidArgument for a malformed key).
  static Result<RouterSocket> bind(zmq::context_t& context, const std::string& endpoint,
                                   const SocketOptions& options, const CurveServer& curve = {});

  // Waits up to timeout_ms (>= 0) for one message. Empty optional: nothing arrived.
  // Accepts frames [identity, payload] (DEALER) and [identity, "", payload] (REQ-style envelope);
  // any other shape is dropped and reported as kInvalidArgument naming the peer, and the socket
  // stays usable. kCancelled once the context is shut down.
  Result<std::optional<RoutedMessage>> receive(int timeout_ms);

  // Sends [peer, payload]. kUnavailable if the peer is unknown or gone, or if its queue stays
  // full for send_timeout_ms. Never blocks longer than that.
  Status send(const std::string& peer, std::string_view payload);

  // The bound endpoint with the real port, e.g. "tcp://127.0.0.1:40123".
  const std::string& last_endpoint() const { return last_endpoint_; }

  // For Poller and socket monitors. Keep no copy of the handle past the socket's life.
  zmq::socket_t& handle() { return socket_; }

 private:
  RouterSocket(zmq::socket_t socket, std::string last_endpoint)
      : socket_(std::move(socket)), last_endpoint_(std::move(last_endpoint)) {}

  zmq::socket_t socket_;
  std::string last_endpoint_;
};

// "w-" and 16 random hex digits: a DEALER's identity when none is given, a worker's session.
std::string random_identity();

// Worker side. Moveable, not copyable; the context must outlive the socket. Not thread-safe.
class DealerSocket {
 public:
  // Connects to `endpoint` (libzmq connects in the background and reconnects by itself after
  // transient TCP failures). An empty `identity` is replaced by a random one ("w-" + 16 hex digits)
  // so that reconnect() keeps the same id on the ROUTER. A given identity must be 1..255 bytes and
  // must not start with a zero byte (kInvalidArgument otherwise).
  // `curve`: see CurveClient (kInvalidArgument for a malformed key); reconnect() keeps it.
  static Result<DealerSocket> connect(zmq::context_t& context, const std::string& endpoint,
                                      const SocketOptions& options, std::string identity = "",
                                      CurveClient curve = {});

  // Sends one frame. While not connected, messages queue up to send_hwm (they are delivered after
  // the connection comes up, possibly stale); kUnavailable when the queue stays full.
  Status send(std::string_view payload);

  // Waits up to timeout_ms (>= 0) for one single-frame message. Empty optional: nothing arrived.
  // A multi-frame message is dropped and reported as kInvalidArgument.
  Result<std::optional<std::string>> receive(int timeout_ms);

  // Closes the socket (dropping anything queued) and opens a new one with the same identity,
  // options, CURVE keys and endpoint: what Paranoid Pirate does when the server is declared dead.
  // Hazard: handle() returns a different socket afterwards.
  Status reconnect();

  const std::string& identity() const { return identity_; }
  const std::string& endpoint() const { return endpoint_; }
  zmq::socket_t& handle() { return socket_; }

 private:
  DealerSocket(zmq::context_t* context, std::string endpoint, SocketOptions options,
               std::string identity, CurveClient curve)
      : context_(context),
        endpoint_(std::move(endpoint)),
        options_(options),
        identity_(std::move(identity)),
        curve_(std::move(curve)) {}
  Status open();

  zmq::context_t* context_;  // not owned
  std::string endpoint_;
  SocketOptions options_;
  std::string identity_;
  CurveClient curve_;
  zmq::socket_t socket_;
};

// Waits until any of several sockets is readable, so one event loop can serve the ROUTER (or
// DEALER) and an inproc wake-up socket (e.g. a PAIR the compile pool signals on). The poller
// stores pointers: registered sockets must outlive it and must not be moved while registered.
// Wrapper sockets are looked up at each wait(), so DealerSocket::reconnect() is safe.
class Poller {
 public:
  // Each returns the index of the socket in wait()'s result.
  size_t add(RouterSocket& socket);
  size_t add(DealerSocket& socket);
  size_t add(zmq::socket_t& socket);

  // Waits up to timeout_ms (>= 0). ready[i] tells whether socket i has a message; all false when
  // the time passed with nothing readable. kCancelled once the context is shut down.
  Result<std::vector<bool>> wait(int timeout_ms);

  size_t size() const { return sockets_.size(); }

 private:
  std::vector<std::variant<RouterSocket*, DealerSocket*, zmq::socket_t*>> sockets_;
};

}  // namespace kiln::net
