// `kiln status`: the per-target table of a running or finished run. It reads the run's Redis
// (kiln:target:{t}, written by `kiln run` about once a second): the one named by --redis, or the
// private one of the output folder while that run is alive; for a finished local run, whose
// private Redis has stopped, it reads the folder's summary.json.
#include "cli/status_cmd.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/redis_password.h"
#include "cli/resume_command.h"
#include "cli/status_table.h"
#include "shared/fatal.h"
#include "shared/json_fields.h"
#include "shared/redis_client.h"
#include "shared/redis_store.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct StatusArgs {
  std::string out = "kiln-run";
  std::string redis;
  bool json = false;
  std::string redis_password_file;
};

Result<std::vector<coordinator::TargetReport>> from_redis(const std::string& url,
                                                          const std::string& password_file) {
  redis::RedisOptions o;
  o.url = url;
  if (!password_file.empty()) KILN_RETURN_IF_ERROR(apply_redis_password_file(password_file, o));
  o.connect_timeout_ms = 1000;
  o.max_reconnect_attempts = 1;
  KILN_ASSIGN_OR_RETURN(redis::RedisClient client, redis::RedisClient::connect(o));
  redis::Store store(client);
  KILN_ASSIGN_OR_RETURN(auto statuses, store.target_statuses());
  if (statuses.empty()) {
    Result<std::map<std::string, std::string>> run = store.get_run();
    if (!run.is_ok() || run->empty()) {
      return not_found("no kiln run is recorded in Redis at " + redis_url_for_display(url) +
                       " (kiln:run is absent); is this the run's Redis?");
    }
  }
  std::vector<coordinator::TargetReport> out;
  for (const auto& [name, fields] : statuses) out.push_back(report_from_fields(name, fields));
  return out;
}

Result<std::vector<coordinator::TargetReport>> from_summary(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return not_found("no " + path);
  KILN_ASSIGN_OR_RETURN(nlohmann::json j, load_json_file(path));
  if (!j.is_array()) return invalid_argument(path + " is not a kiln run summary");
  std::vector<coordinator::TargetReport> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& t = j[i];
    const std::string where = path + ", entry " + std::to_string(i);
    if (!t.is_object())
      return invalid_argument(where + ": expected an object (a kiln run summary)");
    // Each field with the type kiln writes (coordinator::report_json): a summary edited by hand
    // once showed a target named null and a count of 2^64 - 3.
    std::map<std::string, std::string> f;
    for (const auto& [k, v] : t.items()) {
      if (k == "evaluations" || k == "failures" || k == "accepted") {
        if (!v.is_number_unsigned())
          return invalid_argument(where + ": '" + k + "' is not a whole number >= 0");
        f[k] = std::to_string(v.get<uint64_t>());
      } else if (k == "seed_us" || k == "best_us" || k == "fraction_of_floor") {
        if (!v.is_number()) return invalid_argument(where + ": '" + k + "' is not a number");
        f[k] = v.dump();
      } else if (v.is_string()) {
        f[k] = v.get<std::string>();
      } else if (k == "target" || k == "gpu_model" || k == "state" || k == "best_id" ||
                 k == "best" || k == "shape") {
        return invalid_argument(where + ": '" + k + "' is not a string");
      }
    }
    if (f["target"].empty()) return invalid_argument(where + ": no 'target'");
    out.push_back(report_from_fields(f["target"], f));
  }
  return out;
}

// The run's backend, for the export hint: from its Redis record or its summary ("" if unknown).
std::string backend_of(const StatusArgs& a, const std::string& redis_url) {
  if (!redis_url.empty()) {
    redis::RedisOptions o;
    o.url = redis_url;
    o.connect_timeout_ms = 1000;
    o.max_reconnect_attempts = 1;
    if (!a.redis_password_file.empty() &&
        !apply_redis_password_file(a.redis_password_file, o).is_ok())
      return "";
    Result<redis::RedisClient> client = redis::RedisClient::connect(o);
    if (!client.is_ok()) return "";
    redis::Store store(*client);
    Result<std::map<std::string, std::string>> run = store.get_run();
    return run.is_ok() && run->count("backend") ? run->at("backend") : "";
  }
  Result<nlohmann::json> j = load_json_file(a.out + "/summary.json");
  if (!j.is_ok() || !j->is_array() || j->empty() || !(*j)[0].is_object()) return "";
  const auto backend = (*j)[0].find("backend");
  return backend != (*j)[0].end() && backend->is_string() ? backend->get<std::string>() : "";
}

int run_status(const StatusArgs& a) {
  Result<std::vector<coordinator::TargetReport>> reports = not_found("");
  std::string source, redis_url = a.redis;
  if (!a.redis.empty()) {
    reports = from_redis(a.redis, a.redis_password_file);
    source = redis_url_for_display(a.redis);
  } else {
    const std::string sock = a.out + "/redis/redis.sock";
    if (fs::exists(sock)) {
      redis_url = "unix://" + fs::absolute(sock).string();
      reports = from_redis(redis_url, "");
      source = "the running run in " + a.out;
    }
    if (!reports.is_ok()) {
      redis_url.clear();
      reports = from_summary(a.out + "/summary.json");
      source = a.out + "/summary.json";
    }
  }
  if (!reports.is_ok()) {
    report_fatal("kiln status: nothing to show: " + reports.status().message() +
                 " (pass the run's --out folder, or --redis URL)");
    return 2;
  }
  if (a.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : *reports) j.push_back(coordinator::report_json(r));
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("from %s\n", source.c_str());
  print_status_table(*reports, stdout);
  print_winners(*reports,
                a.redis.empty() ? "--out " + shell_quote(a.out) : "--redis " + shell_quote(a.redis),
                backend_of(a, redis_url), stdout);
  return 0;
}

}  // namespace

void add_status_command(CLI::App& app, std::function<int()>& action) {
  auto a = std::make_shared<StatusArgs>();
  CLI::App* sub = app.add_subcommand(
      "status",
      "Show a run's targets: evaluations, failures, children kept, seed and best time, speedup,\n"
      "fraction of the floor and state. Reads the run's Redis (--redis, or the private one of\n"
      "--out while that run is alive), else the folder's summary.json.");
  sub->add_option("--out", a->out, "The run's output folder")->capture_default_str();
  sub->add_option("--redis", a->redis, "The run's Redis (redis://host:port or unix:///path)");
  add_redis_password_option(sub, a->redis_password_file);
  sub->add_flag("--json", a->json, "Print JSON");
  sub->callback([&action, a] { action = [a] { return run_status(*a); }; });
}

}  // namespace kiln::cli
