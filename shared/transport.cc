// ZeroMQ transport: ROUTER/DEALER wrappers and a Poller. Every zmq::error_t is caught here and
// turned into a Status; every wait has a finite timeout.
#include "shared/transport.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <random>
#include <type_traits>
#include <utility>

#include "shared/curve_keys.h"

// A draft option in libzmq 4.3 (stable in later releases): with it, a CURVE handshake that finds
// no ZAP handler is refused instead of admitted.
#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif

namespace kiln::net {
namespace {

using Clock = std::chrono::steady_clock;

// Frames of one multipart message; only the first kMaxKeptFrames are kept, the rest are counted.
constexpr size_t kMaxKeptFrames = 3;
constexpr size_t kMaxIdentityBytes = 255;

struct Frames {
  std::vector<std::string> parts;
  size_t count = 0;
  std::string user_id;  // the connection's ZAP user id (message property "User-Id")
};

Status cancelled(std::string message) { return {StatusCode::kCancelled, std::move(message)}; }

// Maps a libzmq error to kiln's codes, with `what` ("binding ROUTER to 'tcp://...'") as context.
Status zmq_status(const zmq::error_t& error, const std::string& what) {
  std::string message = what + ": " + error.what();
  switch (error.num()) {
    case ETERM:
      return cancelled(std::move(message) + " (context shut down)");
    case EAGAIN:
    case EHOSTUNREACH:
    case EADDRINUSE:
    case ECONNREFUSED:
      return unavailable(std::move(message));
    case EINVAL:
    case EPROTONOSUPPORT:
    case ENOCOMPATPROTO:
    case EADDRNOTAVAIL:
      return invalid_argument(std::move(message));
    case ENODEV:  // a bind to a name libzmq took for an interface: "localhost", "myhost"
      return invalid_argument(std::move(message) +
                              " (a bind takes an IP address such as 127.0.0.1, 0.0.0.0, [::1] or "
                              "[::], *, or a network interface's name such as eth0)");
    case EMFILE:
    case ENOMEM:
      return {StatusCode::kResourceExhausted, std::move(message)};
    default:
      return internal_error(std::move(message));
  }
}

// Routing ids are arbitrary bytes (libzmq's own start with a zero byte); print them readably.
std::string peer_label(std::string_view peer) {
  bool printable = !peer.empty();
  for (char c : peer) printable = printable && c >= 0x20 && c < 0x7f;
  if (printable) return "'" + std::string(peer) + "'";
  std::string hex = "0x";
  char byte[3];
  for (unsigned char c : peer) {
    std::snprintf(byte, sizeof byte, "%02x", c);
    hex += byte;
  }
  return hex;
}

Status validate(const SocketOptions& options) {
  if (options.max_message_bytes <= 0) return invalid_argument("max_message_bytes must be positive");
  if (options.linger_ms < 0) return invalid_argument("linger_ms must be >= 0 (no endless close)");
  if (options.send_timeout_ms < 0) return invalid_argument("send_timeout_ms must be >= 0");
  if (options.send_hwm < 0 || options.recv_hwm < 0) return invalid_argument("hwm must be >= 0");
  return Status::ok();
}

Status validate_timeout(int timeout_ms) {
  if (timeout_ms < 0) {
    return invalid_argument("timeout_ms must be >= 0, got " + std::to_string(timeout_ms));
  }
  return Status::ok();
}

// Throws zmq::error_t; callers catch.
// A tcp endpoint whose host is a bracketed IPv6 address ("tcp://[::1]:5555", "tcp://[::]:*")
// needs ZMQ_IPV6 on its socket. kiln sets it only then: with it, a host name would resolve to
// IPv6 addresses too, and a worker could then try a coordinator's IPv6 address that nothing
// listens on. A ROUTER bound to [::] takes IPv4 peers as well (libzmq maps them).
bool ipv6_endpoint(std::string_view endpoint) { return endpoint.rfind("tcp://[", 0) == 0; }

void apply_options(zmq::socket_t& socket, const SocketOptions& options) {
  socket.set(zmq::sockopt::maxmsgsize, options.max_message_bytes);
  socket.set(zmq::sockopt::linger, options.linger_ms);
  socket.set(zmq::sockopt::sndtimeo, options.send_timeout_ms);
  socket.set(zmq::sockopt::sndhwm, options.send_hwm);
  socket.set(zmq::sockopt::rcvhwm, options.recv_hwm);
  socket.set(zmq::sockopt::heartbeat_ivl, 0);  // app-level heartbeats only
}

// Polls `items` for up to timeout_ms; retries with the time left after EINTR. Returns whether any
// item is readable (their revents say which). Throws zmq::error_t other than EINTR.
bool poll_items(std::vector<zmq_pollitem_t>& items, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    try {
      return zmq::poll(items, left) > 0;
    } catch (const zmq::error_t& error) {
      if (error.num() != EINTR) throw;
      if (left.count() == 0) return false;
    }
  }
}

// Receives one whole multipart message if one is queued; empty when none is. Parts of a multipart
// message arrive together, so the later parts are read without waiting. Throws zmq::error_t.
std::optional<Frames> receive_frames_now(zmq::socket_t& socket) {
  Frames frames;
  zmq::message_t part;
  if (!socket.recv(part, zmq::recv_flags::dontwait)) return std::nullopt;
  for (;;) {
    // The routing-id frame a ROUTER made up after a poll carries no properties: ask every part.
    if (frames.user_id.empty()) {
      if (const char* user = zmq_msg_gets(part.handle(), "User-Id")) frames.user_id = user;
    }
    ++frames.count;
    if (frames.parts.size() < kMaxKeptFrames) frames.parts.push_back(part.to_string());
    if (!part.more()) return frames;
    if (!socket.recv(part, zmq::recv_flags::dontwait)) {
      // libzmq delivers parts atomically; a missing part would be a libzmq bug.
      frames.parts.clear();
      return frames;
    }
  }
}

Status validate(const CurveServer& curve) {
  if (!curve.enabled()) return Status::ok();
  if (!is_z85_key(curve.public_key) || !is_z85_key(curve.secret_key)) {
    return invalid_argument(
        "the CURVE server keys must be 40 Z85 characters each (see `kiln keys new`)");
  }
  return Status::ok();
}

Status validate(const CurveClient& curve) {
  if (!curve.enabled()) return Status::ok();
  if (!is_z85_key(curve.public_key) || !is_z85_key(curve.secret_key) ||
      !is_z85_key(curve.server_key)) {
    return invalid_argument(
        "CURVE needs the worker's public and secret keys and the coordinator's public key, 40 Z85 "
        "characters each (see `kiln keys new`)");
  }
  return Status::ok();
}

}  // namespace

std::string random_identity() {
  std::random_device device;
  uint64_t bits = (uint64_t{device()} << 32) | device();
  char text[32];
  std::snprintf(text, sizeof text, "w-%016llx", static_cast<unsigned long long>(bits));
  return text;
}

// ---- RouterSocket ----

Result<RouterSocket> RouterSocket::bind(zmq::context_t& context, const std::string& endpoint,
                                        const SocketOptions& options, const CurveServer& curve) {
  const std::string what = "binding ROUTER to '" + endpoint + "'";
  KILN_RETURN_IF_ERROR(validate(options).with_context(what));
  KILN_RETURN_IF_ERROR(validate(curve).with_context(what));
  try {
    zmq::socket_t socket(context, zmq::socket_type::router);
    apply_options(socket, options);
    socket.set(zmq::sockopt::router_mandatory, true);
    socket.set(zmq::sockopt::router_handover, true);
    if (ipv6_endpoint(endpoint)) socket.set(zmq::sockopt::ipv6, true);
    if (curve.enabled()) {
      socket.set(zmq::sockopt::curve_server, true);
      socket.set(zmq::sockopt::curve_secretkey, curve.secret_key);
      socket.set(zmq::sockopt::zap_domain, kZapDomain);
      const int enforce = 1;
      if (zmq_setsockopt(socket.handle(), ZMQ_ZAP_ENFORCE_DOMAIN, &enforce, sizeof enforce) != 0) {
        return unimplemented(what +
                             ": this libzmq cannot refuse CURVE peers when no ZAP handler answers "
                             "(ZMQ_ZAP_ENFORCE_DOMAIN); use libzmq 4.3 or later");
      }
    }
    socket.bind(endpoint);
    std::string last_endpoint = socket.get(zmq::sockopt::last_endpoint);
    return RouterSocket(std::move(socket), std::move(last_endpoint));
  } catch (const zmq::error_t& error) {
    return zmq_status(error, what);
  }
}

Result<std::optional<RoutedMessage>> RouterSocket::receive(int timeout_ms) {
  KILN_RETURN_IF_ERROR(validate_timeout(timeout_ms));
  std::optional<Frames> frames;
  try {
    std::vector<zmq_pollitem_t> items = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    if (!poll_items(items, timeout_ms)) return std::optional<RoutedMessage>();
    frames = receive_frames_now(socket_);
  } catch (const zmq::error_t& error) {
    return zmq_status(error, "receiving on ROUTER " + last_endpoint_);
  }
  if (!frames) return std::optional<RoutedMessage>();
  if (frames->parts.empty()) {
    return internal_error("ROUTER received an incomplete multipart message");
  }

  std::vector<std::string>& parts = frames->parts;
  if (frames->count == 2) {
    return std::optional<RoutedMessage>(
        RoutedMessage{std::move(parts[0]), std::move(parts[1]), std::move(frames->user_id)});
  }
  if (frames->count == 3 && parts[1].empty()) {
    return std::optional<RoutedMessage>(
        RoutedMessage{std::move(parts[0]), std::move(parts[2]), std::move(frames->user_id)});
  }
  return invalid_argument("dropped a message of " + std::to_string(frames->count) +
                          " frames from peer " + peer_label(parts[0]) +
                          " (expected [identity, payload] or [identity, \"\", payload])");
}

Status RouterSocket::send(const std::string& peer, std::string_view payload) {
  const std::string what = "sending to peer " + peer_label(peer);
  try {
    if (!socket_.send(zmq::buffer(peer), zmq::send_flags::sndmore) ||
        !socket_.send(zmq::buffer(payload), zmq::send_flags::none)) {
      return unavailable(what + ": its queue stayed full for the send timeout");
    }
  } catch (const zmq::error_t& error) {
    if (error.num() == EHOSTUNREACH) return unavailable(what + ": unknown or disconnected peer");
    return zmq_status(error, what);
  }
  return Status::ok();
}

// ---- DealerSocket ----

Result<DealerSocket> DealerSocket::connect(zmq::context_t& context, const std::string& endpoint,
                                           const SocketOptions& options, std::string identity,
                                           CurveClient curve) {
  const std::string what = "connecting DEALER to '" + endpoint + "'";
  KILN_RETURN_IF_ERROR(validate(options).with_context(what));
  KILN_RETURN_IF_ERROR(validate(curve).with_context(what));
  if (identity.empty()) identity = random_identity();
  if (identity.size() > kMaxIdentityBytes || identity[0] == '\0') {
    return invalid_argument(what + ": identity must be 1.." + std::to_string(kMaxIdentityBytes) +
                            " bytes and not start with a zero byte");
  }
  DealerSocket dealer(&context, endpoint, options, std::move(identity), std::move(curve));
  KILN_RETURN_IF_ERROR(dealer.open());
  return dealer;
}

Status DealerSocket::open() {
  try {
    zmq::socket_t socket(*context_, zmq::socket_type::dealer);
    apply_options(socket, options_);
    socket.set(zmq::sockopt::routing_id, identity_);
    if (ipv6_endpoint(endpoint_)) socket.set(zmq::sockopt::ipv6, true);
    if (curve_.enabled()) {
      socket.set(zmq::sockopt::curve_serverkey, curve_.server_key);
      socket.set(zmq::sockopt::curve_publickey, curve_.public_key);
      socket.set(zmq::sockopt::curve_secretkey, curve_.secret_key);
    }
    socket.connect(endpoint_);
    socket_ = std::move(socket);
  } catch (const zmq::error_t& error) {
    return zmq_status(error, "connecting DEALER to '" + endpoint_ + "'");
  }
  return Status::ok();
}

Status DealerSocket::send(std::string_view payload) {
  try {
    if (!socket_.send(zmq::buffer(payload), zmq::send_flags::none)) {
      return unavailable("sending to '" + endpoint_ + "': queue stayed full for the send timeout");
    }
  } catch (const zmq::error_t& error) {
    return zmq_status(error, "sending to '" + endpoint_ + "'");
  }
  return Status::ok();
}

Result<std::optional<std::string>> DealerSocket::receive(int timeout_ms) {
  KILN_RETURN_IF_ERROR(validate_timeout(timeout_ms));
  std::optional<Frames> frames;
  try {
    std::vector<zmq_pollitem_t> items = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    if (!poll_items(items, timeout_ms)) return std::optional<std::string>();
    frames = receive_frames_now(socket_);
  } catch (const zmq::error_t& error) {
    return zmq_status(error, "receiving from '" + endpoint_ + "'");
  }
  if (!frames) return std::optional<std::string>();
  if (frames->count != 1 || frames->parts.empty()) {
    return invalid_argument("dropped a message of " + std::to_string(frames->count) +
                            " frames from '" + endpoint_ + "' (expected one frame)");
  }
  return std::optional<std::string>(std::move(frames->parts[0]));
}

Status DealerSocket::reconnect() {
  socket_.close();
  return open().with_context("reconnecting");
}

// ---- Poller ----

size_t Poller::add(RouterSocket& socket) {
  sockets_.emplace_back(&socket);
  return sockets_.size() - 1;
}

size_t Poller::add(DealerSocket& socket) {
  sockets_.emplace_back(&socket);
  return sockets_.size() - 1;
}

size_t Poller::add(zmq::socket_t& socket) {
  sockets_.emplace_back(&socket);
  return sockets_.size() - 1;
}

Result<std::vector<bool>> Poller::wait(int timeout_ms) {
  KILN_RETURN_IF_ERROR(validate_timeout(timeout_ms));
  std::vector<zmq_pollitem_t> items;
  items.reserve(sockets_.size());
  for (size_t i = 0; i < sockets_.size(); ++i) {
    void* handle = std::visit(
        [](auto* socket) -> void* {
          if constexpr (std::is_same_v<decltype(socket), zmq::socket_t*>)
            return socket->handle();
          else
            return socket->handle().handle();
        },
        sockets_[i]);
    // A null socket in zmq_poll means "poll fd 0": refuse instead.
    if (handle == nullptr) {
      return failed_precondition("poller socket " + std::to_string(i) + " is closed");
    }
    items.push_back({handle, 0, ZMQ_POLLIN, 0});
  }
  std::vector<bool> ready(items.size(), false);
  try {
    if (!poll_items(items, timeout_ms)) return ready;
  } catch (const zmq::error_t& error) {
    return zmq_status(error, "polling " + std::to_string(items.size()) + " sockets");
  }
  for (size_t i = 0; i < items.size(); ++i) ready[i] = (items[i].revents & ZMQ_POLLIN) != 0;
  return ready;
}

}  // namespace kiln::net
