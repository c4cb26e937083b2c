// JSON form of an evaluation result, for `kiln eval --json`, reports and exports.
#pragma once

#include <nlohmann/json.hpp>

#include "shared/protocol.h"

namespace kiln::eval {

nlohmann::json result_to_json(const proto::EvaluationResult& r);

}  // namespace kiln::eval
