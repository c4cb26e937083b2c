// The evaluator's side of the profile phase: turns the sandbox child's "profile" reply into
// EvaluationResult fields -- the values under "prof." in metrics, the bottleneck class in
// `bottleneck` (its next moves are hints(parse_class(bottleneck))), and in `profile_note` the
// numbers that decided the class, then kNoticeSeparator and why counters are missing, if they are.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "evaluator/profile/bottleneck.h"
#include "shared/protocol.h"
#include "shared/status.h"

namespace kiln::profile {

inline constexpr std::string_view kNoticeSeparator = "; notice: ";

// Validates `reply` ({"ok":true,"values":{key:number},"notice":text}: keys from
// metric_names.h, finite numbers) and folds it into `r`, classifying with `roofline`. On a
// malformed reply nothing is changed and the error says what is wrong. Returns the notice ("" when
// every counter was read).
Result<std::string> apply_profile_reply(const nlohmann::json& reply, const Roofline& roofline,
                                        proto::EvaluationResult* r);

// Human lines for a result's profile (kiln eval --profile): the values, the class with its
// reason, the next moves. Empty when the result has no profile.
std::vector<std::string> profile_lines(const proto::EvaluationResult& r);

}  // namespace kiln::profile
