// The coordinator's HTTP endpoints (docs/observe.md), served by one thread beside the search loop:
//   GET /          a live page (self-contained HTML) that refreshes itself from /status
//   GET /status    the run as JSON (docs/status.schema.json)
//   GET /metrics   Prometheus text format
//   GET /healthz   liveness: 200 while the search loop keeps publishing, 503 once it has not for
//                  `stall_after` (a loop stuck past its Redis retry window)
//   GET /readyz    readiness: 200 while the run is searching and the loop is current, 503 with why
//                  before the run has begun, after it finished, or while the loop lags
// The loop calls publish() with documents it built (run_observer.h); the HTTP thread only copies a
// shared pointer under a mutex, so neither side ever waits for the other's work.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "shared/http_server.h"
#include "shared/status.h"

namespace kiln::coordinator {

struct StatusServerOptions {
  std::string bind = "127.0.0.1:9464";
  // /healthz turns 503 after this long without a publish() (0: never).
  std::chrono::milliseconds stall_after{std::chrono::minutes(6)};
  // /readyz turns 503 after this long without a publish().
  std::chrono::milliseconds lag_after{std::chrono::seconds(15)};
};

class StatusServer {
 public:
  static Result<std::unique_ptr<StatusServer>> start(StatusServerOptions options);

  // From the search loop: the documents as of now; `searching` false before the run has begun
  // and once it is over (readiness), with `why` saying which.
  void publish(std::string status_json, std::string metrics_text, bool searching, std::string why);

  std::string url() const { return http_->url(); }
  net::HttpCounters counters() const { return http_->counters(); }

 private:
  struct Snapshot {
    std::string status_json;
    std::string metrics_text;
    bool searching = false;
    std::string why;
    std::chrono::steady_clock::time_point at;
  };
  explicit StatusServer(StatusServerOptions options);
  net::HttpResponse handle(const net::HttpRequest& request) const;
  std::shared_ptr<const Snapshot> snapshot() const;

  StatusServerOptions options_;
  std::chrono::steady_clock::time_point started_;
  mutable std::mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_;  // null before the first publish()
  std::unique_ptr<net::HttpServer> http_;     // last: stopped first
};

// The live page served at "/" (status_page.cc).
const std::string& status_page_html();

}  // namespace kiln::coordinator
