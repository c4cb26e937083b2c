// LLM proposer config: see llm_config.h. Reading goes through JsonFields, so an unknown key is an
// error and every error names the file and field ("llm.json: field 'models[0].api': ...").
#include "agent/llm/llm_config.h"

#include <cstdlib>

#include "shared/json_fields.h"

namespace kiln::agent::llm {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

Result<ModelConfig> parse_model(JsonFields f, const std::string& where) {
  KILN_RETURN_IF_ERROR(f.status());
  ModelConfig m;
  std::string api = "openai";
  KILN_RETURN_IF_ERROR(f.get("name", &m.name));
  KILN_RETURN_IF_ERROR(f.get("api", &api));
  KILN_RETURN_IF_ERROR(f.get("endpoint", &m.endpoint, true));
  KILN_RETURN_IF_ERROR(f.get("model", &m.model, true));
  KILN_RETURN_IF_ERROR(f.get("api_key_env", &m.api_key_env));
  KILN_RETURN_IF_ERROR(f.get("temperature", &m.temperature));
  KILN_RETURN_IF_ERROR(f.get("max_tokens", &m.max_tokens));
  KILN_RETURN_IF_ERROR(f.get("price_in_per_mtok_usd", &m.price_in_per_mtok_usd));
  KILN_RETURN_IF_ERROR(f.get("price_out_per_mtok_usd", &m.price_out_per_mtok_usd));
  KILN_RETURN_IF_ERROR(f.finish());
  if (api == "openai") {
    m.api = Api::kOpenAi;
  } else if (api == "anthropic") {
    m.api = Api::kAnthropic;
  } else {
    return f.field_error("api", "expected \"openai\" or \"anthropic\", got \"" + api + "\"");
  }
  if (m.endpoint.rfind("http://", 0) != 0 && m.endpoint.rfind("https://", 0) != 0) {
    return f.field_error("endpoint", "expected an http:// or https:// URL");
  }
  if (m.temperature < 0 || m.temperature > 2) return f.field_error("temperature", "expected 0..2");
  if (m.max_tokens == 0) return f.field_error("max_tokens", "must be at least 1");
  if (m.price_in_per_mtok_usd < 0 || m.price_out_per_mtok_usd < 0) {
    return invalid_argument(where + ": prices must not be negative");
  }
  if (m.name.empty()) m.name = m.model;
  return m;
}

}  // namespace

std::string api_name(Api api) { return api == Api::kAnthropic ? "anthropic" : "openai"; }

std::string ModelConfig::request_url() const {
  std::string base = endpoint;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (api == Api::kOpenAi) {
    return ends_with(base, "/chat/completions") ? base : base + "/chat/completions";
  }
  if (ends_with(base, "/messages")) return base;
  return ends_with(base, "/v1") ? base + "/messages" : base + "/v1/messages";
}

double ModelConfig::cost_usd(uint64_t input_tokens, uint64_t output_tokens) const {
  return (static_cast<double>(input_tokens) * price_in_per_mtok_usd +
          static_cast<double>(output_tokens) * price_out_per_mtok_usd) / 1e6;
}

Result<LlmConfig> parse_llm_config(const std::string& json_text, const std::string& source) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, false);
  if (doc.is_discarded()) return invalid_argument(source + ": not valid JSON");
  JsonFields f(doc, source);
  KILN_RETURN_IF_ERROR(f.status());
  LlmConfig c;
  const nlohmann::json* models = f.raw("models");
  if (!models || !models->is_array() || models->empty()) {
    return f.field_error("models", "expected a non-empty array of models");
  }
  for (size_t i = 0; i < models->size(); ++i) {
    const std::string path = "models[" + std::to_string(i) + "]";
    KILN_ASSIGN_OR_RETURN(ModelConfig m, parse_model(JsonFields((*models)[i], source, path), source + ": " + path));
    for (const ModelConfig& other : c.models) {
      if (other.name == m.name) return f.field_error(path + ".name", "two models are named '" + m.name + "'");
    }
    c.models.push_back(std::move(m));
  }
  int64_t max_reply = static_cast<int64_t>(c.max_reply_bytes);
  int64_t budget_tokens = 0;
  KILN_RETURN_IF_ERROR(f.get("concurrency", &c.concurrency));
  KILN_RETURN_IF_ERROR(f.get("call_deadline_s", &c.call_deadline_s));
  KILN_RETURN_IF_ERROR(f.get("task_deadline_s", &c.task_deadline_s));
  KILN_RETURN_IF_ERROR(f.get("retries", &c.retries));
  KILN_RETURN_IF_ERROR(f.get("backoff_initial_ms", &c.backoff_initial_ms));
  KILN_RETURN_IF_ERROR(f.get("backoff_max_ms", &c.backoff_max_ms));
  KILN_RETURN_IF_ERROR(f.get("max_reply_bytes", &max_reply));
  KILN_RETURN_IF_ERROR(f.get("budget_tokens", &budget_tokens));
  KILN_RETURN_IF_ERROR(f.get("budget_usd", &c.budget_usd));
  KILN_RETURN_IF_ERROR(f.get("repair_tries", &c.repair_tries));
  KILN_RETURN_IF_ERROR(f.get("asks_per_task", &c.asks_per_task));
  KILN_RETURN_IF_ERROR(f.get("failures_shown", &c.failures_shown));
  KILN_RETURN_IF_ERROR(f.get("log_chars", &c.log_chars));
  KILN_RETURN_IF_ERROR(f.get("min_cost_per_call_usd", &c.min_cost_per_call_usd));
  KILN_RETURN_IF_ERROR(f.finish());
  if (c.concurrency == 0 || c.concurrency > 64) return f.field_error("concurrency", "expected 1..64");
  if (c.call_deadline_s == 0) return f.field_error("call_deadline_s", "must be at least 1");
  if (c.task_deadline_s == 0) return f.field_error("task_deadline_s", "must be at least 1");
  if (c.asks_per_task == 0) return f.field_error("asks_per_task", "must be at least 1");
  if (c.backoff_max_ms < c.backoff_initial_ms) {
    return f.field_error("backoff_max_ms", "must not be below backoff_initial_ms");
  }
  if (max_reply < 1024) return f.field_error("max_reply_bytes", "must be at least 1024");
  if (budget_tokens < 0) return f.field_error("budget_tokens", "must not be negative");
  if (c.budget_usd < 0) return f.field_error("budget_usd", "must not be negative");
  if (c.min_cost_per_call_usd <= 0) return f.field_error("min_cost_per_call_usd", "must be positive");
  c.max_reply_bytes = static_cast<uint64_t>(max_reply);
  c.budget_tokens = static_cast<uint64_t>(budget_tokens);
  return c;
}

Result<LlmConfig> load_llm_config(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(nlohmann::json doc, load_json_file(path));
  return parse_llm_config(doc.dump(), path);
}

Result<std::string> api_key(const ModelConfig& model) {
  if (model.api_key_env.empty()) return std::string();
  const char* v = std::getenv(model.api_key_env.c_str());
  if (!v || !*v) {
    return failed_precondition("model " + model.name + ": environment variable " + model.api_key_env +
                               " (its API key) is not set");
  }
  return std::string(v);
}

}  // namespace kiln::agent::llm
