// Strict loading of KilnConfig from JSON through JsonFields.
#include "shared/config.h"

#include <cstdlib>

#include "shared/backends.h"
#include "shared/json_fields.h"

namespace kiln {
namespace {

Status read_redis(JsonFields& f, RedisConfig* c) {
  KILN_RETURN_IF_ERROR(f.get("url", &c->url));
  KILN_RETURN_IF_ERROR(f.get("username", &c->username));
  KILN_RETURN_IF_ERROR(f.get("password", &c->password));
  KILN_RETURN_IF_ERROR(f.get("connect_timeout_ms", &c->connect_timeout_ms));
  KILN_RETURN_IF_ERROR(f.get("command_timeout_ms", &c->command_timeout_ms));
  return f.finish();
}

Status read_coordinator(JsonFields& f, CoordinatorConfig* c) {
  KILN_RETURN_IF_ERROR(f.get("bind", &c->bind));
  KILN_RETURN_IF_ERROR(f.get("http_port", &c->http_port));
  KILN_RETURN_IF_ERROR(f.get("heartbeat_interval_ms", &c->heartbeat_interval_ms));
  KILN_RETURN_IF_ERROR(f.get("heartbeat_liveness", &c->heartbeat_liveness));
  KILN_RETURN_IF_ERROR(f.get("task_deadline_ms", &c->task_deadline_ms));
  if (c->http_port > 65535) return f.field_error("http_port", "must be below 65536");
  if (c->heartbeat_liveness == 0) return f.field_error("heartbeat_liveness", "must be at least 1");
  return f.finish();
}

Status read_evaluator(JsonFields& f, EvaluatorConfig* c) {
  KILN_RETURN_IF_ERROR(f.get("backends", &c->backends));
  KILN_RETURN_IF_ERROR(f.get("compile_threads", &c->compile_threads));
  KILN_RETURN_IF_ERROR(f.get("cache_dir", &c->cache_dir));
  KILN_RETURN_IF_ERROR(f.get("phase_timeout_ms", &c->phase_timeout_ms));
  KILN_RETURN_IF_ERROR(f.get("target_noise_rel", &c->target_noise_rel));
  KILN_RETURN_IF_ERROR(f.get("max_timing_ms", &c->max_timing_ms));
  for (const auto& b : c->backends) {
    if (!is_backend(b)) {
      return f.field_error("backends", "unknown backend '" + b + "' (use cuda, cpu or triton)");
    }
  }
  if (c->compile_threads == 0) return f.field_error("compile_threads", "must be at least 1");
  if (c->target_noise_rel <= 0 || c->target_noise_rel >= 1) {
    return f.field_error("target_noise_rel", "must be between 0 and 1 (e.g. 0.005)");
  }
  return f.finish();
}

Status read_search(JsonFields& f, SearchConfig* c) {
  // Each key as it is read: the file named it or the default stands (SearchConfig::named).
  auto read = [&](const char* key, auto* out) {
    if (f.has(key)) c->named.insert(key);
    return f.get(key, out);
  };
  KILN_RETURN_IF_ERROR(read("islands", &c->islands));
  KILN_RETURN_IF_ERROR(read("population", &c->population));
  KILN_RETURN_IF_ERROR(read("max_proposals_without_gain", &c->max_proposals_without_gain));
  KILN_RETURN_IF_ERROR(read("min_gain_rel", &c->min_gain_rel));
  KILN_RETURN_IF_ERROR(read("time_budget_s", &c->time_budget_s));
  KILN_RETURN_IF_ERROR(read("rank_alpha", &c->rank_alpha));
  KILN_RETURN_IF_ERROR(read("children_beta", &c->children_beta));
  KILN_RETURN_IF_ERROR(read("migration_interval", &c->migration_interval));
  KILN_RETURN_IF_ERROR(read("floor_fraction", &c->floor_fraction));
  KILN_RETURN_IF_ERROR(read("speedup_target", &c->speedup_target));
  if (c->islands == 0) return f.field_error("islands", "must be at least 1");
  if (c->population == 0) return f.field_error("population", "must be at least 1");
  if (!(c->min_gain_rel >= 0 && c->min_gain_rel < 1)) {
    return f.field_error("min_gain_rel", "must be between 0 and 1 (e.g. 0.01 for 1%)");
  }
  if (!(c->rank_alpha >= 0 && c->rank_alpha <= 16)) return f.field_error("rank_alpha", "must be between 0 and 16");
  if (!(c->children_beta >= 0 && c->children_beta <= 16)) {
    return f.field_error("children_beta", "must be between 0 and 16");
  }
  if (!(c->floor_fraction >= 0 && c->floor_fraction <= 1)) {
    return f.field_error("floor_fraction", "must be between 0 and 1 (e.g. 0.95; 0 turns it off)");
  }
  if (!(c->speedup_target == 0 || c->speedup_target >= 1) || !(c->speedup_target < 1e9)) {
    return f.field_error("speedup_target", "must be 0 (off) or at least 1 (e.g. 2 for twice the seed's speed)");
  }
  return f.finish();
}

Status read_log(JsonFields& f, LogOptions* c) {
  KILN_RETURN_IF_ERROR(f.get("level", &c->level));
  KILN_RETURN_IF_ERROR(f.get("json", &c->json));
  KILN_RETURN_IF_ERROR(f.get("file", &c->file));
  return f.finish();
}

// Reads an optional nested section with `reader`.
template <typename T, typename Reader>
Status section(JsonFields& top, const std::string& key, T* out, Reader reader) {
  KILN_ASSIGN_OR_RETURN(std::optional<JsonFields> nested, top.object(key));
  if (!nested) return Status::ok();
  return reader(*nested, out);
}

Result<KilnConfig> config_from_json(const nlohmann::json& doc, const std::string& source) {
  KilnConfig c;
  JsonFields top(doc, source);
  KILN_RETURN_IF_ERROR(top.status());
  KILN_RETURN_IF_ERROR(top.get("work_dir", &c.work_dir));
  KILN_RETURN_IF_ERROR(top.get("targets", &c.targets));
  KILN_RETURN_IF_ERROR(top.get("targets_dir", &c.targets_dir));
  KILN_RETURN_IF_ERROR(section(top, "redis", &c.redis, read_redis));
  KILN_RETURN_IF_ERROR(section(top, "coordinator", &c.coordinator, read_coordinator));
  KILN_RETURN_IF_ERROR(section(top, "evaluator", &c.evaluator, read_evaluator));
  KILN_RETURN_IF_ERROR(section(top, "search", &c.search, read_search));
  KILN_RETURN_IF_ERROR(section(top, "log", &c.log, read_log));
  KILN_RETURN_IF_ERROR(top.finish());
  if (c.redis.password.empty()) {
    if (const char* p = std::getenv("KILN_REDIS_PASSWORD")) c.redis.password = p;
  }
  return c;
}

}  // namespace

Result<KilnConfig> parse_config(const std::string& json_text, const std::string& source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    return invalid_argument(source + ": not valid JSON (" + e.what() + ")");
  } catch (const nlohmann::json::exception& e) {  // a number too large for any type (406)
    return invalid_argument(source + ": cannot be read (" + std::string(e.what()) + ")");
  }
  return config_from_json(doc, source);
}

Result<KilnConfig> load_config(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(nlohmann::json doc, load_json_file(path));
  return config_from_json(doc, path);
}

}  // namespace kiln
