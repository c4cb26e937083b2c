#include "coordinator/status_server.h"

namespace kiln::coordinator {
namespace {

using Clock = std::chrono::steady_clock;

net::HttpResponse text(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body)};
}

long long seconds_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t).count();
}

}  // namespace

Result<std::unique_ptr<StatusServer>> StatusServer::start(StatusServerOptions options) {
  std::unique_ptr<StatusServer> s(new StatusServer(std::move(options)));
  net::HttpServerOptions http;
  http.bind = s->options_.bind;
  KILN_ASSIGN_OR_RETURN(
      s->http_, net::HttpServer::start(
                    http, [raw = s.get()](const net::HttpRequest& r) { return raw->handle(r); }));
  return s;
}

StatusServer::StatusServer(StatusServerOptions options)
    : options_(std::move(options)), started_(Clock::now()) {}

void StatusServer::publish(std::string status_json, std::string metrics_text, bool searching,
                           std::string why) {
  auto next = std::make_shared<Snapshot>(Snapshot{std::move(status_json), std::move(metrics_text),
                                                  searching, std::move(why), Clock::now()});
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(next);
}

std::shared_ptr<const StatusServer::Snapshot> StatusServer::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

net::HttpResponse StatusServer::handle(const net::HttpRequest& request) const {
  const std::shared_ptr<const Snapshot> s = snapshot();
  const std::string& path = request.path;
  if (path == "/healthz") {
    // Before the first publish the coordinator is starting (connecting to Redis, resuming): alive.
    const Clock::time_point last = s ? s->at : started_;
    if (options_.stall_after.count() > 0 && Clock::now() - last > options_.stall_after) {
      return text(503, "the search loop has not reported for " +
                           std::to_string(seconds_since(last)) + " s\n");
    }
    return text(200, "ok\n");
  }
  if (path == "/readyz") {
    if (!s) return text(503, "starting: the run has not begun\n");
    if (!s->searching) return text(503, s->why + "\n");
    if (Clock::now() - s->at > options_.lag_after) {
      return text(503, "the search loop has not reported for " +
                           std::to_string(seconds_since(s->at)) + " s\n");
    }
    return text(200, "ready\n");
  }
  if (path == "/status") {
    if (!s) return text(503, "starting: the run has not begun\n");
    return {200, "application/json", s->status_json};
  }
  if (path == "/metrics") {
    if (!s) return text(503, "starting: the run has not begun\n");
    return {200, "text/plain; version=0.0.4; charset=utf-8", s->metrics_text};
  }
  if (path == "/" || path == "/index.html")
    return {200, "text/html; charset=utf-8", status_page_html()};
  return text(404, "no page " + path.substr(0, 200) +
                       "; there are /, /status, /metrics, /healthz and /readyz\n");
}

}  // namespace kiln::coordinator
