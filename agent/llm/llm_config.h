// The LLM proposer's configuration (`kiln agent --llm FILE`): the models it may ask (API flavour,
// endpoint, model name, the NAME of the environment variable holding the key, sampling, prices)
// and the limits of every call and of the whole run (deadlines, retries, token and cost budget,
// repair tries). Loaded strictly from JSON: a misspelt key is an error naming file and field.
// Format and examples: docs/llm.md and configs/llm-*.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/status.h"

namespace kiln::agent::llm {

enum class Api { kOpenAi, kAnthropic };  // OpenAI-compatible chat completions; Anthropic Messages

struct ModelConfig {
  std::string name;         // label in statistics; default: `model`
  Api api = Api::kOpenAi;
  std::string endpoint;     // base URL ("https://api.openai.com/v1") or the full request URL
  std::string model;        // the provider's model name
  std::string api_key_env;  // environment variable with the key; "" for local servers
  double temperature = 0.7;
  uint32_t max_tokens = 8192;  // reply tokens asked for
  double price_in_per_mtok_usd = 0;   // USD per million prompt tokens (0: free / local)
  double price_out_per_mtok_usd = 0;  // USD per million reply tokens

  // The URL a request goes to: `endpoint` as given when it already names the route, else
  // endpoint + "/chat/completions" (OpenAI) or + "/v1/messages" (Anthropic; "/messages" after
  // a base ending in "/v1").
  std::string request_url() const;
  double cost_usd(uint64_t input_tokens, uint64_t output_tokens) const;
};

struct LlmConfig {
  std::vector<ModelConfig> models;  // at least one; several: a bandit picks per proposal
  uint32_t concurrency = 2;         // model calls in flight at once (agent tasks served at once)
  uint32_t call_deadline_s = 120;   // hard deadline of one HTTP call
  uint32_t task_deadline_s = 170;   // all calls for one propose task (retries included); keep it
                                    // below the coordinator's proposal timeout (180 s)
  uint32_t retries = 4;             // further tries after a 429, 5xx or transport failure
  uint32_t backoff_initial_ms = 1000;  // doubles each retry, capped; Retry-After wins when given
  uint32_t backoff_max_ms = 30000;
  uint64_t max_reply_bytes = 2 << 20;  // a larger HTTP body is cut off and the call fails
  uint64_t budget_tokens = 0;          // prompt + reply tokens over the run; 0: unlimited
  double budget_usd = 0;               // cost over the run; 0: unlimited
  uint32_t repair_tries = 2;           // repairs of one failed child's lineage
  uint32_t asks_per_task = 2;          // model calls per task when replies are rejected
  uint32_t failures_shown = 4;         // recent failed children summarised in the prompt
  uint32_t log_chars = 6000;           // of a failed child's log shown to the model
  double min_cost_per_call_usd = 1e-4;  // bandit: the cost a free (local) model is charged
};

// Reads and validates a config file. Errors name the file and the field. The API keys are not
// read here (see api_key()).
Result<LlmConfig> load_llm_config(const std::string& path);
Result<LlmConfig> parse_llm_config(const std::string& json_text, const std::string& source);

// The model's key from its environment variable: "" when api_key_env is empty; an error naming the
// variable (never its value) when it is unset or empty.
Result<std::string> api_key(const ModelConfig& model);

std::string api_name(Api api);  // "openai", "anthropic"

}  // namespace kiln::agent::llm
