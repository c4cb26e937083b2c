// ChildServer's "time" op: the timing loop with rotated contents, secret per-launch sites, the
// reservoir of kept launches and the closing launches (protocol in sandbox_child.cc).
#include <algorithm>
#include <chrono>
#include <optional>

#include "evaluator/launch_schedule.h"
#include "evaluator/sandbox_child_server.h"

namespace kiln::eval::child {

Result<json> ChildServer::do_time(JsonFields& f) {
  KILN_ASSIGN_OR_RETURN(TimeRequest t, parse_time_request(f, arena_));
  const size_t k = t.sets.size();
  std::vector<std::vector<void*>> buffers;  // the groups the kernel is launched on
  std::vector<std::vector<void*>> staging;  // rotate_contents: each set's inputs, never launched on
  for (const auto& tensors : t.sets) {
    KILN_ASSIGN_OR_RETURN(auto placed, place(tensors, t.launch.poison));
    buffers.push_back(std::move(placed));
    if (t.rotate_contents) {
      KILN_ASSIGN_OR_RETURN(auto inputs, place_inputs(tensors));
      staging.push_back(std::move(inputs));
    }
  }
  std::vector<std::vector<KernelArg>> args;
  for (const auto& b : buffers) {
    KILN_ASSIGN_OR_RETURN(auto a, kernel_args(t.launch, b));
    args.push_back(std::move(a));
  }

  // Where kept launches' outputs wait on the device until the end (one buffer per output).
  std::vector<std::vector<void*>> kept(t.checks.size());
  for (size_t slot = 0; slot < t.checks.size(); ++slot) {
    for (const auto& [tensor, offset] : t.checks[slot]) {
      auto buffer = buffers_.acquire(std::max<uint64_t>(t.sets[0][tensor].bytes, 1));
      if (!buffer.is_ok()) return device_status(buffer.status(), true);
      kept[slot].push_back(*buffer);
    }
  }
  const uint32_t site_count = t.sites.empty() ? 0 : static_cast<uint32_t>(t.sites[0].size());
  LaunchSchedule schedule(k, site_count, static_cast<uint32_t>(t.checks.size()));
  struct KeptLaunch {
    uint64_t launch = 0;
    size_t contents = 0;
    uint32_t mask = 0;
  };
  std::vector<std::optional<KeptLaunch>> kept_meta(t.checks.size());

  // Puts set `c`'s inputs into group `g` with the sites of `mask` applied.
  auto load_contents = [&](size_t g, size_t c, uint32_t mask) -> Status {
    for (size_t i = 0; i < t.sets[g].size(); ++i) {
      if (t.sets[g][i].out || t.sets[g][i].scratch) continue;
      Status s = device_.copy_on_device(buffers[g][i], staging[c][i], t.sets[g][i].bytes);
      KILN_RETURN_IF_ERROR(device_status(std::move(s), true));
    }
    for (uint32_t bit = 0; bit < site_count; ++bit) {
      if (!(mask >> bit & 1u)) continue;
      const InputPatch& p = t.sites[c][bit];
      void* dst = static_cast<unsigned char*>(buffers[g][p.tensor]) + p.offset;
      Status s = device_.copy_to_device(dst, p.bytes.data(), p.bytes.size());
      KILN_RETURN_IF_ERROR(device_status(std::move(s), true));
    }
    return Status::ok();
  };

  // Readies the group of the next launch (warm-up and timed alike) and returns its index.
  std::vector<size_t> contents(k);
  std::vector<uint32_t> masks(k, 0);
  for (size_t g = 0; g < k; ++g) contents[g] = g;
  uint64_t launches = 0;
  auto next_group = [&]() -> Result<size_t> {
    const size_t g = launches % k;
    if (t.rotate_contents) {
      const size_t c = (g + launches / k) % k;
      masks[g] = schedule.next_mask(c);
      KILN_RETURN_IF_ERROR(load_contents(g, c, masks[g]));
      contents[g] = c;
    }
    KILN_RETURN_IF_ERROR(poison_outputs(t.sets[g], buffers[g], t.launch.poison));
    ++launches;
    return g;
  };
  // With rotation, the loop ends only after a whole round whose contents are no group's first.
  auto rotation_may_end = [&] {
    return !t.rotate_contents || (launches % k == 0 && (launches / k - 1) % k != 0);
  };

  for (int64_t w = 0; w < t.warmup; ++w) {
    KILN_ASSIGN_OR_RETURN(size_t g, next_group());
    Status launched = device_.launch(t.launch.handle, t.launch.geometry, args[g]);
    KILN_RETURN_IF_ERROR(device_status(std::move(launched), true));
  }
  KILN_RETURN_IF_ERROR(device_status(device_.synchronize(), true));

  std::vector<double> samples_us;
  std::vector<int> clocks_mhz;
  std::vector<double> probes_us;  // the device's machine probe before each sample (0: none)
  std::string stop;
  double noise_rel = 1.0;
  const auto start = std::chrono::steady_clock::now();
  while (stop.empty() || !rotation_may_end()) {
    KILN_ASSIGN_OR_RETURN(size_t g, next_group());
    auto time = device_.time_launch(t.launch.handle, t.launch.geometry, args[g], t.flush_l2);
    if (!time.is_ok()) return device_status(time.status(), true);
    samples_us.push_back(*time);
    clocks_mhz.push_back(device_.sm_clock_mhz());
    probes_us.push_back(device_.machine_probe_us());
    // Kept or not is decided after the launch, outside the timed region (docs/threats.md row 16).
    if (int slot = schedule.keep_slot(samples_us.size() - 1); slot >= 0) {
      for (size_t o = 0; o < t.checks[slot].size(); ++o) {
        const size_t tensor = t.checks[slot][o].first;
        Status s =
            device_.copy_on_device(kept[slot][o], buffers[g][tensor], t.sets[g][tensor].bytes);
        KILN_RETURN_IF_ERROR(device_status(std::move(s), true));
      }
      kept_meta[slot] = KeptLaunch{launches - 1, contents[g], masks[g]};
    }
    if (!stop.empty()) continue;  // only finishing the rotation's round
    const auto n = static_cast<int64_t>(samples_us.size());
    double elapsed_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // Clearly slower than the bar: even the fastest sample so far is above it.
    if (t.early_stop_us > 0 && n >= TimeRequest::kEarlyStopSamples &&
        *std::min_element(samples_us.begin(), samples_us.end()) > t.early_stop_us) {
      stop = "early";
      continue;
    }
    if (n >= t.min_samples && (n == t.min_samples || n % 5 == 0)) {
      noise_rel = relative_iqr(samples_us);
      if (noise_rel < t.target_noise_rel) stop = "noise";
    }
    if (stop.empty() && n >= t.max_samples) stop = "max_samples";
    if (stop.empty() && elapsed_ms >= t.max_ms) stop = "max_ms";
  }
  noise_rel = relative_iqr(samples_us);
  if (site_count > 0) {
    // The closing launch of each group: its own set's inputs with every site applied, contents
    // no launch has had before, timed like the others (the sample is not kept). The parent
    // computed this launch's reference while the others ran and checks these outputs.
    for (size_t g = 0; g < k; ++g) {
      KILN_RETURN_IF_ERROR(load_contents(g, g, schedule.full_mask()));
      KILN_RETURN_IF_ERROR(poison_outputs(t.sets[g], buffers[g], t.launch.poison));
      auto time = device_.time_launch(t.launch.handle, t.launch.geometry, args[g], t.flush_l2);
      if (!time.is_ok()) return device_status(time.status(), true);
      contents[g] = g;
      masks[g] = schedule.full_mask();
    }
  }
  for (size_t g = 0; g < k; ++g) KILN_RETURN_IF_ERROR(copy_back(t.sets[g], buffers[g]));
  KILN_ASSIGN_OR_RETURN(json guards, guard_report());
  json kept_json = json::array();
  for (size_t slot = 0; slot < kept.size(); ++slot) {
    if (!kept_meta[slot]) continue;
    for (size_t o = 0; o < t.checks[slot].size(); ++o) {
      const auto& [tensor, offset] = t.checks[slot][o];
      Status s =
          device_.copy_to_host(arena_.data() + offset, kept[slot][o], t.sets[0][tensor].bytes);
      KILN_RETURN_IF_ERROR(device_status(std::move(s), true));
    }
    kept_json.push_back({{"slot", slot},
                         {"launch", kept_meta[slot]->launch},
                         {"contents", kept_meta[slot]->contents},
                         {"mask", kept_meta[slot]->mask}});
  }
  return json{{"ok", true},
              {"samples_us", samples_us},
              {"clocks_mhz", clocks_mhz},
              {"probes_us", probes_us},
              {"noise_rel", noise_rel},
              {"stop", stop},
              {"contents_of_group", contents},
              {"masks_of_group", masks},
              {"kept", kept_json},
              {"guards", guards}};
}

}  // namespace kiln::eval::child
