// The timing phase of an evaluation (docs/threats.md rows 3, 8, 9, 13-16 and 20). The kernel is
// timed on several input sets whose contents rotate through the launched buffers; every launch also
// gets a secret subset of its set's sites changed, so no launch sees inputs an earlier one had
// and a cache of earlier answers cannot serve it. The outputs checked afterwards are those of
// each group's closing launch (every site applied) and of timed launches the child kept by
// reservoir sampling as they ran. Then the samples must form one cluster (a kernel that does
// less work on some launches has no single time), and the median must respect the floor.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "evaluator/evaluation_internal.h"

namespace kiln::eval {
namespace {

// Rows of the benchmark shape's outputs that are re-checked after timing when the reference can
// compute single rows (Reference::has_rows), the rows of the launch's sites always among them:
// each kept launch gets kSampledRows secret rows, each closing launch kClosingRows (kSampledRows
// where the reference is expensive). A kernel that leaves a part f of the rows wrong on timed
// launches escapes the closing checks of two groups with odds (1 - f)^1024: 1e-4 at f = 1%, for
// a gain in time below the noise. Checking every row instead cost 80 ms per 2^26-element output
// on an H100 machine's host, a tenth of an evaluation.
constexpr size_t kSampledRows = 64;
constexpr size_t kClosingRows = 512;
// Sites per timing set: 2^16 - 1 distinct masks, far more than the launches of one run.
constexpr size_t kSitesPerSet = 16;
// Above this many flops at the benchmark shape the reference is expensive: the closing launches
// get kSampledRows rows, not kClosingRows.
constexpr double kExpensiveReferenceFlops = 1e10;
// Rows re-checked per input site whose input lacks some of the row dims (a cos[L, R] site of
// rotary_embedding changes B*H rows): drawn among the rows it changes.
constexpr size_t kRowsPerSite = 4;
// How far a site moves, in units of its input's spread (on top of the value's own size).
constexpr double kSiteShift = 8.0;

// An exclusive flock on a file shared by every kiln process of this user on this machine; a no-op
// when `take` is false or the file cannot be opened (timing then goes on unserialised).
class CpuTimingLock {
 public:
  explicit CpuTimingLock(bool take) {
    if (!take) return;
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("kiln-cpu-timing-" + std::to_string(getuid()) + ".lock"))
                                 .string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~CpuTimingLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  CpuTimingLock(const CpuTimingLock&) = delete;
  CpuTimingLock& operator=(const CpuTimingLock&) = delete;

 private:
  int fd_ = -1;
};

// The RMS of up to 4096 finite values spread over `v` (a site's scale; the whole tensor would
// cost a pass over it).
double spread_of(const std::vector<double>& v) {
  const size_t step = std::max<size_t>(1, v.size() / 4096);
  double sum = 0;
  size_t n = 0;
  for (size_t i = 0; i < v.size(); i += step) {
    if (!std::isfinite(v[i])) continue;
    sum += v[i] * v[i];
    ++n;
  }
  return n > 0 ? std::sqrt(sum / static_cast<double>(n)) : 0;
}

// A list of numbers from the child's timing reply: `key` ("samples_us", "clocks_mhz"), with at
// least `min_count` entries.
Result<std::vector<double>> numbers_of(const nlohmann::json& reply, const char* key,
                                       size_t min_count) {
  const auto it = reply.find(key);
  if (it == reply.end() || !it->is_array() || it->size() < min_count)
    return internal_error(std::string("the sandbox's timing reply has no ") + key);
  std::vector<double> out;
  for (const auto& v : *it) {
    if (!v.is_number())
      return internal_error(std::string("the sandbox's timing reply has a non-number in ") + key);
    out.push_back(v.get<double>());
  }
  return out;
}

nlohmann::json site_json(const Site& s, const TensorSlot& slot) {
  std::string bytes(dtype_bytes(slot.dtype), '\0');
  encode(slot.dtype, &s.changed, 1, bytes.data());
  nlohmann::json list = nlohmann::json::array();
  for (char b : bytes) list.push_back(static_cast<unsigned>(static_cast<unsigned char>(b)));
  return {{"tensor", s.slot}, {"offset", s.element * dtype_bytes(slot.dtype)}, {"bytes", list}};
}

}  // namespace

std::vector<Site> CandidateEvaluator::Impl::choose_sites(SetData& d) {
  std::vector<size_t> eligible;
  size_t total = 0;
  for (size_t i = 0; i < d.slots.size(); ++i) {
    const TensorSlot& s = d.slots[i];
    if (s.arg->role != TargetArg::Role::kInput || !s.arg->index_bound.empty() || s.count == 0)
      continue;
    eligible.push_back(i);
    total += s.count;
  }
  std::vector<Site> sites;
  if (eligible.empty()) return sites;
  std::map<size_t, double> spread;
  std::set<std::pair<size_t, size_t>> used;
  const size_t n = std::min(kSitesPerSet, total);
  for (size_t k = 0; sites.size() < n && k < 8 * n; ++k) {
    const size_t slot = eligible[k % eligible.size()];
    const size_t element = seeds.next() % d.slots[slot].count;
    if (!used.insert({slot, element}).second) continue;
    if (!spread.count(slot)) spread[slot] = spread_of(d.values[slot]);
    Site s{slot, element, d.values[slot][element], 0};
    // Upwards and far: past the largest values of a normal input, which moves a softmax or a
    // log-sum-exp row as much as it moves a sum (docs/threats.md row 20).
    const double base = std::isfinite(s.original) ? std::fabs(s.original) : 0;
    s.changed = round_to(d.slots[slot].dtype, base + kSiteShift * std::max(spread[slot], 0.125));
    if (s.changed == s.original) s.changed = round_to(d.slots[slot].dtype, base + 1);
    sites.push_back(s);
  }
  for (const Site& s : sites) d.values[s.slot][s.element] = s.changed;
  d.squares_built = false;  // the sites of an earlier draw were restored outside d.sites
  return sites;
}

std::vector<int64_t> CandidateEvaluator::Impl::site_rows(const SetData& d) {
  std::vector<int64_t> rows;
  const std::vector<std::string> dims = row_dims();
  if (dims.empty() || row_count(d.shape) <= 0) return rows;
  for (const Site& s : d.sites) {
    const auto& shape = d.slots[s.slot].arg->shape;
    // The site's coordinate along each of its input's dims (row-major).
    std::map<std::string, int64_t> at;
    size_t rest = s.element;
    for (size_t k = shape.size(); k-- > 0;) {
      const auto n = static_cast<size_t>(d.shape.at(shape[k]));
      at.emplace(shape[k], static_cast<int64_t>(rest % n));  // the innermost of a repeated dim
      rest /= n;
    }
    bool shares = false;
    for (const auto& dim : dims) shares |= at.count(dim) > 0;
    if (!shares) continue;  // every row depends on it: the random rows cover it
    // The rows that agree with the site on the row dims its input has (the others free, drawn).
    for (size_t draw = 0; draw < kRowsPerSite; ++draw) {
      int64_t row = 0;
      bool all_fixed = true;
      for (const auto& dim : dims) {
        const int64_t n = d.shape.at(dim);
        const auto it = at.find(dim);
        all_fixed &= it != at.end();
        row = row * n + (it != at.end()
                             ? it->second
                             : static_cast<int64_t>(seeds.next() % static_cast<uint64_t>(n)));
      }
      rows.push_back(row);
      if (all_fixed) break;
    }
  }
  return rows;
}

std::optional<proto::Outcome> CandidateEvaluator::Impl::time_phase(
    const CandidateSpec& c, KernelHandle handle, DType dtype, std::vector<SetData> sets,
    proto::EvaluationResult* r, const StageFn& stage,
    const std::function<void(const std::string&)>& say, bool has_progress,
    const std::function<double()>& phase_ms) {
  const Shape bench = benchmark();
  Result<LaunchGeometry> g = geometry(c, bench, dtype);
  if (!g.is_ok()) {
    stage("timed_outputs", false, g.status().message(), 0, 0);
    return proto::Outcome::kCrash;
  }
  Result<nlohmann::json> args = launch_args(c, bench, dtype);
  if (!args.is_ok()) {
    stage("timed_outputs", false, args.status().message(), 0, 0);
    return proto::Outcome::kCrash;
  }
  const bool rotate = sets.size() >= 2;
  nlohmann::json sets_json = nlohmann::json::array();
  for (auto& set : sets) sets_json.push_back(tensors_json(set.slots));
  // A new secret subset of sites per set (the values of an earlier draw restored first), as the
  // child's request wants them.
  auto draw_sites = [&] {
    nlohmann::json sites_json = nlohmann::json::array();
    for (auto& set : sets) {
      for (const Site& s : set.sites) set.values[s.slot][s.element] = s.original;
      set.sites = choose_sites(set);
      nlohmann::json list = nlohmann::json::array();
      for (const Site& s : set.sites) list.push_back(site_json(s, set.slots[s.slot]));
      sites_json.push_back(list);
    }
    return sites_json;
  };
  size_t check_cursor = timing_base;
  for (uint32_t s = 0; s < options.timing_sets; ++s)
    layout(target, bench, dtype, false, &check_cursor);
  const std::vector<std::vector<TensorSlot>> checks = check_layouts(dtype, &check_cursor);
  nlohmann::json checks_json = nlohmann::json::array();
  for (const auto& slots : checks) {
    nlohmann::json outs = nlohmann::json::array();
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].arg->role == TargetArg::Role::kOutput)
        outs.push_back({{"tensor", i}, {"offset", slots[i].offset}});
    }
    checks_json.push_back(outs);
  }
  r->metrics["inputs_ready_at_ms"] = phase_ms();
  // The references of the closing launches (one thread per set: reference code is
  // single-threaded) run while the child times the candidate -- on a GPU. On the cpu backend they
  // would take the cores the candidate is timed on, so they run after the timing.
  const auto policy = backend == "cpu" ? std::launch::deferred : std::launch::async;
  std::vector<std::future<Status>> refs;
  // The closing launches are checked on secret rows, those of the sites included, wherever the
  // reference computes single rows (else on every row): kClosingRows of them, or kSampledRows
  // where the reference is expensive (more than kExpensiveReferenceFlops: matmul, the MLP).
  const double ref_flops =
      eval_expr(target.flops_expr, expr_vars(bench, dtype, c.params)).value_or(0);
  const size_t closing_rows = ref_flops > kExpensiveReferenceFlops ? kSampledRows : kClosingRows;
  auto start_references = [&] {
    for (auto& set : sets) {
      set.rows = sampled_rows(bench, closing_rows, site_rows(set));
      refs.push_back(
          std::async(policy, [this, &set, &bench] { return compute_reference(set, bench); }));
    }
  };
  nlohmann::json req = geometry_json(*g);
  req.update({{"op", "time"},
              {"handle", handle},
              {"args", *args},
              {"sets", sets_json},
              {"warmup", options.warmup},
              {"min_samples", options.min_samples},
              {"max_samples", options.max_samples},
              {"max_ms", options.max_timing_ms},
              {"target_noise_rel", options.target_noise_rel},
              {"flush_l2", options.flush_l2},
              {"poison", kPoisonA},
              {"rotate_contents", rotate}});
  if (rotate) req["checks"] = checks_json;
  if (c.early_stop_us > 0) req["early_stop_us"] = c.early_stop_us;
  const uint32_t timeout = options.phase_timeout_ms + options.max_timing_ms * 2;
  // A sample set with no single time (timing_problem) is timed again, up to timing_attempts in
  // all, each time with fresh sites: a machine busy for a moment passes on a later attempt, a
  // kernel whose work differs between launches fails every one. The last attempt is judged.
  const uint32_t attempts = std::max<uint32_t>(1, options.timing_attempts);
  uint32_t attempt = 0;
  std::string first_problem;
  Result<nlohmann::json> reply = internal_error("not timed");
  Result<std::vector<double>> samples = internal_error("not timed");
  std::string problem;  // timing_problem() of the last attempt's samples
  SampleVerdict verdict;  // of the last attempt: the samples that count where the machine was busy
  bool early = false;   // the child stopped once the samples were clearly above early_stop_us
  for (;;) {
    if (rotate) req["sites"] = draw_sites();
    start_references();
    reply = [&] {
      // On the cpu backend the candidate is timed on the cores every other evaluator process of
      // this machine uses too: one timing at a time per machine, or each measures the others.
      CpuTimingLock lock(backend == "cpu");
      return sandbox->call(req, timeout);
    }();
    ++attempt;
    if (!reply.is_ok() || !reply->value("ok", false)) break;
    samples = numbers_of(*reply, "samples_us", 1);
    if (!samples.is_ok()) break;
    // Stopped early, a candidate's time claims nothing: it is slower than the bar even at its
    // fastest sample, so a spread that would refuse a fast time needs no second look.
    early = reply->value("stop", "") == "early";
    Result<std::vector<double>> probes = numbers_of(*reply, "probes_us", 0);
    verdict = early ? SampleVerdict{}
                    : judge_samples(*samples, probes.is_ok() ? *probes : std::vector<double>{},
                                    options.min_samples / 2);
    problem = verdict.problem;
    if (problem.empty() || attempt >= attempts) break;
    if (first_problem.empty()) first_problem = problem;
    say("time: " + problem + "; timing again with fresh sites (" + std::to_string(attempt + 1) +
        " of " + std::to_string(attempts) + ")");
    refs.clear();  // waits for references under way (they read the values the next draw moves)
  }
  r->metrics["timing_attempts"] = attempt;
  r->metrics["timed_at_ms"] = phase_ms();
  Status ref_status;
  for (auto& f : refs) {
    Status st = f.get();
    if (ref_status.is_ok()) ref_status = std::move(st);
  }
  r->metrics["references_at_ms"] = phase_ms();
  const std::string what = "timing " + shape_string(bench) + " " + std::string(dtype_name(dtype));
  auto fail = [&](proto::Outcome outcome, const std::string& detail, double worst, uint32_t cases) {
    stage("timed_outputs", false, detail, worst, cases);
    r->log = detail;
    return outcome;
  };
  // Without its reference no output can be checked: the target is broken, not the candidate.
  if (!ref_status.is_ok())
    return fail(proto::Outcome::kInternalError, what + ": " + ref_status.message(), 0, 0);
  CaseOutcome failed;
  if (!reply.is_ok())
    failed = call_failed(reply.status(), what);
  else if (!reply->value("ok", false))
    failed = reply_failed(*reply, what);
  if (failed.kind != CaseKind::kPass) {
    return fail(failed.kind == CaseKind::kTimeout ? proto::Outcome::kTimeout
                : failed.kind == CaseKind::kCrash ? proto::Outcome::kCrash
                                                  : proto::Outcome::kInternalError,
                failed.detail, 0, 0);
  }
  Result<std::vector<double>> clocks = numbers_of(*reply, "clocks_mhz", 0);
  if (!samples.is_ok() || !clocks.is_ok()) {
    const Status& bad = samples.is_ok() ? clocks.status() : samples.status();
    return fail(proto::Outcome::kInternalError, what + ": " + bad.message(), 0, 0);
  }
  // Samples taken while other processes loaded the machine are set aside where they alone made
  // the set unusable (judge_samples: those the probe's slowdown explains, where the rest holds a
  // quarter of the set and half the samples a timing takes at the least); the clocks go with
  // their samples.
  std::string busy_note;
  size_t busy = 0;
  if (!verdict.kept.empty()) {
    const size_t all = samples->size();
    busy = all - verdict.kept.size();
    std::vector<double> kept_samples, kept_clocks;
    for (size_t i : verdict.kept) {
      kept_samples.push_back((*samples)[i]);
      if (i < clocks->size()) kept_clocks.push_back((*clocks)[i]);
    }
    *samples = std::move(kept_samples);
    if (kept_clocks.size() == samples->size()) *clocks = std::move(kept_clocks);
    r->metrics["busy_samples"] = static_cast<double>(busy);
    busy_note =
        "; " + std::to_string(busy) + " of " + std::to_string(all) +
        " samples set aside, taken while other processes loaded the machine (its memory "
        "probe over " +
        fmt_double(kBusyProbeRatio) +
        "x its quiet time, the sample no slower than that explains); with them: " + verdict.busy;
  }
  if (std::string oob = guard_violations(*reply, sets[0].slots); !oob.empty()) {
    return fail(proto::Outcome::kRejected, what + ": " + oob, 0, 0);
  }
  // Which set's inputs each group held at its last launch: the reference to check it against.
  Result<std::vector<size_t>> contents = contents_of_group(*reply, sets.size());
  if (!contents.is_ok()) {
    return fail(proto::Outcome::kInternalError, what + ": " + contents.status().message(), 0, 0);
  }
  // The outputs of the closing launches must be right (docs/threats.md rows 3 and 8).
  double worst = 0;
  for (size_t grp = 0; grp < sets.size(); ++grp) {
    CaseOutcome o = check_outputs_against(sets[grp].slots, sets[(*contents)[grp]], dtype, kPoisonA);
    worst = std::max(worst, o.worst_rel);
    if (o.kind != CaseKind::kPass) {
      return fail(proto::Outcome::kWrongAnswer,
                  what + ", closing launch of group " + std::to_string(grp) + ": " + o.detail,
                  worst, static_cast<uint32_t>(sets.size()));
    }
  }
  r->metrics["closing_checked_at_ms"] = phase_ms();
  // The kept launches: each set's picks are checked in turn on that set's buffers (its values
  // get the pick's sites), the sets in parallel; on secret rows (those of the sites included)
  // wherever the reference computes single rows, so that they cost little after the timing.
  Result<std::vector<KeptLaunch>> kept =
      kept_launches(*reply, sets.size(), static_cast<uint32_t>(checks.size()),
                    sets.empty() ? 0 : sets[0].sites.size());
  if (!kept.is_ok()) {
    return fail(proto::Outcome::kInternalError, what + ": " + kept.status().message(), worst, 0);
  }
  std::vector<std::vector<KeptLaunch>> by_set(sets.size());
  // The secret rows of each pick, drawn here: the evaluator's seeds are not thread-safe.
  std::vector<std::vector<std::vector<int64_t>>> rows_of(sets.size());
  for (const KeptLaunch& k : *kept) {
    by_set[k.contents].push_back(k);
    rows_of[k.contents].push_back(sampled_rows(bench, kSampledRows, site_rows(sets[k.contents])));
  }
  std::vector<std::future<std::pair<CaseOutcome, std::string>>> picks;
  for (size_t s = 0; s < sets.size(); ++s) {
    if (by_set[s].empty()) continue;
    picks.push_back(std::async(policy, [this, &sets, &by_set, &rows_of, &checks, &bench, s, dtype] {
      SetData& d = sets[s];
      std::pair<CaseOutcome, std::string> out;
      for (size_t pick = 0; pick < by_set[s].size(); ++pick) {
        const KeptLaunch& k = by_set[s][pick];
        for (size_t b = 0; b < d.sites.size(); ++b) {
          const Site& site = d.sites[b];
          d.values[site.slot][site.element] = (k.mask >> b & 1u) ? site.changed : site.original;
        }
        d.rows = rows_of[s][pick];
        if (Status st = compute_reference(d, bench); !st.is_ok()) {
          out.first.kind = CaseKind::kInternal;
          out.second = "timed launch " + std::to_string(k.launch) + ": " + st.message();
          break;
        }
        CaseOutcome o = check_outputs_against(checks[k.slot], d, dtype, kPoisonA);
        out.first.worst_rel = std::max(out.first.worst_rel, o.worst_rel);
        if (o.kind != CaseKind::kPass) {
          out.first.kind = o.kind;
          out.second = "timed launch " + std::to_string(k.launch) +
                       " (kept at random after it ran; inputs of set " + std::to_string(s) +
                       " with a secret subset of its sites changed): " + o.detail;
          break;
        }
      }
      return out;
    }));
  }
  for (auto& p : picks) {
    auto [o, detail] = p.get();
    worst = std::max(worst, o.worst_rel);
    if (o.kind != CaseKind::kPass && failed.kind == CaseKind::kPass) {
      failed = o;
      failed.detail = what + ", " + detail;
    }
  }
  r->metrics["kept_checked_at_ms"] = phase_ms();
  const auto checked = static_cast<uint32_t>(sets.size() + kept->size());
  if (failed.kind != CaseKind::kPass) {
    return fail(failed.kind == CaseKind::kInternal ? proto::Outcome::kInternalError
                                                   : proto::Outcome::kWrongAnswer,
                failed.detail, worst, checked);
  }
  stage("timed_outputs", true,
        std::to_string(sets.size()) + " closing launches and " + std::to_string(kept->size()) +
            " timed launches kept at random" +
            (sets.empty() || sets[0].sites.empty()
                 ? ""
                 : "; every launch had a secret subset of " + std::to_string(sets[0].sites.size()) +
                       " input sites changed"),
        worst, checked);
  timing_buffers = std::move(sets);  // their host buffers serve the next candidate

  TimingStats t = timing_stats(*samples, *clocks, options.throttle_fraction);
  r->timing = {t.median_us, t.iqr_us,       t.min_us,   t.samples,
               t.noise_rel, t.sm_clock_mhz, t.throttled};
  std::string clock_note;
  if (t.max_clock_mhz > 0) {
    clock_note =
        "SM clock " + fmt_double(t.min_clock_mhz) + "-" + fmt_double(t.max_clock_mhz) + " MHz";
    if (t.throttled > 0) {
      clock_note += ", " + std::to_string(t.throttled) + " of " + std::to_string(t.samples) +
                    " samples below " + fmt_double(options.throttle_fraction * 100) +
                    "% of the top clock (kept in the median)";
    }
    r->metrics["sm_clock_min_mhz"] = t.min_clock_mhz;
    r->metrics["sm_clock_max_mhz"] = t.max_clock_mhz;
  }
  if (!problem.empty()) {
    if (attempt > 1) problem += " (in each of " + std::to_string(attempt) + " timings)";
    stage("timing", false, problem, 0, t.samples);
    r->log = problem;
    return proto::Outcome::kRejected;
  }
  r->timing.stopped_early = early;
  std::string retry_note;
  if (early) {
    retry_note = "; stopped early: even the fastest, " + fmt_double(t.min_us) +
                 " us, is slower than " + fmt_double(c.early_stop_us) +
                 " us (the most a child may take to be kept)";
  }
  if (attempt > 1)
    retry_note = "; timing " + std::to_string(attempt) + " of " + std::to_string(attempts) +
                 ", the first refused: " + first_problem;
  stage("timing", true,
        (busy_note.empty() ? "median of all " : "median of ") + std::to_string(t.samples) +
            " samples" + (clock_note.empty() ? "" : "; " + clock_note) + busy_note + retry_note,
        0, t.samples);
  ExprVars vars = expr_vars(bench, dtype, c.params);
  const double bytes = eval_expr(target.bytes_expr, vars).value_or(0);
  const double flops = eval_expr(target.flops_expr, vars).value_or(0);
  r->metrics["bytes"] = bytes;
  r->metrics["flops"] = flops;
  if (t.median_us > 0) {
    r->metrics["bytes_per_s"] = bytes / (t.median_us * 1e-6);
    r->metrics["flops_per_s"] = flops / (t.median_us * 1e-6);
  }
  // The physical floor (docs/threats.md row 9): faster than moving the bytes at the measured
  // bandwidth, or doing the flops at the measured matrix rate, is impossible.
  double floor_us = 0;
  // The ceilings themselves, for the report's roofline (docs/report.md).
  if (options.bandwidth_bytes_per_s > 0)
    r->metrics["peak_bytes_per_s"] = options.bandwidth_bytes_per_s;
  if (options.matrix_flops_per_s > 0) r->metrics["peak_flops_per_s"] = options.matrix_flops_per_s;
  if (options.bandwidth_bytes_per_s > 0) floor_us = bytes / options.bandwidth_bytes_per_s * 1e6;
  if (options.matrix_flops_per_s > 0)
    floor_us = std::max(floor_us, flops / options.matrix_flops_per_s * 1e6);
  if (floor_us > 0 && t.median_us > 0) {
    r->metrics["floor_us"] = floor_us;
    r->metrics["fraction_of_floor"] = floor_us / t.median_us;
    if (options.attainable_flops_per_s > 0 && flops > 0)  // what a good GEMM-rate would take
      r->metrics["fraction_of_attainable"] =
          flops / options.attainable_flops_per_s * 1e6 / t.median_us;
    // 3% below the floor is allowed for ceiling measurement noise.
    if (t.median_us < 0.97 * floor_us) {
      stage("floor", false,
            "median " + fmt_double(t.median_us) + " us is below the physical floor of " +
                fmt_double(floor_us) + " us: impossible, rejected",
            0, 1);
      return proto::Outcome::kRejected;
    }
    stage("floor", true, "", 0, 1);
  }
  say("time: median " + fmt_double(t.median_us) + " us, IQR " + fmt_double(t.iqr_us) + " us, " +
      std::to_string(t.samples) + " samples, noise " + fmt_double(t.noise_rel * 100) + "%" +
      (clock_note.empty() ? "" : ", " + clock_note) +
      (busy == 0 ? "" : " (" + std::to_string(busy) + " more set aside: the machine was busy)"));
  if (options.profile || c.profile) {
    profile_phase(handle, *g, *args, sets_json[0], r, say, has_progress);
    r->metrics["profiled_at_ms"] = phase_ms();
  }
  return std::nullopt;
}

}  // namespace kiln::eval
