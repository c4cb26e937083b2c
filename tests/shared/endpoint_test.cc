#include "shared/endpoint.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::net {
namespace {

std::string why(std::string_view endpoint, EndpointUse use) {
  Status s = validate_endpoint(endpoint, use);
  return s.is_ok() ? "OK" : s.message();
}

TEST(Endpoint, AcceptsWhatTheCoordinatorAndWorkersUse) {
  for (const char* e : {"tcp://*:5555", "tcp://0.0.0.0:5555", "tcp://127.0.0.1:*", "tcp://eth0:1",
                        "tcp://[::1]:65535", "tcp://[fe80::1%eth0]:5555", "ipc:///tmp/kiln.sock",
                        "inproc://test"}) {
    EXPECT_EQ(why(e, EndpointUse::kBind), "OK") << e;
  }
  for (const char* e : {"tcp://10.0.0.5:5555", "tcp://coordinator-host:5555", "tcp://[::1]:1",
                        "ipc:///tmp/kiln.sock"}) {
    EXPECT_EQ(why(e, EndpointUse::kConnect), "OK") << e;
  }
}

TEST(Endpoint, APortAboveTheRangeIsRefusedInsteadOfWrappingAround) {
  const std::string w = why("tcp://0.0.0.0:99999", EndpointUse::kBind);
  EXPECT_NE(w.find("port '99999' is not in 1-65535"), std::string::npos) << w;
  EXPECT_NE(w.find("tcp://0.0.0.0:99999"), std::string::npos) << w;
  EXPECT_NE(why("tcp://0.0.0.0:0", EndpointUse::kBind).find("port '0'"), std::string::npos);
  EXPECT_NE(why("tcp://host:-1", EndpointUse::kConnect).find("port '-1'"), std::string::npos);
  EXPECT_NE(why("tcp://host:80x", EndpointUse::kConnect).find("port '80x'"), std::string::npos);
}

TEST(Endpoint, WildcardsAreForBindingOnly) {
  EXPECT_NE(why("tcp://*:5555", EndpointUse::kConnect).find("can be bound, not connected to"),
            std::string::npos);
  EXPECT_NE(why("tcp://10.0.0.5:*", EndpointUse::kConnect).find("can be bound, not connected to"),
            std::string::npos);
}

TEST(Endpoint, MissingPartsAndUnknownTransportsAreNamed) {
  EXPECT_NE(why("10.0.0.5:5555", EndpointUse::kConnect).find("needs a transport"),
            std::string::npos);
  EXPECT_NE(why("udp://10.0.0.5:5555", EndpointUse::kConnect).find("unknown transport 'udp'"),
            std::string::npos);
  EXPECT_NE(why("tcp://10.0.0.5", EndpointUse::kConnect).find("the port is missing"),
            std::string::npos);
  EXPECT_NE(why("tcp://[::1]", EndpointUse::kConnect).find("the port is missing"),
            std::string::npos);
  EXPECT_NE(why("tcp://:5555", EndpointUse::kBind).find("the host is missing"), std::string::npos);
  EXPECT_NE(why("tcp://1.2.3.999:5555", EndpointUse::kConnect).find("not an IPv4 address"),
            std::string::npos);
  EXPECT_NE(why("tcp://bad host:5555", EndpointUse::kConnect).find("not a host name"),
            std::string::npos);
  EXPECT_NE(why("ipc://", EndpointUse::kBind).find("name is missing"), std::string::npos);
}

// What goes in brackets must be an IPv6 address (a zone after '%' allowed): libzmq would take
// anything else for an interface or a name, and a worker would then retry it without end.
TEST(Endpoint, BracketsHoldOnlyAnIpv6Address) {
  for (const char* e : {"tcp://[::ffff:127.0.0.1]:5", "tcp://[0:0:0:0:0:0:0:1]:5",
                        "tcp://[fd00::5]:5555", "tcp://[::1%lo]:5"}) {
    EXPECT_EQ(why(e, EndpointUse::kConnect), "OK") << e;
  }
  for (const char* e :
       {"tcp://[zz]:5", "tcp://[g::1]:5", "tcp://[1:2:3:4:5:6:7:8:9]:5", "tcp://[eth0]:5",
        "tcp://[lo]:5", "tcp://[localhost]:5", "tcp://[127.0.0.1]:5", "tcp://[:]:5",
        "tcp://[::1%]:5", "tcp://[::1%a b]:5"}) {
    const std::string w = why(e, EndpointUse::kBind);
    EXPECT_NE(w.find("is not a bracketed IPv6 address"), std::string::npos) << e << ": " << w;
    EXPECT_NE(why(e, EndpointUse::kConnect), "OK") << e;
  }
}

}  // namespace
}  // namespace kiln::net
