// See zap_auth.h. The thread owns the ZAP socket and the monitor socket; the owner talks to it over
// an inproc PAIR ("watch ENDPOINT", "stop"). Counters are atomics, read from any thread.
#include "shared/zap_auth.h"

#include "shared/text.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "shared/transport.h"

namespace kiln::net {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr size_t kCurveKeyBytes = 32;

std::atomic<uint64_t> g_instances{0};  // unique inproc names per authenticator

// The peer address of an accepted socket, "" when it is already gone.
std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "a local socket";
}

std::string handshake_failure(uint32_t code) {
  switch (code) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
      return "the peer does not use CURVE (a worker started without --curve-secret and "
             "--coordinator-key?)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
      return "the CURVE handshake did not decrypt (a worker with a wrong --coordinator-key?)";
    default: {
      char hex[16];
      std::snprintf(hex, sizeof hex, "0x%08x", code);
      return std::string("ZMTP protocol error ") + hex + " (not a kiln worker?)";
    }
  }
}

}  // namespace

// What the thread alone touches: the log's rate limit and the monitor's view of connections.
struct ZapAuthenticator::LogState {
  Clock::time_point window_start = Clock::now();
  int in_window = 0;
  uint64_t suppressed = 0;
  std::map<int, std::string> peers;  // fd -> address, from ACCEPTED to DISCONNECTED
  bool failure_pending = false;      // a handshake failed; its DISCONNECTED names the peer
  std::string pending_reason;

  // Logs `line` unless kLoggedPerMinute lines were logged in this minute (then counts it).
  void warn(const std::string& line) {
    const auto now = Clock::now();
    if (now - window_start >= std::chrono::minutes(1)) {
      window_start = now;
      in_window = 0;
    }
    if (in_window >= kLoggedPerMinute) {
      ++suppressed;
      return;
    }
    ++in_window;
    if (suppressed > 0) {
      spdlog::warn("{} ({} more refused handshake(s) were not logged)", line, suppressed);
      suppressed = 0;
    } else {
      spdlog::warn("{}", line);
    }
  }
};

ZapAuthenticator::ZapAuthenticator(zmq::context_t& context, AllowList allowed)
    : context_(&context), allowed_(std::move(allowed)), log_(std::make_unique<LogState>()) {}

Result<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::start(zmq::context_t& context,
                                                                  AllowList allowed) {
  if (allowed.names_by_key.empty())
    return invalid_argument("the allow-list is empty: no worker could connect");
  std::unique_ptr<ZapAuthenticator> auth(new ZapAuthenticator(context, std::move(allowed)));
  auth->control_endpoint_ = "inproc://kiln-zap-control-" + std::to_string(g_instances.fetch_add(1));
  try {
    auth->zap_ = zmq::socket_t(context, zmq::socket_type::rep);
    auth->zap_.set(zmq::sockopt::linger, 0);
    auth->zap_.bind(kZapEndpoint);
    auth->control_ = zmq::socket_t(context, zmq::socket_type::pair);
    auth->control_.set(zmq::sockopt::linger, 0);
    auth->control_.bind(auth->control_endpoint_);
  } catch (const zmq::error_t& error) {
    if (error.num() == EADDRINUSE) {
      return unavailable(std::string("another ZAP handler already serves this ZeroMQ context (") +
                         kZapEndpoint + ")");
    }
    return internal_error(std::string("starting the ZAP handler: ") + error.what());
  }
  auth->thread_ = std::thread([a = auth.get()] { a->serve(); });
  return auth;
}

ZapAuthenticator::~ZapAuthenticator() {
  try {
    control_.send(zmq::str_buffer("stop"), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // The context is shut down: the thread's poll fails with ETERM and it ends by itself.
  }
  if (thread_.joinable()) thread_.join();
}

Status ZapAuthenticator::watch(zmq::socket_t& socket) {
  const std::string endpoint = control_endpoint_ + "-monitor";
  constexpr int kEvents = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                          ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                          ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor(socket.handle(), endpoint.c_str(), kEvents) != 0) {
    return internal_error(std::string("monitoring the ROUTER's handshakes: ") +
                          zmq_strerror(zmq_errno()));
  }
  try {
    const std::string request = "watch " + endpoint;
    control_.send(zmq::buffer(request), zmq::send_flags::none);
    zmq::message_t ack;
    std::vector<zmq::pollitem_t> items = {{control_.handle(), 0, ZMQ_POLLIN, 0}};
    if (zmq::poll(items, std::chrono::milliseconds(5000)) == 0 || !control_.recv(ack) ||
        ack.to_string() != "ok") {
      return internal_error("the ZAP handler thread did not start watching handshakes");
    }
  } catch (const zmq::error_t& error) {
    return internal_error(std::string("asking the ZAP handler to watch handshakes: ") +
                          error.what());
  }
  return Status::ok();
}

AuthCounters ZapAuthenticator::counters() const {
  return {admitted_.load(), refused_keys_.load(), failed_handshakes_.load()};
}

void ZapAuthenticator::serve() {
  zmq::socket_t control, monitor;
  try {
    control = zmq::socket_t(*context_, zmq::socket_type::pair);
    control.set(zmq::sockopt::linger, 0);
    control.connect(control_endpoint_);
    for (;;) {
      std::vector<zmq::pollitem_t> items = {{zap_.handle(), 0, ZMQ_POLLIN, 0},
                                            {control.handle(), 0, ZMQ_POLLIN, 0}};
      if (monitor) items.push_back({monitor.handle(), 0, ZMQ_POLLIN, 0});
      try {
        zmq::poll(items, std::chrono::milliseconds(-1));
      } catch (const zmq::error_t& error) {
        if (error.num() == EINTR) continue;
        throw;
      }
      if (items[0].revents & ZMQ_POLLIN) answer(zap_);
      if (monitor && (items[2].revents & ZMQ_POLLIN)) on_monitor_event(monitor);
      if (items[1].revents & ZMQ_POLLIN) {
        zmq::message_t command;
        if (!control.recv(command, zmq::recv_flags::dontwait)) continue;
        const std::string text = command.to_string();
        if (text == "stop") break;
        if (text.rfind("watch ", 0) == 0) {
          monitor = zmq::socket_t(*context_, zmq::socket_type::pair);
          monitor.set(zmq::sockopt::linger, 0);
          monitor.connect(text.substr(6));
          control.send(zmq::str_buffer("ok"), zmq::send_flags::none);
        }
      }
    }
  } catch (const zmq::error_t& error) {
    if (error.num() != ETERM)
      spdlog::error("the ZAP handler stopped: {} (no worker can connect now)", error.what());
  }
  monitor.close();
  control.close();
  zap_.close();
}

void ZapAuthenticator::answer(zmq::socket_t& zap) {
  std::vector<std::string> parts;
  zmq::message_t part;
  do {
    if (!zap.recv(part, zmq::recv_flags::dontwait)) return;
    if (parts.size() < 8) parts.push_back(part.to_string());
  } while (part.more());
  // RFC 27 request: version, request id, domain, address, identity, mechanism, credentials...
  const std::string request_id = parts.size() > 1 ? parts[1] : "";
  const std::string address = parts.size() > 3 ? log_safe(parts[3]) : "an unknown address";
  std::string status = "400", text, user;
  if (parts.size() < 6 || parts[0] != "1.0") {
    text = "malformed ZAP request";
    log_->warn("refused a handshake from " + address + ": malformed ZAP request from libzmq");
  } else if (parts[2] != kZapDomain) {
    text = "unknown ZAP domain";
    log_->warn("refused a handshake from " + address + " on the unknown ZAP domain '" +
               log_safe(parts[2]) + "'");
  } else if (parts[5] != "CURVE" || parts.size() < 7 || parts[6].size() != kCurveKeyBytes) {
    text = "CURVE required";
    log_->warn("refused a handshake from " + address + ": mechanism '" + log_safe(parts[5]) +
               "', not CURVE");
  } else {
    char z85[kCurveKeyChars + 1] = {};
    zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(parts[6].data()), kCurveKeyBytes);
    auto it = allowed_.names_by_key.find(z85);
    if (it != allowed_.names_by_key.end()) {
      status = "200";
      text = "OK";
      user = it->second;
      admitted_.fetch_add(1);
      spdlog::debug("admitted worker key '{}' from {}", user, address);
    } else {
      text = "key not allowed";
      refused_keys_.fetch_add(1);
      log_->warn("refused a worker from " + address + ": its CURVE key " + log_safe(z85) +
                 " is not on the allow-list " + allowed_.source +
                 " (to admit it: `kiln keys allow --list FILE KEY.pub`, or put its .pub file in "
                 "the folder)");
    }
  }
  if (status != "200" && text != "key not allowed") failed_handshakes_.fetch_add(1);
  const std::string reply[] = {"1.0", request_id, status, text, user, ""};
  for (size_t i = 0; i < 6; ++i) {
    zap.send(zmq::buffer(reply[i]), i + 1 < 6 ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

void ZapAuthenticator::on_monitor_event(zmq::socket_t& monitor) {
  zmq::message_t head, where;
  if (!monitor.recv(head, zmq::recv_flags::dontwait)) return;
  if (head.more()) (void)monitor.recv(where, zmq::recv_flags::dontwait);
  if (head.size() < 6) return;
  uint16_t event = 0;
  uint32_t value = 0;
  std::memcpy(&event, head.data(), sizeof event);
  std::memcpy(&value, static_cast<const char*>(head.data()) + 2, sizeof value);
  LogState& s = *log_;
  auto report = [&](const std::string& address) {
    s.warn("refused a handshake from " +
           (address.empty() ? "an unknown address" : log_safe(address)) + ": " +
           s.pending_reason);
    s.failure_pending = false;
  };
  switch (event) {
    case ZMQ_EVENT_ACCEPTED:
      s.peers[static_cast<int>(value)] = peer_address(static_cast<int>(value));
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      if (s.failure_pending)
        report("");  // two failures before a disconnect: the first stays anonymous
      failed_handshakes_.fetch_add(1);
      s.failure_pending = true;
      s.pending_reason = event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                             ? handshake_failure(value)
                             : "the handshake failed (no detail from libzmq)";
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      break;  // the ZAP answer above counted and logged it, with the address
    case ZMQ_EVENT_DISCONNECTED: {
      auto it = s.peers.find(static_cast<int>(value));
      if (s.failure_pending) report(it == s.peers.end() ? "" : it->second);
      if (it != s.peers.end()) s.peers.erase(it);
      break;
    }
    default:
      break;
  }
}

}  // namespace kiln::net
