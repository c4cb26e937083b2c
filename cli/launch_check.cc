#include "cli/launch_check.h"

#include "evaluator/evaluation.h"
#include "shared/tensor_map_spec.h"

namespace kiln::cli {

std::vector<LaunchProblem> launch_problems(const TargetSpec& t, const std::string& backend,
                                           const BackendSpec& b, const KernelSpec& spec,
                                           const std::map<std::string, std::string>& params) {
  std::vector<Shape> shapes = t.verification_shapes();
  shapes.insert(shapes.begin(), t.benchmark_for(backend));
  std::vector<LaunchProblem> problems;
  for (const Shape& sh : shapes) {
    for (DType d : b.dtypes) {
      Result<eval::LaunchGeometry> g = eval::launch_geometry(spec, sh, d, params);
      std::string why;
      if (!g.is_ok()) {
        why = g.status().message();
      } else if (backend == "cuda") {
        const uint64_t threads = uint64_t{g->block[0]} * g->block[1] * g->block[2];
        if (threads == 0 || threads > kMaxThreadsPerBlock) {
          why = std::to_string(threads) + " threads per block";
        }
        if (g->shared_bytes > kMaxSharedBytes) {
          why = std::to_string(g->shared_bytes) + " bytes of shared memory";
        }
        if (g->grid[0] == 0 || g->grid[1] == 0 || g->grid[2] == 0) why = "an empty grid";
      }
      if (why.empty()) {
        Result<std::vector<TensorMapArg>> maps = tensor_maps_at(t, spec.tensor_maps, params, sh, d);
        if (!maps.is_ok()) why = maps.status().message();
      }
      if (!why.empty()) {
        problems.push_back({sh, d, why});
        break;
      }
    }
  }
  return problems;
}

}  // namespace kiln::cli
