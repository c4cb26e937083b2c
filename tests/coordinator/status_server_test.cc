// The coordinator's HTTP endpoints on a real run (real Dispatcher, sockets, redis-server and a
// worker speaking the real protocol): /metrics passes promtool and its numbers are the run's,
// /status matches docs/status.schema.json and the engine's reports, the probes say what they
// should, and malformed and slow HTTP clients hammering the server during the run change nothing.
#include "coordinator/status_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "coordinator/engine.h"
#include "coordinator/run_observer.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/http_client.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

using namespace std::chrono_literals;

// Every sample of `name` (labels as written) -> value.
std::map<std::string, double> samples(const std::string& text, const std::string& name) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0) continue;
    const std::string rest = line.substr(name.size());
    if (!rest.empty() && rest[0] != '{' && rest[0] != ' ') continue;  // a longer name
    const size_t sp = line.rfind(' ');
    out[line.substr(name.size(), sp - name.size())] = std::stod(line.substr(sp + 1));
  }
  return out;
}

double sum_where(const std::map<std::string, double>& s, const std::string& must_contain) {
  double total = 0;
  for (const auto& [labels, v] : s) {
    if (labels.find(must_contain) != std::string::npos) total += v;
  }
  return total;
}

// Malformed and slow clients, bounded in number and time.
void abuse(uint16_t port, std::atomic<bool>& stop) {
  const std::vector<std::string> junk = {"\x01\x02\x03\r\n\r\n", "POST /metrics HTTP/1.1\r\n\r\n",
                                         "GET /status HTTP/9\r\n\r\n",
                                         "GET /" + std::string(5000, 'x') + " HTTP/1.1\r\n\r\n",
                                         "GET /metrics HTTP/1.1\r\nbroken header\r\n\r\n"};
  std::vector<int> slow;
  for (int round = 0; round < 200 && !stop.load(); ++round) {
    testing::HttpReply r = testing::http_get(
        port, "/" + std::to_string(round) + "\r\n" + junk[round % junk.size()], 500);
    (void)r;
    if (round < 80) {  // half-sent requests held open: more than the server's 64 connections
      const int fd = testing::connect_loopback(port);
      if (fd < 0) continue;
      send(fd, "GET /met", 8, MSG_NOSIGNAL);
      slow.push_back(fd);
    }
    std::this_thread::sleep_for(5ms);
  }
  for (int fd : slow) close(fd);
}

class StatusServerTest : public EngineFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start_store());
    ASSERT_NE(add_target("rmsnorm"), nullptr);
  }
};

TEST_F(StatusServerTest, MetricsAndStatusAreTheRunsAndSurviveAbusiveClients) {
  auto d = test_dispatcher(ctx_, *store_);
  ASSERT_NE(d, nullptr);
  EngineOptions eo;
  eo.backend = "cpu";
  eo.toolchain = "kiln-test";
  eo.limits.max_proposals_without_gain = 100000;
  Engine engine(targets_, *d, eo, &*store_);
  std::atomic<bool> stop{false};
  testing::SyntheticWorkerOptions wo;
  wo.limit = 12;
  wo.stop_after = &stop;
  wo.worker_id = "synthetic-0";
  testing::SyntheticWorker worker(ctx_, d->endpoint(), wo);

  auto started = StatusServer::start({.bind = "127.0.0.1:0"});
  ASSERT_TRUE(started.is_ok()) << started.status().to_string();
  std::unique_ptr<StatusServer> http = std::move(started).value();
  const uint16_t port =
      static_cast<uint16_t>(std::stoi(http->url().substr(http->url().rfind(':') + 1)));
  EXPECT_EQ(testing::http_get(port, "/readyz").status, 503);

  RunObserver observer({"run", "cpu", 0});
  std::atomic<bool> abuse_stop{false};
  std::thread abuser([&] { abuse(port, abuse_stop); });
  int live_scrapes = 0;
  std::thread scraper([&] {  // a well-behaved Prometheus meanwhile
    while (!abuse_stop.load()) {
      const int code = testing::http_get(port, "/metrics", 2000).status;
      if (code == 200) ++live_scrapes;
      std::this_thread::sleep_for(100ms);
    }
  });
  std::this_thread::sleep_for(500ms);  // the bad clients are in before the run starts
  std::thread guard([&] {
    for (int i = 0; i < 600 && !stop.load(); ++i) std::this_thread::sleep_for(100ms);
    stop.store(true);
  });
  // As `kiln run` does: a first publish before the loop starts, then one per progress call.
  observer.observe(engine, *d, &*store_);
  http->publish(observer.status_json(), observer.metrics_text(), true, "");
  Status ran = engine.run(stop, [&](const std::vector<TargetReport>&) {
    observer.observe(engine, *d, &*store_);
    http->publish(observer.status_json(), observer.metrics_text(), !engine.finished(),
                  "the run is over");
  });
  stop.store(true);  // the run is over: the guard can go
  guard.join();
  abuse_stop.store(true);
  abuser.join();
  scraper.join();
  ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  EXPECT_GT(live_scrapes, 0) << "a scraper was never served while bad clients held connections";
  observer.observe(engine, *d, &*store_);
  http->publish(observer.status_json(), observer.metrics_text(), false, "the run is over");

  // /metrics: promtool's checks, then the numbers against the engine's own.
  testing::HttpReply m = testing::http_get(port, "/metrics");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_NE(m.head.find("text/plain; version=0.0.4"), std::string::npos);
  const std::string file = ::testing::TempDir() + "/kiln-metrics.txt";
  std::ofstream(file) << m.body;
  std::string promtool;
  int rc = testing::run_command("promtool check metrics < " + file + " 2>&1", &promtool);
  EXPECT_EQ(rc, 0) << "promtool (Debian's prometheus package; scripts/bootstrap installs it): "
                   << promtool;

  const std::vector<proto::EvaluationResult>& results = engine.results();
  EXPECT_TRUE(engine.finished());
  ASSERT_GE(results.size(),
            3u);  // seed, template, children until the space around the best is spent
  size_t verified = 0;
  for (const auto& r : results) verified += r.outcome == proto::Outcome::kVerified;
  auto evals = samples(m.body, "kiln_evaluations_total");
  EXPECT_EQ(sum_where(evals, "outcome=\"verified\""), static_cast<double>(verified)) << m.body;
  EXPECT_EQ(sum_where(evals, "target=\"rmsnorm\""), static_cast<double>(results.size()));
  auto count = samples(m.body, "kiln_evaluation_duration_seconds_count");
  EXPECT_EQ(sum_where(count, "rmsnorm"), static_cast<double>(results.size()));
  auto inf = samples(m.body, "kiln_evaluation_duration_seconds_bucket");
  EXPECT_EQ(sum_where(inf, "le=\"+Inf\""), static_cast<double>(results.size()));
  const TargetReport report = engine.reports().at(0);
  auto best = samples(m.body, "kiln_best_time_seconds");
  ASSERT_EQ(best.size(), 1u);
  EXPECT_NEAR(best.begin()->second, report.best_us * 1e-6, 1e-12);
  EXPECT_EQ(samples(m.body, "kiln_children_kept_total").begin()->second,
            static_cast<double>(report.accepted));
  auto workers = samples(m.body, "kiln_workers");
  EXPECT_EQ(sum_where(workers, "role=\"evaluator\""), 1.0) << m.body;
  EXPECT_EQ(sum_where(workers, "role=\"agent\""), 0.0);
  EXPECT_EQ(samples(m.body, "kiln_run_finished").begin()->second, 1.0);
  EXPECT_EQ(samples(m.body, "kiln_leases_requeued_total").begin()->second,
            static_cast<double>(d->stats().requeued));
  EXPECT_EQ(m.body.find("t1-"), std::string::npos) << "a task id became a label";

  // The Grafana dashboard (deploy/grafana) asks only for metrics the coordinator writes.
  const nlohmann::json dash = nlohmann::json::parse(
      testing::read_file(std::string(KILN_SOURCE_DIR) + "/deploy/grafana/kiln-dashboard.json"));
  const std::regex metric_name("kiln_[a-z_]+");
  size_t queries = 0;
  for (const auto& panel : dash["panels"]) {
    for (const auto& target : panel["targets"]) {
      const std::string expr = target["expr"];
      ++queries;
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric_name), end; it != end; ++it) {
        std::string name = it->str();
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
          if (name.ends_with(suffix) && m.body.find("# TYPE " + name + " ") == std::string::npos)
            name.resize(name.size() - std::string(suffix).size());
        }
        EXPECT_NE(m.body.find("# TYPE " + name + " "), std::string::npos)
            << "panel '" << panel["title"] << "' asks for " << name
            << ", which /metrics does not have";
      }
    }
  }
  EXPECT_GE(queries, 10u);

  // /status: the schema, and the engine's numbers.
  testing::HttpReply s = testing::http_get(port, "/status");
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(testing::status_schema_problem(s.body), "");
  nlohmann::json j = nlohmann::json::parse(s.body);
  EXPECT_EQ(j["run"]["state"], "finished");
  EXPECT_EQ(j["targets"][0]["evaluations"], report.evaluations);
  EXPECT_EQ(j["targets"][0]["best_id"], report.best_id);
  EXPECT_EQ(j["workers"][0]["worker_id"], "synthetic-0");

  EXPECT_EQ(testing::http_get(port, "/healthz").status, 200);
  testing::HttpReply ready = testing::http_get(port, "/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_NE(ready.body.find("the run is over"), std::string::npos);
  EXPECT_GT(http->counters().refused, 0u);
}

TEST(StatusServer, ProbesFollowTheLoop) {
  StatusServerOptions o;
  o.bind = "127.0.0.1:0";
  o.stall_after = 300ms;
  o.lag_after = 300ms;
  auto started = StatusServer::start(o);
  ASSERT_TRUE(started.is_ok());
  std::unique_ptr<StatusServer> http = std::move(started).value();
  const uint16_t port =
      static_cast<uint16_t>(std::stoi(http->url().substr(http->url().rfind(':') + 1)));
  EXPECT_EQ(testing::http_get(port, "/healthz").status, 200) << "starting counts as alive";
  EXPECT_EQ(testing::http_get(port, "/status").status, 503);
  http->publish("{}", "", true, "");
  EXPECT_EQ(testing::http_get(port, "/readyz").status, 200);
  std::this_thread::sleep_for(500ms);  // the loop stops publishing
  testing::HttpReply lag = testing::http_get(port, "/readyz");
  EXPECT_EQ(lag.status, 503);
  EXPECT_NE(lag.body.find("has not reported"), std::string::npos);
  EXPECT_EQ(testing::http_get(port, "/healthz").status, 503);
  testing::HttpReply page = testing::http_get(port, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("fetch(\"status\""), std::string::npos);
  EXPECT_EQ(page.body.find("http://"), std::string::npos)
      << "the live page loads nothing from elsewhere";
  EXPECT_EQ(page.body.find("https://"), std::string::npos);
  EXPECT_EQ(page.body.find("innerHTML"), std::string::npos)
      << "peer-supplied text must go in as text";
  EXPECT_EQ(testing::http_get(port, "/nope").status, 404);
}

TEST(PrometheusLabel, EscapesWhatTheFormatNeeds) {
  EXPECT_EQ(prometheus_label("NVIDIA H100 \"80GB\"\\x\ny"), "NVIDIA H100 \\\"80GB\\\"\\\\x\\ny");
}

}  // namespace
}  // namespace kiln::coordinator
