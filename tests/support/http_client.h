// A minimal HTTP/1.1 GET over a real loopback socket, for tests of the coordinator's endpoints.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::testing {

struct HttpReply {
  int status = -1;  // -1: no connection or no reply
  std::string head;
  std::string body;
};

// A TCP connection to 127.0.0.1:`port` (a blocking socket), or -1.
int connect_loopback(uint16_t port);

// GET `path` from 127.0.0.1:`port`; waits at most `timeout_ms` for the whole reply.
HttpReply http_get(uint16_t port, const std::string& path, int timeout_ms = 5000);

}  // namespace kiln::testing
