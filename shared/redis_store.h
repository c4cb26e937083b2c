// Store: kiln's typed reads and grouped writes over the Redis layout of redis_keys.h (schema
// version, sources, write-once results, candidates and populations, leases, event streams).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/redis_client.h"
#include "shared/status.h"

namespace kiln::redis {

// One candidate kernel, stored as the hash kiln:cand:{id}.
struct CandidateRecord {
  std::string id;             // key component
  std::string source_hash;    // kiln:src:{hash}
  std::string params;         // serialized launch/tuning parameters
  std::string parent;         // parent candidate id; empty for a baseline
  std::string operator_name;  // mutation operator that produced it (field "operator")
  int generation = 0;
  std::string island;
  std::string status;
};

// The parts of kiln:pop:{target}:{arch}:{island}.
struct PopulationKey {
  std::string target;
  std::string arch;
  std::string island;
};

// One step of a run's search as the coordinator's engine records it: an entry of the run's search
// log (kiln:events:{run}) and the keys that change with it. Store::write_step sends it as one
// MULTI/EXEC, so a crash leaves all of it or none.
struct SearchStep {
  std::vector<std::pair<std::string, std::string>> event;  // XADD kiln:events:{run} * (not empty)
  std::vector<std::string> sources;                        // SET kiln:src:{sha256(text)} text NX
  std::string candidate;                                   // kiln:cand:{id} to HSET; empty: none
  std::vector<std::pair<std::string, std::string>> candidate_fields;
  std::string target;                                      // kiln:target:{t} to HSET; empty: none
  std::vector<std::pair<std::string, std::string>> target_fields;
  // Populations whose members are replaced: DEL, then ZADD of every (member, median time).
  std::vector<std::pair<PopulationKey, std::vector<std::pair<std::string, double>>>> populations;
  std::vector<std::pair<std::string, std::string>> run_fields;  // HSET kiln:run
};

struct StreamEvent {
  std::string id;                                           // stream id "ms-seq"
  std::vector<std::pair<std::string, std::string>> fields;  // in insertion order
};

// Not thread-safe (it uses one RedisClient, which must outlive it). Every key component received
// is checked with keys::validate_key_component and rejected with kInvalidArgument.
class Store {
 public:
  explicit Store(RedisClient& client) : client_(&client) {}

  // Exchanges with Redis that failed since its client was made (RedisClient::failures()).
  uint64_t failures() const;

  // Writes kiln:schema = kSchemaVersion when absent; OK when it already holds that version;
  // kFailedPrecondition naming both versions and what to do when it holds another.
  Status init_schema();

  // Stores `text` under kiln:src:{sha256(text)} unless present; returns the hash.
  Result<std::string> put_source(std::string_view text);
  Result<std::optional<std::string>> get_source(std::string_view hash);

  // Results are written once: kAlreadyExists (and the stored value kept) when present.
  Status put_result_once(std::string_view id, std::string_view arch, std::string_view bytes);
  Result<std::optional<std::string>> get_result(std::string_view id, std::string_view arch);

  // In one MULTI/EXEC: writes the hash kiln:cand:{id} and adds id to the population with `score`
  // (median time; lower is better). All input is validated before anything is sent; record.island
  // must equal population.island. A WRONGTYPE at EXEC is reported (Redis does not roll back).
  Status add_candidate(const CandidateRecord& record, const PopulationKey& population,
                       double score);
  Result<std::optional<CandidateRecord>> get_candidate(std::string_view id);

  // The n best (lowest time) members of the population with their scores, ascending.
  Result<std::vector<std::pair<std::string, double>>> population_best(std::string_view target,
                                                                      std::string_view arch,
                                                                      std::string_view island,
                                                                      size_t n);

  // Records that task_id was handed out with `payload` until deadline_ms_epoch: kiln:lease:{task}
  // and its entry in kiln:inflight change together (one Lua script). Leasing again replaces the
  // payload and deadline.
  Status lease_task(std::string_view task_id, std::string_view payload, int64_t deadline_ms_epoch);
  // Task ids whose deadline is <= now_ms, earliest first, at most max_count.
  Result<std::vector<std::string>> expired_leases(int64_t now_ms, size_t max_count = 1000);
  Result<std::optional<std::string>> lease_payload(std::string_view task_id);
  // Removes the lease and its inflight entry together; OK when there was none.
  Status release_lease(std::string_view task_id);

  // A target's standing for `kiln status`: the fields go to the hash kiln:target:{t} (replacing
  // those of the same name) and the name to the set kiln:targets, in one round trip.
  Status put_target_status(std::string_view target,
                           const std::vector<std::pair<std::string, std::string>>& fields);
  // Every target in kiln:targets with its hash's fields, names sorted.
  Result<std::vector<std::pair<std::string, std::map<std::string, std::string>>>> target_statuses();

  // The record of the run this database holds (the hash kiln:run: identity, options, time spent,
  // state). put_run replaces the fields it names; get_run returns an empty map when there is none.
  Status put_run(const std::vector<std::pair<std::string, std::string>>& fields);
  Result<std::map<std::string, std::string>> get_run();

  // Writes `step` in one MULTI/EXEC (see SearchStep). Every key component is validated and the
  // event must have fields before anything is sent; an error reply at EXEC is reported (Redis
  // does not roll back the others). Not retried after a lost connection.
  Status write_step(std::string_view run, const SearchStep& step);

  // Every result stored for candidate `id`, under any arch, as (arch, bytes) sorted by arch. Walks
  // the keyspace with SCAN: meant for a resume, which asks about the few candidates in flight.
  Result<std::vector<std::pair<std::string, std::string>>> find_results(std::string_view id);

  // XADD kiln:events:{run} * fields...; returns the new stream id. `fields` must not be empty.
  Result<std::string> append_event(std::string_view run,
                                   const std::vector<std::pair<std::string, std::string>>& fields);
  // Up to `count` events with ids after `after_id` (empty: from the start), in order.
  Result<std::vector<StreamEvent>> read_events(std::string_view run, std::string_view after_id,
                                               size_t count);

 private:
  RedisClient* client_;
  uint64_t steps_written_ = 0;  // part of each search step's token (write_step)
};

}  // namespace kiln::redis
