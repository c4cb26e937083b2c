// Checks of ZeroMQ endpoints given by people (`kiln coordinator --bind`, `kiln evaluator
// --connect`, `kiln agent --connect`) before anything binds or connects: libzmq takes some bad
// endpoints without a word (a port above 65535 wraps around to another port), and others fail
// only later, with an error that does not name the option.
#pragma once

#include <netinet/in.h>

#include <optional>
#include <string_view>

#include "shared/status.h"

namespace kiln::net {

enum class EndpointUse { kBind, kConnect };

// OK when `endpoint` is one kiln can bind (kBind) or connect to (kConnect):
//   tcp://HOST:PORT   HOST: an IPv4 address, a host or interface name, or [an IPv6 address];
//                     `*` (every interface) only to bind. PORT: 1-65535, or `*` (a free port,
//                     read back from the socket) only to bind.
//   ipc://PATH        a unix socket path (not empty).
//   inproc://NAME     within one process only (tests).
// INVALID_ARGUMENT otherwise, with the endpoint, what is wrong and what is accepted.
Status validate_endpoint(std::string_view endpoint, EndpointUse use);

// The IPv6 address in `text` ("::1", "fe80::1%eth0": a zone after '%' of letters, digits, '-',
// '.' or '_' is allowed and left out), or nullopt when it is none. What goes in brackets, in a
// ZeroMQ endpoint and in `--http`.
std::optional<in6_addr> ipv6_address(std::string_view text);

}  // namespace kiln::net
