#include "shared/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <list>
#include <vector>

#include "shared/endpoint.h"

namespace kiln::net {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxTargetBytes = 2048;

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return status < 400 ? "OK" : "Error";
  }
}

std::string serialize(const HttpResponse& r, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  out += "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n";
  if (r.status == 405) out += "Allow: GET, HEAD\r\n";
  out += "\r\n";
  if (!head_only) out += r.body;
  return out;
}

HttpResponse plain(int status, std::string text) {
  return {status, "text/plain; charset=utf-8", std::move(text) + "\n"};
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// What a complete request head asks for: the request, or the error response to send instead.
struct Parsed {
  bool ok = false;
  HttpRequest request;
  HttpResponse error;
};

Parsed parse_head(std::string_view head) {
  Parsed p;
  auto bad = [&](int status, std::string why) {
    p.error = plain(status, std::move(why));
    return p;
  };
  size_t eol = head.find('\n');
  std::string_view line = head.substr(0, eol);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos)
    return bad(400, "malformed request line: expected 'METHOD /path HTTP/1.1'");
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), is_token_char))
    return bad(400, "malformed method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return bad(400, "unsupported HTTP version");
  if (target.size() > kMaxTargetBytes) return bad(414, "request target over 2048 bytes");
  if (target.empty() || target.front() != '/')
    return bad(400, "the request target must be a path starting with '/'");
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return bad(400, "control byte in the request target");
  }
  // Every header line must be NAME: VALUE (a request smuggling attempt or garbage is refused).
  size_t pos = eol == std::string_view::npos ? head.size() : eol + 1;
  while (pos < head.size()) {
    size_t next = head.find('\n', pos);
    std::string_view h =
        head.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    if (!h.empty() && h.back() == '\r') h.remove_suffix(1);
    pos = next == std::string_view::npos ? head.size() : next + 1;
    if (h.empty()) break;
    size_t colon = h.find(':');
    if (colon == 0 || colon == std::string_view::npos ||
        !std::all_of(h.begin(), h.begin() + static_cast<long>(colon), is_token_char))
      return bad(400, "malformed header line");
  }
  if (method != "GET" && method != "HEAD") return bad(405, "only GET and HEAD are served here");
  p.ok = true;
  p.request.method = std::string(method);
  size_t q = target.find('?');
  p.request.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) p.request.query = std::string(target.substr(q + 1));
  return p;
}

// Where a request head ends (the index after the blank line), or npos.
size_t head_end(const std::string& in) {
  size_t crlf = in.find("\r\n\r\n");
  size_t lf = in.find("\n\n");
  if (crlf == std::string::npos && lf == std::string::npos) return std::string::npos;
  if (crlf == std::string::npos) return lf + 2;
  if (lf == std::string::npos) return crlf + 4;
  return std::min(crlf + 4, lf + 2);
}

struct Connection {
  int fd = -1;
  bool writing = false;
  std::string in;
  std::string out;
  size_t sent = 0;
  Clock::time_point deadline;
};

// What to do about a failed bind, by its errno; empty where there is nothing useful to add.
std::string bind_hint(int err) {
  switch (err) {
    case EADDRINUSE:
      return " (is another process listening there? pick another port or 0 for a free one)";
    case EADDRNOTAVAIL:
      return " (no interface of this machine has that address: give one of its own addresses, "
             "127.0.0.1 for this machine only, or * for all)";
    case EACCES:
      return " (ports below 1024 need privileges: pick a port above 1023, or 0 for a free one)";
    default:
      return "";
  }
}

}  // namespace

Result<std::pair<std::string, uint16_t>> parse_host_port(const std::string& text) {
  const std::string hint =
      "'" + text + "' is not HOST:PORT (e.g. 127.0.0.1:9464, 0.0.0.0:9464, [::1]:9464)";
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) return invalid_argument(hint);
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    // Brackets hold an IPv6 address (a zone after '%' allowed), nothing else.
    if (!ipv6_address(host))
      return invalid_argument(hint + ": '[" + host + "]' is not an IPv6 address");
  }
  if (host.empty() || host.find_first_of("[]") != std::string::npos) return invalid_argument(hint);
  const std::string port_text = text.substr(colon + 1);
  if (port_text.size() > 5 || !std::all_of(port_text.begin(), port_text.end(), ::isdigit))
    return invalid_argument(hint);
  int port = std::stoi(port_text);
  if (port > 65535) return invalid_argument(hint + ": the port is over 65535");
  return std::make_pair(host, static_cast<uint16_t>(port));
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options, Handler handler) {
  KILN_ASSIGN_OR_RETURN(auto hp, parse_host_port(options.bind));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(hp.second);
  if (int rc = getaddrinfo(hp.first.c_str(), port_text.c_str(), &hints, &found); rc != 0) {
    return invalid_argument("HTTP bind " + options.bind + ": " + gai_strerror(rc));
  }
  std::string last_error = "no address";
  int last_errno = 0;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      last_errno = errno;
      last_error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0)
    return unavailable("HTTP bind " + options.bind + ": " + last_error + bind_hint(last_errno));
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  uint16_t port = addr.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  // The address as bound, in numbers: what url() writes ("*" and names resolved, a zone kept).
  char numeric[NI_MAXHOST] = {};
  std::string host = hp.first;
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, numeric, sizeof numeric, nullptr, 0,
                  NI_NUMERICHOST) == 0)
    host = numeric;
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return internal_error(std::string("eventfd: ") + std::strerror(errno));
  }
  return std::unique_ptr<HttpServer>(
      new HttpServer(std::move(options), std::move(handler), fd, wake, host, port));
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler, int listen_fd, int wake_fd,
                       std::string host, uint16_t port)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      host_(std::move(host)),
      port_(port) {
  thread_ = std::thread([this] { loop(); });
}

HttpServer::~HttpServer() {
  stop_.store(true);
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

std::string HttpServer::url() const {
  if (host_.find(':') == std::string::npos) return "http://" + host_ + ":" + std::to_string(port_);
  std::string v6;  // in a URL, a zone's '%' is written "%25" (RFC 6874)
  for (char c : host_) v6 += c == '%' ? std::string("%25") : std::string(1, c);
  return "http://[" + v6 + "]:" + std::to_string(port_);
}

HttpCounters HttpServer::counters() const {
  return {accepted_.load(), served_.load(), refused_.load(), timed_out_.load(), evicted_.load()};
}

void HttpServer::loop() {
  std::list<Connection> conns;  // oldest first
  auto close_conn = [&](std::list<Connection>::iterator it) {
    close(it->fd);
    return conns.erase(it);
  };
  auto respond = [&](Connection& c, const HttpResponse& r, bool head_only) {
    c.writing = true;
    c.in.clear();
    c.in.shrink_to_fit();
    c.out = serialize(r, head_only);
    c.sent = 0;
    c.deadline = Clock::now() + options_.response_timeout;
  };
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    Clock::time_point next = Clock::now() + std::chrono::seconds(1);
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.writing ? POLLOUT : POLLIN), 0});
      next = std::min(next, c.deadline);
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
    int ready =
        poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(wait + 1, 0, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (stop_.load() || (fds[0].revents & POLLIN)) break;
    // Connections first (their pollfds follow the two fixed ones, in list order), then new ones.
    size_t i = 2;
    for (auto it = conns.begin(); it != conns.end(); ++i) {
      Connection& c = *it;
      const short ev = fds[i].revents;
      if (ev == 0) {
        ++it;
        continue;
      }
      if (!c.writing && (ev & (POLLIN | POLLHUP | POLLERR))) {
        char buf[4096];
        ssize_t n = recv(c.fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          it = close_conn(it);
          continue;
        }
        if (n > 0) c.in.append(buf, static_cast<size_t>(n));
        size_t end = head_end(c.in);
        if (end == std::string::npos && c.in.size() > options_.max_request_bytes) {
          refused_++;
          respond(c,
                  plain(431, "request head over " + std::to_string(options_.max_request_bytes) +
                                 " bytes"),
                  false);
        } else if (end != std::string::npos) {
          Parsed p = parse_head(
              std::string_view(c.in).substr(0, std::min(end, options_.max_request_bytes + 4)));
          if (end > options_.max_request_bytes + 4) {
            refused_++;
            respond(c,
                    plain(431, "request head over " + std::to_string(options_.max_request_bytes) +
                                   " bytes"),
                    false);
          } else if (!p.ok) {
            refused_++;
            respond(c, p.error, false);
          } else {
            HttpResponse r;
            try {
              r = handler_(p.request);
            } catch (const std::exception& e) {
              r = plain(500, std::string("internal error: ") + e.what());
            } catch (...) {
              r = plain(500, "internal error");
            }
            served_++;
            respond(c, r, p.request.method == "HEAD");
          }
        }
      } else if (c.writing && (ev & (POLLOUT | POLLHUP | POLLERR))) {
        ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          it = close_conn(it);
          continue;
        }
        if (n > 0) c.sent += static_cast<size_t>(n);
        if (c.sent == c.out.size()) {
          shutdown(c.fd, SHUT_WR);
          it = close_conn(it);
          continue;
        }
      }
      ++it;
    }
    // Deadlines: a request head or a response that takes too long is given up on.
    const Clock::time_point now = Clock::now();
    for (auto it = conns.begin(); it != conns.end();) {
      if (now >= it->deadline) {
        timed_out_++;
        it = close_conn(it);
      } else {
        ++it;
      }
    }
    if (fds[1].revents & POLLIN) {
      while (true) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;  // EAGAIN, or a connection that went away before we took it
        accepted_++;
        if (conns.size() >= options_.max_connections) {
          // Room for the newcomer: the oldest connection still sending its request goes (a slow
          // client loses its place to a live one); when every one is being answered, the newcomer.
          auto victim = std::find_if(conns.begin(), conns.end(),
                                     [](const Connection& c) { return !c.writing; });
          evicted_++;
          if (victim == conns.end()) {
            close(fd);
            continue;
          }
          close_conn(victim);
        }
        Connection c;
        c.fd = fd;
        c.deadline = Clock::now() + options_.request_timeout;
        conns.push_back(std::move(c));
      }
    }
  }
  for (Connection& c : conns) close(c.fd);
}

}  // namespace kiln::net
