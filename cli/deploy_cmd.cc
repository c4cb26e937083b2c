// See deploy_cmd.h.
#include "cli/deploy_cmd.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/k8s_manifests.h"
#include "cli/run_support.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct DeployArgs {
  K8sOptions k8s;
  std::string out = "kiln-k8s";
  std::vector<std::string> gpus;
  std::string sweep_targets;
  bool force = false;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "kiln deploy k8s: %s\n", message.c_str());
  return 2;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string part =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int render(DeployArgs a) {
  for (const std::string& g : a.gpus) {
    for (const std::string& item : split_commas(g)) {
      const size_t eq = item.rfind('=');
      int count = 1;
      if (eq != std::string::npos) {
        try {
          size_t used = 0;
          count = std::stoi(item.substr(eq + 1), &used);
          if (used != item.size() - eq - 1) throw std::invalid_argument(item);
        } catch (const std::exception&) {
          return fail("--gpus '" + item + "': expected PRODUCT=COUNT");
        }
      }
      a.k8s.gpus.emplace_back(item.substr(0, eq), count);
    }
  }
  a.k8s.sweep_targets = split_commas(a.sweep_targets);
  Result<std::chrono::seconds> budget = parse_duration(a.k8s.budget);
  if (!budget.is_ok()) return fail(budget.status().message());
  if (budget->count() <= 0) return fail("--budget: the run needs some time, e.g. 8h");
  Result<std::vector<RenderedFile>> files = render_k8s(a.k8s);
  if (!files.is_ok()) return fail(files.status().message());
  std::error_code ec;
  if (fs::exists(a.out, ec) && !fs::is_empty(a.out, ec) && !a.force)
    return fail(a.out + " is not empty: choose another --out, or --force to write over it");
  fs::create_directories(a.out, ec);
  if (ec) return fail("creating " + a.out + ": " + ec.message());
  // --force over an earlier deploy: its manifests that this one does not write (a sweep's) would
  // still be applied by `kubectl apply -f DIR/`.
  for (const auto& e : fs::directory_iterator(a.out, ec)) {
    const std::string name = e.path().filename().string();
    const bool ours = name.size() > 8 && std::isdigit(static_cast<unsigned char>(name[0])) &&
                      std::isdigit(static_cast<unsigned char>(name[1])) && name[2] == '-' &&
                      name.substr(name.size() - 5) == ".yaml";
    const bool written = std::any_of(files->begin(), files->end(),
                                     [&](const RenderedFile& f) { return f.name == name; });
    if (ours && !written) {
      fs::remove(e.path(), ec);
      std::printf("removed %s (an earlier deploy's)\n", e.path().string().c_str());
    }
  }
  for (const RenderedFile& f : *files) {
    const std::string path = (fs::path(a.out) / f.name).string();
    std::ofstream file(path, std::ios::trunc);
    file << f.text;
    if (!file.good()) return fail("writing " + path);
    file.close();
    if (f.name.size() > 3 && f.name.substr(f.name.size() - 3) == ".sh") ::chmod(path.c_str(), 0755);
    std::printf("wrote %s\n", path.c_str());
  }
  std::printf(
      "\nnext:\n"
      "  kubectl apply -f %s/00-namespace.yaml\n"
      "  KILN=$(command -v kiln) sh %s/secrets.sh      # keys and the Redis password, as Secrets\n"
      "  kubectl apply -f %s/\n"
      "watch: kubectl -n %s logs -f job/kiln-coordinator    stop: kubectl delete namespace %s\n",
      a.out.c_str(), a.out.c_str(), a.out.c_str(), a.k8s.name_space.c_str(),
      a.k8s.name_space.c_str());
  return 0;
}

}  // namespace

void add_deploy_command(CLI::App& app, std::function<int()>& action) {
  CLI::App* deploy = app.add_subcommand(
      "deploy", "Write what a scheduler needs to run kiln (docs/deploy.md): `kiln deploy k8s`");
  deploy->require_subcommand(1);
  auto a = std::make_shared<DeployArgs>();
  CLI::App* k8s = deploy->add_subcommand(
      "k8s",
      "Write Kubernetes manifests for one run: Redis (StatefulSet, AOF on a volume claim, an ACL\n"
      "user), the coordinator (Job and Service, probes), evaluators (a Job per GPU product, one\n"
      "pod per GPU), built-in agents, optionally a sweep (an Indexed Job), and secrets.sh, which\n"
      "makes the CURVE keys and the Redis password as Secrets. Nothing is applied.");
  k8s->add_option("--out", a->out, "Folder for the files")->capture_default_str();
  k8s->add_option(
         "--image", a->k8s.image,
         "kiln's image for Redis, the coordinator and agents, pinned (REPO:TAG or @sha256)")
      ->required();
  k8s->add_option("--evaluator-image", a->k8s.evaluator_image,
                  "kiln's evaluator image (with the CUDA toolkit's NVRTC), pinned")
      ->required();
  k8s->add_option("--gpus", a->gpus,
                  "GPU products and counts: PRODUCT=N[,PRODUCT=N], PRODUCT as the node label\n"
                  "nvidia.com/gpu.product shows it (e.g. NVIDIA-H100-80GB-HBM3=8)")
      ->required();
  k8s->add_option("--namespace", a->k8s.name_space, "Namespace of every object")
      ->capture_default_str();
  k8s->add_option("--targets", a->k8s.targets, "Targets to search (default: every built-in one)");
  k8s->add_option("--budget", a->k8s.budget, "The run's time budget")->capture_default_str();
  k8s->add_option("--agents", a->k8s.agents, "Built-in proposal agents")->capture_default_str();
  k8s->add_option("--storage", a->k8s.storage, "Size of Redis's volume claim")
      ->capture_default_str();
  k8s->add_option("--storage-class", a->k8s.storage_class,
                  "Storage class of the claims (default: the cluster's)");
  k8s->add_option("--sweep-targets", a->sweep_targets,
                  "Also a sweep: one `kiln run` per target, each on one GPU (comma-separated)");
  k8s->add_option("--sweep-gpu", a->k8s.sweep_gpu, "The GPU product the sweep runs on");
  k8s->add_flag("--force", a->force, "Write into a folder that is not empty");
  k8s->callback([&action, a] { action = [a] { return render(*a); }; });
}

}  // namespace kiln::cli
