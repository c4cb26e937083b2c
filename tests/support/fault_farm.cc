// FaultFarm: see fault_farm.h.
#include "tests/support/fault_farm.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "shared/redis_store.h"
#include "shared/target_spec.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

}  // namespace

std::string copy_padded_target(const std::string& folder, const std::string& target,
                               uint32_t pad_values) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  fs::copy(builtin_targets_dir() + "/" + target, folder + "/" + target, fs::copy_options::recursive,
           ec);
  if (ec) return "copying target " + target + ": " + ec.message();
  std::ifstream in(folder + "/" + target + "/target.json");
  nlohmann::json spec = nlohmann::json::parse(in, nullptr, false);
  if (spec.is_discarded()) return target + "/target.json does not parse";
  nlohmann::json& cpu = spec["backends"]["cpu"];
  cpu["benchmark"] = {{"M", 64}, {"N", 256}};
  std::vector<int> pad;
  for (uint32_t i = 0; i < pad_values; ++i) pad.push_back(static_cast<int>(i));
  cpu["template"]["params"]["PAD"] = pad;
  std::ofstream(folder + "/" + target + "/target.json") << spec.dump(2);
  return "";
}

std::string read_text(const std::string& path, size_t from) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return from < text.size() ? text.substr(from) : std::string();
}

size_t count_lines_with(const std::string& text, const std::string& needle) {
  std::istringstream lines(text);
  size_t n = 0;
  for (std::string line; std::getline(lines, line);) n += line.find(needle) != std::string::npos;
  return n;
}

FaultFarm::FaultFarm(FarmOptions options) : options_(std::move(options)) {
  out_ = dir_.file("out");
  targets_ = dir_.file("targets");
}

FaultFarm::~FaultFarm() {
  for (auto& e : evaluators_) e.kill_now();
  if (coordinator_) coordinator_->kill_now();
}

std::string FaultFarm::start() {
  // The targets: the space holds thousands of configurations.
  for (const auto& t : options_.targets) {
    if (std::string why = copy_padded_target(targets_, t, options_.pad_values); !why.empty())
      return why;
  }
  const int port = testing::free_tcp_port();
  if (port <= 0) return "no free loopback port";
  endpoint_ = "tcp://127.0.0.1:" + std::to_string(port);
  if (std::string e = start_redis(); !e.empty()) return e;
  if (std::string e = start_coordinator(false); !e.empty()) return e;
  for (int i = 0; i < options_.evaluators; ++i) {
    if (std::string e = start_evaluator_slot(i); !e.empty()) return e;
  }
  return "";
}

std::string FaultFarm::start_redis() {
  LocalRedisOptions o;
  o.dir = dir_.file("redis");
  o.persist = true;
  fs::create_directories(o.dir);
  Result<std::unique_ptr<LocalRedis>> r = LocalRedis::start(o);
  if (!r.is_ok()) return "starting redis-server: " + r.status().to_string();
  redis_ = std::move(r).value();
  return "";
}

std::string FaultFarm::start_coordinator(bool resume) {
  std::string targets;
  for (const auto& t : options_.targets) targets += (targets.empty() ? "" : ",") + t;
  std::vector<std::string> argv = {
      kiln_binary(), "coordinator", "--bind",        endpoint_,
      "--backend",   "cpu",         "--in-flight",   std::to_string(options_.in_flight),
      "--out",       out_,          "--targets-dir", targets_,
      "--redis",     redis_url(),   "--redis-retry", std::to_string(options_.redis_retry_s) + "s"};
  if (resume) {
    argv.push_back("--resume");
  } else {
    // Patience far beyond what the run can reach: the budget ends it, not convergence.
    argv.insert(argv.end(), {"--targets", targets, "--budget",
                             std::to_string(options_.budget_s) + "s", "--patience", "100000"});
  }
  fs::remove(out_ + "/endpoint");
  SpawnOptions o;
  o.argv = argv;
  o.output_file = coordinator_log();
  o.die_with_parent = true;
  Result<ChildProcess> child = ChildProcess::spawn(o);
  if (!child.is_ok()) return child.status().to_string();
  coordinator_.emplace(std::move(child).value());
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    if (!coordinator_->running()) {
      return "the coordinator ended at its start (" + coordinator_->exit_status()->describe() +
             "):\n" + read_text(coordinator_log());
    }
    if (fs::exists(out_ + "/endpoint")) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "the coordinator wrote no endpoint within 60 s";
}

Result<ChildProcess> FaultFarm::start_evaluator(const std::string& worker_id,
                                                const std::string& targets_dir,
                                                const std::string& log) const {
  SpawnOptions o;
  o.argv = {
      kiln_binary(),       "evaluator", "--connect",   endpoint_,          "--backend",   "cpu",
      "--targets-dir",     targets_dir, "--cache-dir", dir_.file("cache"), "--worker-id", worker_id,
      "--compile-threads", "1"};
  o.output_file = log;
  o.die_with_parent = true;
  return ChildProcess::spawn(o);
}

std::string FaultFarm::start_evaluator_slot(int i) {
  Result<ChildProcess> child = start_evaluator(worker_id(i), targets_, evaluator_log(i));
  if (!child.is_ok()) return child.status().to_string();
  if (static_cast<int>(evaluators_.size()) <= i) {
    evaluators_.push_back(std::move(child).value());
  } else {
    evaluators_[i] = std::move(child).value();
  }
  return "";
}

std::string FaultFarm::kill_and_resume_coordinator() {
  if (!coordinator_ || !coordinator_->running()) return "the coordinator is not running";
  coordinator_->kill_now();
  return start_coordinator(true);
}

std::string FaultFarm::kill_and_restart_redis(std::chrono::milliseconds down) {
  redis_->kill_now();
  redis_.reset();
  std::this_thread::sleep_for(down);
  return start_redis();
}

std::string FaultFarm::kill_and_restart_evaluator(int i) {
  evaluators_.at(i).kill_now();
  return start_evaluator_slot(i);
}

std::vector<std::optional<ExitStatus>> FaultFarm::wait_evaluators(std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    bool any = false;
    for (auto& e : evaluators_) any = e.running() || any;
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::vector<std::optional<ExitStatus>> st;
  for (auto& e : evaluators_) {
    e.running();
    st.push_back(e.exit_status());
  }
  return st;
}

Result<redis::RedisClient> FaultFarm::redis_client() const {
  redis::RedisOptions o;
  o.url = redis_url();
  o.connect_timeout_ms = 1000;
  o.max_reconnect_attempts = 1;
  return redis::RedisClient::connect(o);
}

std::map<std::string, std::string> FaultFarm::spec_hashes() const {
  std::map<std::string, std::string> hashes;
  for (const auto& t : options_.targets) {
    Result<TargetSpec> spec = load_target(targets_ + "/" + t);
    if (spec.is_ok()) hashes[t] = spec->spec_hash;
  }
  return hashes;
}

Result<FarmResults> read_farm_results(const std::string& out, const std::string& redis_url) {
  FarmResults r;
  auto forged = [&r](const std::string& where, const std::string& task, const std::string& cand,
                     double us) {
    if (us == 1.0 || task.rfind("forged-", 0) == 0 || cand.rfind("forged-", 0) == 0) {
      r.forged.push_back(where + ": task " + task + ", candidate " + cand + ", " +
                         std::to_string(us) + " us");
    }
  };
  std::ifstream in(out + "/results.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded())
      return invalid_argument("results.jsonl: a line that is not JSON: " + line);
    ++r.lines;
    const std::string task = j.value("task_id", ""), cand = j.value("candidate_id", "");
    ++r.per_task[task];
    ++r.per_candidate[cand];
    if (j.value("outcome", "") == "verified") r.verified_candidates.insert(cand);
    forged("results.jsonl", task, cand, j["timing"].value("median_us", 0.0));
  }

  redis::RedisOptions o;
  o.url = redis_url;
  KILN_ASSIGN_OR_RETURN(redis::RedisClient client, redis::RedisClient::connect(o));
  std::string cursor = "0";
  do {
    KILN_ASSIGN_OR_RETURN(redis::Reply page, client.command({"SCAN", cursor, "MATCH",
                                                             "kiln:result:*", "COUNT", "1000"}));
    if (page.elements.size() != 2) return internal_error("SCAN: unexpected reply");
    cursor = page.elements[0].str;
    for (const auto& key : page.elements[1].elements) {
      KILN_ASSIGN_OR_RETURN(redis::Reply value, client.command({"GET", key.str}));
      Result<proto::Envelope> env = proto::decode(value.str);
      auto* res = env.is_ok() ? std::get_if<proto::EvaluationResult>(&env->body) : nullptr;
      if (!res) return internal_error("redis " + key.str + " holds no result");
      forged("redis " + key.str, res->task_id, res->candidate_id, res->timing.median_us);
      r.stored[key.str] = *res;
    }
  } while (cursor != "0");

  redis::Store store(client);
  KILN_ASSIGN_OR_RETURN(auto run, store.get_run());
  if (!run.count("id")) return not_found("no run in Redis");
  std::string after;
  while (true) {
    KILN_ASSIGN_OR_RETURN(auto events, store.read_events(run.at("id"), after, 1000));
    if (events.empty()) break;
    for (const auto& ev : events) {
      std::map<std::string, std::string> f(ev.fields.begin(), ev.fields.end());
      if (f["type"] == "result") {
        ++r.logged_results[f["task"]];
        forged("search log", f["task"], f["cand"], 0);
      }
      after = ev.id;
    }
  }
  return r;
}

}  // namespace kiln::testing
