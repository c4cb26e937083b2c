// The coordinator's gatekeeper: a ZAP handler (ZeroMQ RFC 27, served on inproc://zeromq.zap.01 by
// a thread of its own) that admits a CURVE handshake only when the worker's public key is on the
// allow-list, and hands the key's name back as the connection's User-Id (RoutedMessage::user_id).
// It also watches the ROUTER's handshakes (a socket monitor) for the ones that fail before the key
// can be checked -- a worker without CURVE, or one with a wrong coordinator key -- so that every
// refusal is counted and logged: with the peer's address, peer-provided text escaped, and at most
// kLoggedPerMinute lines a minute (the rest are counted and summed up in the next line).
//
// One per zmq::context_t (the ZAP endpoint is per context), started before the ROUTER binds and
// destroyed after it closes. The ROUTER must set the ZAP domain and enforce it (RouterSocket::bind
// with a CurveServer does): then a handshake that finds no handler is refused, never admitted.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <zmq.hpp>

#include "shared/curve_keys.h"
#include "shared/status.h"

namespace kiln::net {

struct AuthCounters {
  uint64_t admitted = 0;           // handshakes whose key is on the allow-list
  uint64_t refused_keys = 0;       // CURVE handshakes with a key that is not
  uint64_t failed_handshakes = 0;  // failed before the key check: no CURVE, a wrong coordinator key
};

inline constexpr int kLoggedPerMinute = 10;

class ZapAuthenticator {
 public:
  // Binds the ZAP endpoint on `context` and starts the thread. kUnavailable when another handler
  // already serves this context.
  static Result<std::unique_ptr<ZapAuthenticator>> start(zmq::context_t& context,
                                                         AllowList allowed);
  ~ZapAuthenticator();  // stops the thread
  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

  // Reports handshakes of `socket` that fail before the ZAP check. Call from the thread that uses
  // `socket`, once, right after it binds.
  Status watch(zmq::socket_t& socket);

  AuthCounters counters() const;
  size_t allowed_keys() const { return allowed_.names_by_key.size(); }

 private:
  ZapAuthenticator(zmq::context_t& context, AllowList allowed);
  void serve();                     // the thread
  void answer(zmq::socket_t& zap);  // one ZAP request
  void on_monitor_event(zmq::socket_t& monitor);

  zmq::context_t* context_;
  AllowList allowed_;
  std::string control_endpoint_;
  zmq::socket_t zap_;      // owned by the thread once it runs
  zmq::socket_t control_;  // the owner's end of the control pair
  std::thread thread_;
  std::atomic<uint64_t> admitted_{0}, refused_keys_{0}, failed_handshakes_{0};
  struct LogState;
  std::unique_ptr<LogState> log_;  // touched only by the thread
};

}  // namespace kiln::net
