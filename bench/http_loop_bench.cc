// Does serving HTTP cost the search loop anything? A loop that does what the coordinator's loop
// does for the endpoints -- build a /status and a /metrics document of a realistic size and
// publish() them -- is timed turn by turn (1 ms of "search work" per turn), first with no HTTP
// client, then while clients hammer the server: scrapers reading /metrics and /status as fast as
// they can, slow clients that dribble a request a byte at a time, and clients sending garbage.
// Prints the turn time and the publish() time (p50, p99, max) of both phases, and how many
// requests the well-behaved scrapers got answered. Results: bench/results/.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/status_server.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int dial(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool get(uint16_t port, const std::string& path) {
  int fd = dial(port);
  if (fd < 0) return false;
  const std::string req = "GET " + path + " HTTP/1.1\r\n\r\n";
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  char buf[65536];
  std::string head;
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
    if (head.size() < 16) head.append(buf, static_cast<size_t>(std::min<ssize_t>(n, 16)));
  }
  close(fd);
  return head.rfind("HTTP/1.1 200", 0) == 0;
}

struct Stats {
  double p50, p99, max;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[v.size() * 99 / 100], v.back()};
}

// A /status of 64 targets and 64 workers and a /metrics of the same run: about 40 KB and 60 KB.
std::string status_doc(int turn) {
  std::string s = "{\"turn\":" + std::to_string(turn) + ",\"targets\":[";
  for (int i = 0; i < 64; ++i)
    s += std::string(i ? "," : "") + "{\"target\":\"t" + std::to_string(i) +
         "\",\"state\":\"searching\",\"evaluations\":" + std::to_string(turn + i) +
         std::string(500, ' ') + "}";
  return s + "]}";
}
std::string metrics_doc(int turn) {
  std::string s;
  for (int i = 0; i < 800; ++i)
    s += "kiln_evaluations_total{target=\"t" + std::to_string(i % 64) +
         "\",gpu_model=\"NVIDIA H100 80GB HBM3\",outcome=\"verified\"} " + std::to_string(turn) +
         "\n";
  return s;
}

void phase(kiln::coordinator::StatusServer& server, int turns, const char* name) {
  std::vector<double> turn_us, publish_us;
  for (int t = 0; t < turns; ++t) {
    const auto start = Clock::now();
    std::this_thread::sleep_for(1ms);  // the search's own work in a turn
    std::string st = status_doc(t), me = metrics_doc(t);
    const auto p0 = Clock::now();
    server.publish(std::move(st), std::move(me), true, "");
    const auto end = Clock::now();
    publish_us.push_back(std::chrono::duration<double, std::micro>(end - p0).count());
    turn_us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  Stats a = stats(turn_us), b = stats(publish_us);
  std::printf(
      "%-34s turn us p50 %8.1f p99 %8.1f max %8.1f | publish us p50 %6.2f p99 %6.2f max %7.2f\n",
      name, a.p50, a.p99, a.max, b.p50, b.p99, b.max);
}

}  // namespace

int main(int argc, char** argv) {
  const int turns = argc > 1 ? std::atoi(argv[1]) : 3000;
  auto started = kiln::coordinator::StatusServer::start({.bind = "127.0.0.1:0"});
  if (!started.is_ok()) {
    std::fprintf(stderr, "%s\n", started.status().to_string().c_str());
    return 1;
  }
  auto& server = **started;
  const uint16_t port =
      static_cast<uint16_t>(std::stoi(server.url().substr(server.url().rfind(':') + 1)));
  server.publish(status_doc(0), metrics_doc(0), true, "");
  phase(server, turns, "no clients");

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> served{0}, failed{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {  // scrapers as fast as they can go
    clients.emplace_back([&, i] {
      while (!stop.load()) (get(port, i % 2 ? "/metrics" : "/status") ? served : failed)++;
    });
  }
  clients.emplace_back([&] {  // slow clients: 100 connections dribbling requests
    std::vector<int> fds;
    while (!stop.load()) {
      if (fds.size() < 100) {
        int fd = dial(port);
        if (fd >= 0) fds.push_back(fd);
      }
      for (int fd : fds) send(fd, "G", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(20ms);
    }
    for (int fd : fds) close(fd);
  });
  clients.emplace_back([&] {  // garbage
    while (!stop.load()) {
      int fd = dial(port);
      if (fd < 0) continue;
      send(fd, "\x16\x03\x01 not http\r\n\r\n", 18, MSG_NOSIGNAL);
      close(fd);
    }
  });
  std::this_thread::sleep_for(500ms);
  const uint64_t before = served.load();
  const auto t0 = Clock::now();
  phase(server, turns, "4 scrapers, 100 slow, garbage");
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  stop.store(true);
  for (auto& c : clients) c.join();
  const kiln::net::HttpCounters c = server.counters();
  std::printf(
      "scrapes answered 200 during the loaded phase: %.0f/s (%llu failed in all); server: %llu "
      "accepted, %llu "
      "served, %llu refused, %llu timed out, %llu evicted\n",
      (served.load() - before) / secs, static_cast<unsigned long long>(failed.load()),
      static_cast<unsigned long long>(c.accepted), static_cast<unsigned long long>(c.served),
      static_cast<unsigned long long>(c.refused), static_cast<unsigned long long>(c.timed_out),
      static_cast<unsigned long long>(c.evicted));
  return 0;
}
