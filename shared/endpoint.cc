// validate_endpoint: transport, host and port of a ZeroMQ endpoint.
#include "shared/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cctype>
#include <string>

namespace kiln::net {
namespace {

bool all_of(std::string_view s, bool (*ok)(char)) {
  for (char c : s) {
    if (!ok(c)) return false;
  }
  return true;
}
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_';
}
// Dotted quad with every part 0-255.
bool is_ipv4(std::string_view host) {
  int parts = 0;
  while (true) {
    const size_t dot = host.find('.');
    const std::string_view part = host.substr(0, dot);
    if (part.empty() || part.size() > 3 || !all_of(part, is_digit)) return false;
    if (std::stoi(std::string(part)) > 255) return false;
    ++parts;
    if (dot == std::string_view::npos) break;
    host.remove_prefix(dot + 1);
  }
  return parts == 4;
}

std::string check_host(std::string_view host, EndpointUse use) {
  if (host.empty()) return "the host is missing";
  if (host == "*") {
    return use == EndpointUse::kBind ? "" : "'*' (every interface) can be bound, not connected to";
  }
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']' || !ipv6_address(host.substr(1, host.size() - 2))) {
      return "'" + std::string(host) +
             "' is not a bracketed IPv6 address (such as [::1] or [fd00::5]; an IPv4 address, an "
             "interface or a host name goes without brackets)";
    }
    return "";
  }
  // All digits and dots: it must be an IPv4 address (libzmq would look "1.2.3.999" up as a name).
  if (all_of(host, [](char c) { return is_digit(c) || c == '.'; })) {
    return is_ipv4(host) ? "" : "'" + std::string(host) + "' is not an IPv4 address";
  }
  if (!all_of(host, is_name_char) || host.front() == '-' || host.front() == '.') {
    return "'" + std::string(host) + "' is not a host name (letters, digits, '-', '.')";
  }
  return "";
}

std::string check_port(std::string_view port, EndpointUse use) {
  const std::string range = use == EndpointUse::kBind ? "1-65535, or * for a free port" : "1-65535";
  if (port.empty()) return "the port is missing (" + range + ")";
  if (port == "*") {
    return use == EndpointUse::kBind ? "" : "port * (a free port) can be bound, not connected to";
  }
  if (!all_of(port, is_digit) || port.size() > 5 || std::stoi(std::string(port)) < 1 ||
      std::stoi(std::string(port)) > 65535) {
    return "port '" + std::string(port) + "' is not in " + range;
  }
  return "";
}

}  // namespace

std::optional<in6_addr> ipv6_address(std::string_view text) {
  const size_t percent = text.find('%');
  if (percent != std::string_view::npos) {
    const std::string_view zone = text.substr(percent + 1);
    if (zone.empty() || !all_of(zone, is_name_char)) return std::nullopt;
  }
  const std::string address(text.substr(0, percent));
  in6_addr parsed{};
  if (inet_pton(AF_INET6, address.c_str(), &parsed) != 1) return std::nullopt;
  return parsed;
}

Status validate_endpoint(std::string_view endpoint, EndpointUse use) {
  const std::string quoted = "'" + std::string(endpoint) + "'";
  const std::string examples = use == EndpointUse::kBind
                                   ? "e.g. tcp://*:5555, tcp://10.0.0.5:5555, tcp://127.0.0.1:*"
                                   : "e.g. tcp://10.0.0.5:5555, tcp://coordinator-host:5555";
  const size_t scheme_end = endpoint.find("://");
  if (scheme_end == std::string_view::npos) {
    return invalid_argument(quoted + " is not an endpoint: it needs a transport, " + examples);
  }
  const std::string_view transport = endpoint.substr(0, scheme_end);
  const std::string_view address = endpoint.substr(scheme_end + 3);
  if (transport == "inproc" && use == EndpointUse::kConnect) {  // a worker is its own process
    return invalid_argument(quoted +
                            ": inproc:// reaches only the same process; use "
                            "tcp://HOST:PORT or ipc://PATH");
  }
  if (transport == "ipc" || transport == "inproc") {
    if (address.empty())
      return invalid_argument(quoted + ": the " + std::string(transport) + " name is missing");
    return Status::ok();
  }
  if (transport != "tcp") {
    return invalid_argument(quoted + ": unknown transport '" + std::string(transport) +
                            "' (use tcp://HOST:PORT, or ipc://PATH on one machine; " + examples +
                            ")");
  }
  const size_t colon = address.rfind(':');
  const size_t bracket = address.rfind(']');
  if (colon == std::string_view::npos || (bracket != std::string_view::npos && colon < bracket)) {
    return invalid_argument(quoted + ": the port is missing (tcp://HOST:PORT, " + examples + ")");
  }
  std::string why = check_host(address.substr(0, colon), use);
  if (why.empty()) why = check_port(address.substr(colon + 1), use);
  if (!why.empty()) return invalid_argument(quoted + ": " + why + " (" + examples + ")");
  return Status::ok();
}

}  // namespace kiln::net
