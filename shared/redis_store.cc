// Store implementation: validates key components, then issues the layout's reads and grouped
// writes (MULTI/EXEC or Lua) through RedisClient.
#include "shared/redis_store.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <random>

#include "shared/hash.h"
#include "shared/redis_keys.h"

namespace kiln::redis {

namespace {

// KEYS[1] = kiln:lease:{task}, KEYS[2] = kiln:inflight; ARGV = task id, payload, deadline (ms).
constexpr const char* kLeaseScript = R"lua(
redis.call('HSET', KEYS[1], 'payload', ARGV[2], 'deadline_ms', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
)lua";

// KEYS as above; ARGV = task id. Returns 1 when a lease was removed.
constexpr const char* kReleaseScript = R"lua(
local removed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return removed
)lua";

Status validate_components(
    std::initializer_list<std::pair<std::string_view, std::string_view>> named_components) {
  for (const auto& [name, value] : named_components) {
    KILN_RETURN_IF_ERROR(keys::validate_key_component(value).with_context(name));
  }
  return Status::ok();
}

// Shortest text that reads back as the same double (Redis parses it with strtod).
std::string format_score(double score) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", score);
  return buffer;
}

Result<std::vector<std::pair<std::string, std::string>>> parse_field_pairs(const Reply& reply,
                                                                           std::string_view what) {
  if (!reply.is_array() || reply.elements.size() % 2 != 0) {
    return internal_error(std::string(what) + ": expected an array of field/value pairs");
  }
  std::vector<std::pair<std::string, std::string>> fields;
  for (size_t i = 0; i < reply.elements.size(); i += 2) {
    KILN_ASSIGN_OR_RETURN(std::string field, reply.elements[i].as_string());
    KILN_ASSIGN_OR_RETURN(std::string value, reply.elements[i + 1].as_string());
    fields.emplace_back(std::move(field), std::move(value));
  }
  return fields;
}

}  // namespace

Status Store::init_schema() {
  std::string key = keys::schema_version();
  std::string wanted = std::to_string(keys::kSchemaVersion);
  KILN_ASSIGN_OR_RETURN(Reply set, client_->command_idempotent({"SET", key, wanted, "NX"}));
  if (!set.is_nil()) return Status::ok();  // +OK: we wrote it
  KILN_ASSIGN_OR_RETURN(Reply get, client_->command_idempotent({"GET", key}));
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> stored, get.as_optional_string());
  if (stored == wanted) return Status::ok();
  return failed_precondition(
      "redis at " + client_->describe() + ": " + key + " holds layout version '" +
      stored.value_or("(deleted meanwhile)") + "' but this kiln uses version " + wanted +
      "; point kiln at an empty database (another db number or server), or run the kiln "
      "release that wrote it; FLUSHDB only after saving anything you need");
}

Result<std::string> Store::put_source(std::string_view text) {
  std::string hash = sha256_hex(text);
  // SET NX of content-addressed data: running it twice is harmless, so it may be retried.
  KILN_ASSIGN_OR_RETURN(Reply reply, client_->command_idempotent(
                                         {"SET", keys::source(hash), std::string(text), "NX"}));
  return hash;
}

Result<std::optional<std::string>> Store::get_source(std::string_view hash) {
  KILN_RETURN_IF_ERROR(validate_components({{"source hash", hash}}));
  KILN_ASSIGN_OR_RETURN(Reply reply, client_->command_idempotent({"GET", keys::source(hash)}));
  return reply.as_optional_string();
}

Status Store::put_result_once(std::string_view id, std::string_view arch, std::string_view bytes) {
  KILN_RETURN_IF_ERROR(validate_components({{"candidate id", id}, {"arch", arch}}));
  std::string key = keys::result(id, arch);
  // Not retried after a lost connection: a retry could see our own first write as "present".
  // Sent again after a lost connection: a copy that landed the first time reads as "already
  // there", which callers take as written.
  KILN_ASSIGN_OR_RETURN(Reply reply,
                        client_->command_idempotent({"SET", key, std::string(bytes), "NX"}));
  if (reply.is_nil()) {
    return Status(StatusCode::kAlreadyExists,
                  "redis " + key + ": result already written (results are written once)");
  }
  return Status::ok();
}

Result<std::optional<std::string>> Store::get_result(std::string_view id, std::string_view arch) {
  KILN_RETURN_IF_ERROR(validate_components({{"candidate id", id}, {"arch", arch}}));
  KILN_ASSIGN_OR_RETURN(Reply reply, client_->command_idempotent({"GET", keys::result(id, arch)}));
  return reply.as_optional_string();
}

Status Store::add_candidate(const CandidateRecord& record, const PopulationKey& population,
                            double score) {
  KILN_RETURN_IF_ERROR(validate_components({{"candidate id", record.id},
                                            {"target", population.target},
                                            {"arch", population.arch},
                                            {"island", population.island}}));
  if (record.island != population.island) {
    return invalid_argument("candidate " + record.id + " is on island '" + record.island +
                            "' but was added to population island '" + population.island + "'");
  }
  if (std::isnan(score)) return invalid_argument("candidate " + record.id + ": score is NaN");
  std::string cand_key = keys::candidate(record.id);
  std::string pop_key = keys::population(population.target, population.arch, population.island);
  KILN_ASSIGN_OR_RETURN(
      std::vector<Reply> replies,
      client_->transaction(
          {{"HSET", cand_key, "source_hash", record.source_hash, "params", record.params, "parent",
            record.parent, "operator", record.operator_name, "generation",
            std::to_string(record.generation), "island", record.island, "status", record.status},
           {"ZADD", pop_key, format_score(score), record.id}}));
  for (const Reply& reply : replies) {
    KILN_RETURN_IF_ERROR(check_reply(reply).with_context("adding candidate " + record.id + " to " +
                                                         pop_key + " (partially applied)"));
  }
  return Status::ok();
}

Result<std::optional<CandidateRecord>> Store::get_candidate(std::string_view id) {
  KILN_RETURN_IF_ERROR(validate_components({{"candidate id", id}}));
  std::string key = keys::candidate(id);
  KILN_ASSIGN_OR_RETURN(Reply reply, client_->command_idempotent({"HGETALL", key}));
  KILN_ASSIGN_OR_RETURN(auto fields, parse_field_pairs(reply, "redis HGETALL " + key));
  if (fields.empty()) return std::optional<CandidateRecord>();
  CandidateRecord record;
  record.id = std::string(id);
  for (auto& [field, value] : fields) {
    if (field == "source_hash") {
      record.source_hash = std::move(value);
    } else if (field == "params") {
      record.params = std::move(value);
    } else if (field == "parent") {
      record.parent = std::move(value);
    } else if (field == "operator") {
      record.operator_name = std::move(value);
    } else if (field == "island") {
      record.island = std::move(value);
    } else if (field == "status") {
      record.status = std::move(value);
    } else if (field == "generation") {
      auto [ptr, ec] =
          std::from_chars(value.data(), value.data() + value.size(), record.generation);
      if (value.empty() || ec != std::errc() || ptr != value.data() + value.size()) {
        return data_loss("redis " + key + ": field generation '" + value + "' is not an integer");
      }
    }
  }
  return std::optional<CandidateRecord>(std::move(record));
}

Result<std::vector<std::pair<std::string, double>>> Store::population_best(std::string_view target,
                                                                           std::string_view arch,
                                                                           std::string_view island,
                                                                           size_t n) {
  KILN_RETURN_IF_ERROR(
      validate_components({{"target", target}, {"arch", arch}, {"island", island}}));
  std::vector<std::pair<std::string, double>> best;
  if (n == 0) return best;
  std::string key = keys::population(target, arch, island);
  KILN_ASSIGN_OR_RETURN(
      Reply reply,
      client_->command_idempotent({"ZRANGE", key, "0", std::to_string(n - 1), "WITHSCORES"}));
  KILN_ASSIGN_OR_RETURN(auto pairs, parse_field_pairs(reply, "redis ZRANGE " + key));
  for (size_t i = 0; i < pairs.size(); ++i) {
    char* end = nullptr;
    const std::string& text = pairs[i].second;
    double score = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) {
      return data_loss("redis ZRANGE " + key + ": score '" + text + "' is not a number");
    }
    best.emplace_back(std::move(pairs[i].first), score);
  }
  return best;
}

Status Store::lease_task(std::string_view task_id, std::string_view payload,
                         int64_t deadline_ms_epoch) {
  KILN_RETURN_IF_ERROR(validate_components({{"task id", task_id}}));
  KILN_ASSIGN_OR_RETURN(
      Reply reply,
      client_->eval(kLeaseScript, {keys::lease(task_id), keys::inflight()},
                    {std::string(task_id), std::string(payload), std::to_string(deadline_ms_epoch)},
                    /*idempotent=*/true));
  return Status::ok();
}

Result<std::vector<std::string>> Store::expired_leases(int64_t now_ms, size_t max_count) {
  std::vector<std::string> expired;
  if (max_count == 0) return expired;
  KILN_ASSIGN_OR_RETURN(Reply reply,
                        client_->command_idempotent({"ZRANGEBYSCORE", keys::inflight(), "-inf",
                                                     std::to_string(now_ms), "LIMIT", "0",
                                                     std::to_string(max_count)}));
  if (!reply.is_array()) return internal_error("redis ZRANGEBYSCORE kiln:inflight: not an array");
  for (const Reply& element : reply.elements) {
    KILN_ASSIGN_OR_RETURN(std::string task, element.as_string());
    expired.push_back(std::move(task));
  }
  return expired;
}

Result<std::optional<std::string>> Store::lease_payload(std::string_view task_id) {
  KILN_RETURN_IF_ERROR(validate_components({{"task id", task_id}}));
  KILN_ASSIGN_OR_RETURN(Reply reply,
                        client_->command_idempotent({"HGET", keys::lease(task_id), "payload"}));
  return reply.as_optional_string();
}

Status Store::release_lease(std::string_view task_id) {
  KILN_RETURN_IF_ERROR(validate_components({{"task id", task_id}}));
  KILN_ASSIGN_OR_RETURN(Reply reply,
                        client_->eval(kReleaseScript, {keys::lease(task_id), keys::inflight()},
                                      {std::string(task_id)}, /*idempotent=*/true));
  return Status::ok();
}

Status Store::put_target_status(std::string_view target,
                               const std::vector<std::pair<std::string, std::string>>& fields) {
  KILN_RETURN_IF_ERROR(validate_components({{"target", target}}));
  if (fields.empty()) return invalid_argument("status of target " + std::string(target) + " has no fields");
  std::vector<std::string> hset = {"HSET", keys::target(target)};
  for (const auto& [k, v] : fields) {
    hset.push_back(k);
    hset.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Reply> replies,
                        client_->pipeline({hset, {"SADD", keys::targets(), std::string(target)}}));
  for (const Reply& r : replies) KILN_RETURN_IF_ERROR(check_reply(r));
  return Status::ok();
}

Result<std::vector<std::pair<std::string, std::map<std::string, std::string>>>> Store::target_statuses() {
  KILN_ASSIGN_OR_RETURN(Reply names, client_->command_idempotent({"SMEMBERS", keys::targets()}));
  KILN_RETURN_IF_ERROR(check_reply(names));
  std::vector<std::string> sorted;
  for (const Reply& n : names.elements) sorted.push_back(n.str);
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> out;
  for (const auto& name : sorted) {
    if (!keys::validate_key_component(name).is_ok()) continue;
    KILN_ASSIGN_OR_RETURN(Reply h, client_->command_idempotent({"HGETALL", keys::target(name)}));
    KILN_RETURN_IF_ERROR(check_reply(h));
    std::map<std::string, std::string> fields;
    for (size_t i = 0; i + 1 < h.elements.size(); i += 2) fields[h.elements[i].str] = h.elements[i + 1].str;
    out.emplace_back(name, std::move(fields));
  }
  return out;
}

Status Store::put_run(const std::vector<std::pair<std::string, std::string>>& fields) {
  if (fields.empty()) return invalid_argument("the run record update has no fields");
  std::vector<std::string> hset = {"HSET", keys::run()};
  for (const auto& [k, v] : fields) {
    hset.push_back(k);
    hset.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(Reply reply, client_->command_idempotent(hset));
  return check_reply(reply);
}

Result<std::map<std::string, std::string>> Store::get_run() {
  KILN_ASSIGN_OR_RETURN(Reply reply, client_->command_idempotent({"HGETALL", keys::run()}));
  KILN_ASSIGN_OR_RETURN(auto pairs, parse_field_pairs(reply, "redis HGETALL " + keys::run()));
  return std::map<std::string, std::string>(pairs.begin(), pairs.end());
}

Status Store::write_step(std::string_view run, const SearchStep& step) {
  KILN_RETURN_IF_ERROR(validate_components({{"run id", run}}));
  if (step.event.empty()) return invalid_argument("search step of run " + std::string(run) + " has no event");
  if (!step.candidate.empty()) KILN_RETURN_IF_ERROR(validate_components({{"candidate id", step.candidate}}));
  if (!step.target.empty()) KILN_RETURN_IF_ERROR(validate_components({{"target", step.target}}));
  for (const auto& [pop, members] : step.populations) {
    KILN_RETURN_IF_ERROR(validate_components(
        {{"target", pop.target}, {"arch", pop.arch}, {"island", pop.island}}));
    for (const auto& [id, score] : members) {
      if (std::isnan(score)) return invalid_argument("population member " + id + ": score is NaN");
    }
  }
  auto hset = [](std::string key, const std::vector<std::pair<std::string, std::string>>& fields) {
    std::vector<std::string> c = {"HSET", std::move(key)};
    for (const auto& [k, v] : fields) {
      c.push_back(k);
      c.push_back(v);
    }
    return c;
  };
  std::vector<std::vector<std::string>> commands;
  for (const std::string& text : step.sources) {
    commands.push_back({"SET", keys::source(sha256_hex(text)), text, "NX"});
  }
  if (!step.candidate.empty() && !step.candidate_fields.empty()) {
    commands.push_back(hset(keys::candidate(step.candidate), step.candidate_fields));
  }
  if (!step.target.empty() && !step.target_fields.empty()) {
    commands.push_back(hset(keys::target(step.target), step.target_fields));
    commands.push_back({"SADD", keys::targets(), step.target});
  }
  for (const auto& [pop, members] : step.populations) {
    std::string key = keys::population(pop.target, pop.arch, pop.island);
    commands.push_back({"DEL", key});
    if (members.empty()) continue;
    std::vector<std::string> zadd = {"ZADD", key};
    for (const auto& [id, score] : members) {
      zadd.push_back(format_score(score));
      zadd.push_back(id);
    }
    commands.push_back(std::move(zadd));
  }
  if (!step.run_fields.empty()) commands.push_back(hset(keys::run(), step.run_fields));
  std::vector<std::string> xadd = {"XADD", keys::events(run), "*"};
  for (const auto& [k, v] : step.event) {
    xadd.push_back(k);
    xadd.push_back(v);
  }
  commands.push_back(std::move(xadd));
  // The step's token, set in the same transaction: after a connection lost mid-transaction it
  // tells whether the step landed (the transaction is all or nothing), so it is sent again only
  // when it did not, and the log never holds an entry twice.
  const std::string number = std::to_string(++steps_written_);
  const std::string token =
      number + "-" + sha256_hex(std::to_string(std::random_device{}()) + number).substr(0, 16);
  commands.push_back({"SET", keys::step_token(run), token});
  Result<std::vector<Reply>> sent = client_->transaction(commands);
  for (int tries = 0;
       !sent.is_ok() && sent.status().code() == StatusCode::kUnavailable && tries < 10; ++tries) {
    KILN_RETURN_IF_ERROR(client_->ensure_connected().with_context("writing a search step of run " +
                                                                  std::string(run)));
    KILN_ASSIGN_OR_RETURN(Reply landed,
                          client_->command_idempotent({"GET", keys::step_token(run)}));
    if (landed.is_string() && landed.str == token) return Status::ok();
    sent = client_->transaction(commands);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Reply> replies, std::move(sent));
  for (const Reply& reply : replies) {
    KILN_RETURN_IF_ERROR(check_reply(reply).with_context("writing a search step of run " +
                                                         std::string(run) + " (partially applied)"));
  }
  return Status::ok();
}

Result<std::vector<std::pair<std::string, std::string>>> Store::find_results(std::string_view id) {
  KILN_RETURN_IF_ERROR(validate_components({{"candidate id", id}}));
  const std::string prefix = keys::result(id, "");  // kiln:result:{id}:
  std::vector<std::string> found;
  std::string cursor = "0";
  do {
    KILN_ASSIGN_OR_RETURN(Reply reply, client_->command_idempotent(
                                           {"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"}));
    if (!reply.is_array() || reply.elements.size() != 2 || !reply.elements[1].is_array()) {
      return internal_error("redis SCAN: unexpected reply");
    }
    KILN_ASSIGN_OR_RETURN(cursor, reply.elements[0].as_string());
    for (const Reply& key : reply.elements[1].elements) {
      KILN_ASSIGN_OR_RETURN(std::string k, key.as_string());
      found.push_back(std::move(k));
    }
  } while (cursor != "0");
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());  // SCAN may repeat a key
  std::vector<std::pair<std::string, std::string>> results;
  for (const std::string& key : found) {
    KILN_ASSIGN_OR_RETURN(Reply reply, client_->command_idempotent({"GET", key}));
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> bytes, reply.as_optional_string());
    if (bytes) results.emplace_back(key.substr(prefix.size()), std::move(*bytes));
  }
  return results;
}

Result<std::string> Store::append_event(
    std::string_view run, const std::vector<std::pair<std::string, std::string>>& fields) {
  KILN_RETURN_IF_ERROR(validate_components({{"run id", run}}));
  if (fields.empty())
    return invalid_argument("event for run " + std::string(run) + " has no fields");
  std::vector<std::string> args = {"XADD", keys::events(run), "*"};
  for (const auto& [field, value] : fields) {
    args.push_back(field);
    args.push_back(value);
  }
  // Not retried: a retry after a lost connection could append the event twice.
  KILN_ASSIGN_OR_RETURN(Reply reply, client_->command(args));
  return reply.as_string();
}

Result<std::vector<StreamEvent>> Store::read_events(std::string_view run, std::string_view after_id,
                                                    size_t count) {
  KILN_RETURN_IF_ERROR(validate_components({{"run id", run}}));
  if (count == 0) return invalid_argument("read_events: count must be positive");
  std::string key = keys::events(run);
  // "(" makes the start exclusive (Redis >= 6.2).
  std::string start = after_id.empty() ? "-" : "(" + std::string(after_id);
  KILN_ASSIGN_OR_RETURN(Reply reply, client_->command_idempotent({"XRANGE", key, start, "+",
                                                                  "COUNT", std::to_string(count)}));
  if (!reply.is_array()) return internal_error("redis XRANGE " + key + ": not an array");
  std::vector<StreamEvent> events;
  for (const Reply& entry : reply.elements) {
    if (!entry.is_array() || entry.elements.size() != 2) {
      return internal_error("redis XRANGE " + key + ": malformed entry");
    }
    StreamEvent event;
    KILN_ASSIGN_OR_RETURN(event.id, entry.elements[0].as_string());
    KILN_ASSIGN_OR_RETURN(event.fields,
                          parse_field_pairs(entry.elements[1], "redis XRANGE " + key));
    events.push_back(std::move(event));
  }
  return events;
}

uint64_t Store::failures() const { return client_->failures(); }

}  // namespace kiln::redis
