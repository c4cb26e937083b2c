// The per-target table that `kiln run` shows while it runs and `kiln status` shows afterwards,
// and the Redis fields (kiln:target:{t}) it is stored as between the two.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/engine.h"

namespace kiln::cli {

// The row's name: the target, with a short GPU model ("matmul@H100") for a population on one model.
std::string table_label(const coordinator::TargetReport& r);

void print_status_table(const std::vector<coordinator::TargetReport>& reports, FILE* to);

std::vector<std::pair<std::string, std::string>> status_fields(const coordinator::TargetReport& r);
coordinator::TargetReport report_from_fields(const std::string& target,
                                             const std::map<std::string, std::string>& fields);

}  // namespace kiln::cli
