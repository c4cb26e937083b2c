// The Redis key layout (docs/design.md, "Redis keys"): the one place that spells kiln's keys. Every
// key starts with "kiln:" and its components are separated by ':'.
#pragma once

#include <string>
#include <string_view>

#include "shared/status.h"

namespace kiln::redis::keys {

inline constexpr std::string_view kPrefix = "kiln:";

// The layout version stored under schema_version(). Bump it when a key or a field changes meaning;
// Store::init_schema refuses to run against a database written with another version.
inline constexpr int kSchemaVersion = 1;

// OK when `component` may be used inside a key: not empty, at most kMaxComponentBytes, and free of
// ':' (it would shift every later component of the layout), whitespace and control bytes (they
// break logs and redis-cli), and the glob characters * ? [ ] (they would make SCAN/KEYS patterns
// over the layout match the wrong keys).
inline constexpr size_t kMaxComponentBytes = 200;
Status validate_key_component(std::string_view component);

// `text` made a valid component: every byte validate_key_component refuses becomes '_', an empty
// text becomes "_", and a longer one is cut to kMaxComponentBytes. For names that come from
// outside (a GPU model, an evaluator's arch) and become part of a key.
std::string safe_key_component(std::string_view text);

// The builders below format keys and do not validate: every component must have passed
// validate_key_component (Store does this for all input it receives).
std::string schema_version();                 // kiln:schema
std::string target(std::string_view target);  // kiln:target:{t}
std::string population(std::string_view target, std::string_view arch,
                       std::string_view island);                   // kiln:pop:{t}:{arch}:{island}
std::string candidate(std::string_view id);                        // kiln:cand:{id}
std::string source(std::string_view hash);                         // kiln:src:{hash}
std::string binary(std::string_view hash, std::string_view arch);  // kiln:bin:{hash}:{arch}
std::string result(std::string_view id, std::string_view arch);    // kiln:result:{id}:{arch}
std::string lease(std::string_view task);                          // kiln:lease:{task}
std::string inflight();                                            // kiln:inflight
std::string targets();                                             // kiln:targets (set of names)
std::string run();                                                 // kiln:run (the run's record)
std::string lease();  // kiln:lease: "HOST PID TOKEN" of the coordinator running the run
std::string events(std::string_view run);                          // kiln:events:{run}
// kiln:step:{run}: the token of the last search step written (Store::write_step)
std::string step_token(std::string_view run);

}  // namespace kiln::redis::keys
