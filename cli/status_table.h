// The per-target table that `kiln run` shows while it runs and `kiln status` shows afterwards,
// and the Redis fields (kiln:target:{t}) it is stored as between the two.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/engine.h"

namespace kiln::cli {

// The row's name: the target, with a short GPU model ("matmul@H100") for a population on one model.
std::string table_label(const coordinator::TargetReport& r);

void print_status_table(const std::vector<coordinator::TargetReport>& reports, FILE* to);

// Each target's winning configuration and the `kiln export` command that writes it out;
// `run_option` names the run ("--out DIR" or "--redis URL"), `backend` picks the formats shown
// ("" when unknown).
void print_winners(const std::vector<coordinator::TargetReport>& reports,
                   const std::string& run_option, const std::string& backend, FILE* to);

// One target's standing on one line, for logs: "reduce: searching; 12 evals (1 failed), 3 kept;
// seed 100.00 us, best 50.00 us (2.00x), 80% of the floor".
std::string progress_line(const coordinator::TargetReport& r);

// `kiln run`'s progress where stderr is not a terminal (a log file, a CI job, a pipe): instead of
// the whole table every second, a line per target when its state or best time changes (at once),
// and when only its counters moved, at most once per `counters_every`.
class ProgressLines {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ProgressLines(std::chrono::seconds counters_every = std::chrono::seconds(60))
      : counters_every_(counters_every) {}

  // The lines to print now (each ends with a newline; empty: nothing to say).
  std::string update(const std::vector<coordinator::TargetReport>& reports, Clock::time_point now);

 private:
  struct Printed {
    std::string state;
    std::string best_id;
    std::string line;
    Clock::time_point at;
  };
  std::chrono::seconds counters_every_;
  std::map<std::string, Printed> printed_;  // by table_label
};

std::vector<std::pair<std::string, std::string>> status_fields(const coordinator::TargetReport& r);
// The report as summary.json and `kiln status --json` give it: counts and times as numbers.

coordinator::TargetReport report_from_fields(const std::string& target,
                                             const std::map<std::string, std::string>& fields);

}  // namespace kiln::cli
