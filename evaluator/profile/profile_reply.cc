// apply_profile_reply: the child's reply is checked like any untrusted input (the child runs
// candidate code; on the cpu backend in its own address space) before it reaches the result.
#include "evaluator/profile/profile_reply.h"

#include <cmath>
#include <cstdio>

#include "evaluator/profile/metric_names.h"

namespace kiln::profile {
namespace {

constexpr size_t kMaxNoticeChars = 2000;

bool known_key(const std::string& key) {
  for (const CounterMetric& m : kCounterMetrics) {
    if (key == m.key) return true;
  }
  for (const char* k : {kRegistersKey, kLocalBytesKey, kStaticSharedKey, kDynamicSharedKey,
                        kBlockThreadsKey, kBlocksPerSmKey, kTheoreticalOccupancyKey}) {
    if (key == k) return true;
  }
  return false;
}

}  // namespace

Result<std::string> apply_profile_reply(const nlohmann::json& reply, const Roofline& roofline,
                                        proto::EvaluationResult* r) {
  if (!reply.is_object() || !reply.value("ok", false)) {
    return invalid_argument("profile reply is not an ok object");
  }
  const auto values = reply.find("values");
  if (values == reply.end() || !values->is_object()) {
    return invalid_argument("profile reply lacks a 'values' object");
  }
  std::map<std::string, double> checked;
  for (const auto& [key, value] : values->items()) {
    if (!known_key(key))
      return invalid_argument("profile reply has an unknown value '" + key + "'");
    if (!value.is_number() || !std::isfinite(value.get<double>())) {
      return invalid_argument("profile value '" + key + "' is not a finite number");
    }
    checked[metric_key(key)] = value.get<double>();
  }
  std::string notice;
  if (auto n = reply.find("notice"); n != reply.end()) {
    if (!n->is_string()) return invalid_argument("profile reply's 'notice' is not a string");
    notice = n->get<std::string>().substr(0, kMaxNoticeChars);
  }
  for (const auto& [key, value] : checked) r->metrics[key] = value;
  Bottleneck b = classify(metrics_from_map(checked), roofline);
  r->bottleneck = std::string(class_name(b.cls));
  r->profile_note = b.reason;
  if (!notice.empty()) r->profile_note += std::string(kNoticeSeparator) + notice;
  return notice;
}

std::vector<std::string> profile_lines(const proto::EvaluationResult& r) {
  std::vector<std::string> lines;
  std::string values;
  for (const auto& [key, value] : r.metrics) {
    if (key.rfind(kMetricPrefix, 0) != 0) continue;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.4g", value);
    values += (values.empty() ? "" : ", ") + key.substr(kMetricPrefix.size()) + " " + buf;
  }
  if (!values.empty()) lines.push_back("profile: " + values);
  if (r.bottleneck.empty()) return lines;
  BottleneckClass cls = parse_class(r.bottleneck);
  const size_t n = r.profile_note.find(kNoticeSeparator);
  const std::string reason = r.profile_note.substr(0, n);
  lines.push_back("bottleneck: " + r.bottleneck + (reason.empty() ? "" : " -- " + reason));
  static const char* kTierNames[] = {"block size", "memory access", "compute", "advanced"};
  for (const Move& m : hints(cls)) {
    lines.push_back("  next (" + std::string(kTierNames[static_cast<int>(m.tier)]) +
                    " tier): " + m.text);
  }
  if (n != std::string::npos) {
    lines.push_back("notice: " + r.profile_note.substr(n + kNoticeSeparator.size()));
  }
  return lines;
}

}  // namespace kiln::profile
