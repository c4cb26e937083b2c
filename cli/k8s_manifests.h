// Kubernetes manifests for one kiln run (`kiln deploy k8s`, docs/deploy.md): Redis as a
// StatefulSet with its AOF on a volume claim, the coordinator, evaluators (one pod per GPU, a group
// per GPU product so each model gets its own), built-in agents, and optionally a sweep as an
// Indexed Job. Keys and the Redis password live in Secrets that secrets.sh makes; the manifests
// only name them.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "shared/status.h"

namespace kiln::cli {

struct K8sOptions {
  std::string name_space = "kiln";
  std::string image;            // kiln without CUDA: Redis, the coordinator, agents
  std::string evaluator_image;  // kiln with the CUDA toolkit's NVRTC: evaluators, the sweep
  // GPU product (the node label nvidia.com/gpu.product, e.g. NVIDIA-H100-80GB-HBM3) -> pods,
  // each with one GPU.
  std::vector<std::pair<std::string, int>> gpus;
  std::string targets;  // comma-separated; empty: every built-in target
  std::string budget = "8h";
  int agents = 1;
  std::string storage = "10Gi";  // Redis's volume claim
  std::string storage_class;     // empty: the cluster's default
  // A sweep: one `kiln run` per target on one GPU of `sweep_gpu`, an Indexed Job.
  std::vector<std::string> sweep_targets;
  std::string sweep_gpu;
};

// One file of the output: its name and its text.
struct RenderedFile {
  std::string name;
  std::string text;
};

// Checks the options (images pinned by a tag other than "latest" or by digest, names Kubernetes
// accepts, counts at least 1) and renders the files: YAML manifests and secrets.sh.
Result<std::vector<RenderedFile>> render_k8s(const K8sOptions& options);

// "NVIDIA-H100-80GB-HBM3" -> "nvidia-h100-80gb-hbm3": a name part Kubernetes accepts.
std::string k8s_name_part(const std::string& text);

}  // namespace kiln::cli
