// See k8s_manifests.h. Every run-scoped workload is a Job (restartPolicy OnFailure): a run
// finishes, and a Deployment would start a finished coordinator again; a pod lost to a node is
// made again by its Job, and the coordinator's --resume-if-any continues the run from Redis.
#include "cli/k8s_manifests.h"

#include <cctype>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/yaml_text.h"
#include "shared/text.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;

constexpr int kUid = 10001;
constexpr int kCoordinatorPort = 5555;
constexpr int kHttpPort = 9464;  // the coordinator's /status, /metrics and probes (docs/observe.md)
constexpr int kRedisPort = 6379;
constexpr int kSecretMode = 0400;

// Where the init container copies the Secrets, owned by the pod's user with mode 0600 (kiln
// refuses key and password files that others may read; a Secret volume under fsGroup is 0440).
constexpr const char* kKeysDir = "/run/kiln";

json labels(const std::string& component) {
  return {{"app.kubernetes.io/name", "kiln"},
          {"app.kubernetes.io/part-of", "kiln"},
          {"app.kubernetes.io/component", component}};
}

json metadata(const K8sOptions& o, const std::string& name, const std::string& component) {
  return {{"name", name}, {"namespace", o.name_space}, {"labels", labels(component)}};
}

json container_security() {
  return {{"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"capabilities", {{"drop", {"ALL"}}}}};
}

json pod_security() {
  return {{"runAsNonRoot", true},
          {"runAsUser", kUid},
          {"runAsGroup", kUid},
          {"fsGroup", kUid},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

// A Secret as a volume, and where the init container finds it.
struct SecretMount {
  std::string secret;  // the Secret's name
  std::string into;    // a folder under kKeysDir, or "" for kKeysDir itself
};

// The pod's volumes and the init container that puts its Secrets' files under kKeysDir.
void add_secrets(const std::vector<SecretMount>& secrets, const std::string& image, json* pod) {
  json& volumes = (*pod)["volumes"];
  json mounts = json::array();
  std::string script = "set -e; umask 077";
  for (const SecretMount& s : secrets) {
    volumes.push_back(
        {{"name", s.secret}, {"secret", {{"secretName", s.secret}, {"defaultMode", kSecretMode}}}});
    mounts.push_back(
        {{"name", s.secret}, {"mountPath", "/run/secrets/" + s.secret}, {"readOnly", true}});
    const std::string to = std::string(kKeysDir) + (s.into.empty() ? "" : "/" + s.into);
    script += "; mkdir -p " + to + "; cp -L /run/secrets/" + s.secret + "/* " + to + "/";
  }
  volumes.push_back({{"name", "keys"}, {"emptyDir", {{"medium", "Memory"}}}});
  mounts.push_back({{"name", "keys"}, {"mountPath", kKeysDir}});
  (*pod)["initContainers"] = json::array({{{"name", "keys"},
                                           {"image", image},
                                           {"command", {"sh", "-c", script}},
                                           {"volumeMounts", mounts},
                                           {"securityContext", container_security()}}});
}

json keys_mount() { return {{"name", "keys"}, {"mountPath", kKeysDir}, {"readOnly", true}}; }

// The root filesystem is read-only: kiln's caches (under $HOME/.cache) go to /tmp.
json home_env() { return {{"name", "HOME"}, {"value", "/tmp"}}; }

json tmp_volume() { return {{"name", "tmp"}, {"emptyDir", json::object()}}; }
json tmp_mount() { return {{"name", "tmp"}, {"mountPath", "/tmp"}}; }

// The coordinator's own probes: /healthz (its search loop is alive) and /readyz (it searches).
json http_probe(const char* path, int initial_s, int period_s) {
  return {{"httpGet", {{"path", path}, {"port", "http"}}},
          {"initialDelaySeconds", initial_s},
          {"periodSeconds", period_s},
          {"failureThreshold", 6}};
}

json tcp_probe(int port, int initial_s, int period_s) {
  return {{"tcpSocket", {{"port", port}}},
          {"initialDelaySeconds", initial_s},
          {"periodSeconds", period_s},
          {"failureThreshold", 6}};
}

// `kiln selftest` (Redis and ZeroMQ round trips in the container) as a liveness probe.
json selftest_probe() {
  return {{"exec", {{"command", {"kiln", "selftest"}}}},
          {"initialDelaySeconds", 60},
          {"periodSeconds", 300},
          {"timeoutSeconds", 60},
          {"failureThreshold", 3}};
}

std::string coordinator_address(const K8sOptions& o) {
  return "tcp://kiln-coordinator." + o.name_space +
         ".svc.cluster.local:" + std::to_string(kCoordinatorPort);
}

// A Job whose pods run `containers`, `parallelism` at a time until `completions` succeed.
json job(const K8sOptions& o, const std::string& name, const std::string& component,
         int completions, json pod) {
  pod["restartPolicy"] = "OnFailure";
  pod["securityContext"] = pod_security();
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", metadata(o, name, component)},
          {"spec",
           {{"completions", completions},
            {"parallelism", completions},
            {"backoffLimit", 10 * completions},
            {"template", {{"metadata", {{"labels", labels(component)}}}, {"spec", pod}}}}}};
}

json gpu_resources() {
  return {{"limits", {{"nvidia.com/gpu", 1}}}, {"requests", {{"cpu", "4"}, {"memory", "16Gi"}}}};
}

std::vector<json> namespace_docs(const K8sOptions& o) {
  return {{{"apiVersion", "v1"},
           {"kind", "Namespace"},
           {"metadata", {{"name", o.name_space}, {"labels", labels("namespace")}}}}};
}

std::vector<json> redis_docs(const K8sOptions& o) {
  json service = {{"apiVersion", "v1"},
                  {"kind", "Service"},
                  {"metadata", metadata(o, "kiln-redis", "redis")},
                  {"spec",
                   {{"clusterIP", "None"},
                    {"selector", labels("redis")},
                    {"ports", {{{"name", "redis"}, {"port", kRedisPort}}}}}}};
  // The default user is off; kiln's user reaches kiln's keys only, with the Secret's password.
  const std::string start =
      "exec redis-server --port " + std::to_string(kRedisPort) +
      " --bind 0.0.0.0 --protected-mode no --appendonly yes --dir /data --user default off"
      " --user kiln on \">$REDIS_PASSWORD\" '~kiln:*' '&*' '+@all'";
  json claim_spec = {{"accessModes", {"ReadWriteOnce"}},
                     {"resources", {{"requests", {{"storage", o.storage}}}}}};
  if (!o.storage_class.empty()) claim_spec["storageClassName"] = o.storage_class;
  json container = {
      {"name", "redis"},
      {"image", o.image},
      {"command", {"sh", "-c", start}},
      {"env",
       {{{"name", "REDIS_PASSWORD"},
         {"valueFrom", {{"secretKeyRef", {{"name", "kiln-redis"}, {"key", "password"}}}}}}}},
      {"ports", {{{"name", "redis"}, {"containerPort", kRedisPort}}}},
      {"volumeMounts", {{{"name", "data"}, {"mountPath", "/data"}}}},
      {"readinessProbe", tcp_probe(kRedisPort, 2, 5)},
      {"livenessProbe", tcp_probe(kRedisPort, 10, 20)},
      {"resources", {{"requests", {{"cpu", "1"}, {"memory", "2Gi"}}}}},
      {"securityContext", container_security()}};
  json set = {{"apiVersion", "apps/v1"},
              {"kind", "StatefulSet"},
              {"metadata", metadata(o, "kiln-redis", "redis")},
              {"spec",
               {{"serviceName", "kiln-redis"},
                {"replicas", 1},
                {"selector", {{"matchLabels", labels("redis")}}},
                {"template",
                 {{"metadata", {{"labels", labels("redis")}}},
                  {"spec", {{"securityContext", pod_security()}, {"containers", {container}}}}}},
                {"volumeClaimTemplates",
                 {{{"metadata", {{"name", "data"}, {"labels", labels("redis")}}},
                   {"spec", claim_spec}}}}}}};
  return {service, set};
}

std::vector<json> coordinator_docs(const K8sOptions& o) {
  json service = {{"apiVersion", "v1"},
                  {"kind", "Service"},
                  {"metadata", metadata(o, "kiln-coordinator", "coordinator")},
                  {"spec",
                   {{"selector", labels("coordinator")},
                    {"ports",
                     {{{"name", "zmq"}, {"port", kCoordinatorPort}},
                      {{"name", "http"}, {"port", kHttpPort}}}}}}};
  json claim_spec = {{"accessModes", {"ReadWriteOnce"}},
                     {"resources", {{"requests", {{"storage", "1Gi"}}}}}};
  if (!o.storage_class.empty()) claim_spec["storageClassName"] = o.storage_class;
  json claim = {{"apiVersion", "v1"},
                {"kind", "PersistentVolumeClaim"},
                {"metadata", metadata(o, "kiln-output", "coordinator")},
                {"spec", claim_spec}};
  const std::string keys = kKeysDir;
  json args = {"coordinator",
               "--bind",
               "tcp://0.0.0.0:" + std::to_string(kCoordinatorPort),
               "--backend",
               "cuda",
               "--gpu-models",
               "auto",
               "--budget",
               o.budget,
               "--redis",
               "redis://kiln@kiln-redis-0.kiln-redis." + o.name_space +
                   ".svc.cluster.local:" + std::to_string(kRedisPort),
               "--redis-password-file",
               keys + "/redis/password",
               "--curve-secret",
               keys + "/coordinator.key",
               "--allow",
               keys + "/allow",
               "--out",
               "/data/out",
               "--http",
               "0.0.0.0:" + std::to_string(kHttpPort),
               "--resume-if-any"};
  if (!o.targets.empty()) args.insert(args.begin() + 1, {"--targets", o.targets});
  json pod = {{"volumes",
               {tmp_volume(),
                {{"name", "output"}, {"persistentVolumeClaim", {{"claimName", "kiln-output"}}}}}}};
  add_secrets({{"kiln-coordinator-key", ""}, {"kiln-workers", "allow"}, {"kiln-redis", "redis"}},
              o.image, &pod);
  pod["containers"] = json::array(
      {{{"name", "coordinator"},
        {"image", o.image},
        {"command", {"kiln"}},
        {"args", args},
        {"env", {home_env()}},
        {"ports",
         {{{"name", "zmq"}, {"containerPort", kCoordinatorPort}},
          {{"name", "http"}, {"containerPort", kHttpPort}}}},
        {"volumeMounts", {keys_mount(), tmp_mount(), {{"name", "output"}, {"mountPath", "/data"}}}},
        {"readinessProbe", http_probe("/readyz", 5, 10)},
        {"livenessProbe", http_probe("/healthz", 30, 20)},
        {"resources", {{"requests", {{"cpu", "2"}, {"memory", "4Gi"}}}}},
        {"securityContext", container_security()}}});
  return {service, claim, job(o, "kiln-coordinator", "coordinator", 1, pod)};
}

// A worker's pod: its key, the coordinator's public key, the address.
json worker_pod(const K8sOptions& o, const std::string& name, const std::string& image,
                const std::string& key, json args) {
  const std::string keys = kKeysDir;
  for (const std::string& a :
       {std::string("--connect"), coordinator_address(o), std::string("--worker-id"),
        std::string("$(POD_NAME)"), std::string("--curve-secret"), keys + "/" + key + ".key",
        std::string("--coordinator-key"), keys + "/coordinator.pub"})
    args.push_back(a);
  json pod = {{"volumes", {tmp_volume()}}};
  add_secrets({{"kiln-" + key + "-key", ""}, {"kiln-coordinator-pub", ""}}, image, &pod);
  pod["containers"] = json::array(
      {{{"name", name},
        {"image", image},
        {"command", {"kiln"}},
        {"args", args},
        {"env",
         {home_env(),
          {{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}}}},
        {"volumeMounts", {keys_mount(), tmp_mount()}},
        {"livenessProbe", selftest_probe()},
        {"securityContext", container_security()}}});
  return pod;
}

std::vector<json> evaluator_docs(const K8sOptions& o) {
  std::vector<json> docs;
  for (const auto& [product, count] : o.gpus) {
    json pod = worker_pod(
        o, "evaluator", o.evaluator_image, "evaluator",
        {"evaluator", "--backend", "cuda", "--gpu", "0", "--cache-dir", "/tmp/kiln-cache"});
    pod["containers"][0]["resources"] = gpu_resources();
    pod["nodeSelector"] = {{"nvidia.com/gpu.product", product}};
    docs.push_back(job(o, "kiln-evaluator-" + k8s_name_part(product), "evaluator", count, pod));
  }
  return docs;
}

std::vector<json> agent_docs(const K8sOptions& o) {
  json pod = worker_pod(o, "agent", o.image, "agent", {"agent", "--proposer", "builtin"});
  pod["containers"][0]["resources"] = {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}};
  return {job(o, "kiln-agent", "agent", o.agents, pod)};
}

std::vector<json> sweep_docs(const K8sOptions& o) {
  std::string list;
  for (const auto& t : o.sweep_targets) list += " " + t;
  const std::string script = "set -e; set --" + list + "; shift \"$JOB_COMPLETION_INDEX\"; " +
                             "exec kiln run --backend cuda --targets \"$1\" --budget " + o.budget +
                             " --out \"/out/$1\"";
  json claim = {
      {"apiVersion", "v1"},
      {"kind", "PersistentVolumeClaim"},
      {"metadata", metadata(o, "kiln-sweep", "sweep")},
      {"spec",
       {{"accessModes", {"ReadWriteMany"}}, {"resources", {{"requests", {{"storage", "5Gi"}}}}}}}};
  if (!o.storage_class.empty()) claim["spec"]["storageClassName"] = o.storage_class;
  json pod = {
      {"volumes",
       {tmp_volume(), {{"name", "out"}, {"persistentVolumeClaim", {{"claimName", "kiln-sweep"}}}}}},
      {"nodeSelector", {{"nvidia.com/gpu.product", o.sweep_gpu}}},
      {"containers",
       {{{"name", "sweep"},
         {"image", o.evaluator_image},
         {"command", {"sh", "-c", script}},
         {"env", {home_env()}},
         {"volumeMounts", {tmp_mount(), {{"name", "out"}, {"mountPath", "/out"}}}},
         {"resources", gpu_resources()},
         {"livenessProbe", selftest_probe()},
         {"securityContext", container_security()}}}}};
  json sweep = job(o, "kiln-sweep", "sweep", static_cast<int>(o.sweep_targets.size()), pod);
  sweep["spec"]["completionMode"] = "Indexed";
  return {claim, sweep};
}

std::string secrets_script(const K8sOptions& o) {
  return "#!/bin/sh\n"
         "# Makes the Secrets that kiln's manifests name, in namespace " +
         o.name_space +
         ":\n"
         "# CURVE keys (`kiln keys new`) for the coordinator, the evaluators and the agents, and "
         "a\n"
         "# random password for Redis's kiln user. Nothing secret is left on disk. Run it once,\n"
         "# after 00-namespace.yaml and before the rest: KILN=/path/to/kiln sh secrets.sh\n"
         "set -eu\n"
         "ns=" +
         o.name_space +
         "\n"
         "kiln=${KILN:-kiln}\n"
         "dir=$(mktemp -d)\n"
         "trap 'rm -rf \"$dir\"' EXIT\n"
         "\"$kiln\" keys new --out \"$dir\" --name coordinator >/dev/null\n"
         "\"$kiln\" keys new --out \"$dir/workers\" --name evaluator >/dev/null\n"
         "\"$kiln\" keys new --out \"$dir/workers\" --name agent >/dev/null\n"
         "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > \"$dir/password\"\n"
         "kubectl -n \"$ns\" create secret generic kiln-redis "
         "--from-file=password=\"$dir/password\"\n"
         "kubectl -n \"$ns\" create secret generic kiln-coordinator-key"
         " --from-file=coordinator.key=\"$dir/coordinator.key\"\n"
         "kubectl -n \"$ns\" create secret generic kiln-coordinator-pub"
         " --from-file=coordinator.pub=\"$dir/coordinator.pub\"\n"
         "kubectl -n \"$ns\" create secret generic kiln-workers"
         " --from-file=evaluator.pub=\"$dir/workers/evaluator.pub\""
         " --from-file=agent.pub=\"$dir/workers/agent.pub\"\n"
         "kubectl -n \"$ns\" create secret generic kiln-evaluator-key"
         " --from-file=evaluator.key=\"$dir/workers/evaluator.key\"\n"
         "kubectl -n \"$ns\" create secret generic kiln-agent-key"
         " --from-file=agent.key=\"$dir/workers/agent.key\"\n";
}

// Why `image` may not go into a manifest, or "".
std::string image_problem(const std::string& what, const std::string& image) {
  if (image.empty()) return what + " is required";
  for (unsigned char c : image) {
    if (c <= 0x20 || c >= 0x7f) {
      return what + " '" + log_safe(image, 100) +
             "' holds a space or control character: an image reference has none";
    }
  }
  if (image.find('@') != std::string::npos) return "";  // pinned by digest
  const size_t slash = image.rfind('/');
  const size_t colon = image.rfind(':');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash))
    return what + " '" + image + "' has no tag: pin it (REPO:TAG or REPO@sha256:...)";
  if (image.substr(colon + 1) == "latest")
    return what + " '" + image + "' uses the tag 'latest', which moves: pin a version";
  return "";
}

// A resource quantity as a volume claim takes it: digits, an optional fraction and a suffix.
bool k8s_quantity(const std::string& s) {
  static const std::regex quantity(R"(^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$)");
  return std::regex_match(s, quantity);
}

bool dns_subdomain(const std::string& s) {
  static const std::regex subdomain(R"(^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$)");
  return std::regex_match(s, subdomain);
}

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string part; std::getline(in, part, ',');) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

bool dns_label(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-'))
      return false;
  }
  return true;
}

bool label_value(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  }
  return std::isalnum(static_cast<unsigned char>(s.front())) &&
         std::isalnum(static_cast<unsigned char>(s.back()));
}

}  // namespace

std::string k8s_name_part(const std::string& text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.substr(0, 40);
}

Result<std::vector<RenderedFile>> render_k8s(const K8sOptions& o) {
  if (std::string why = image_problem("--image", o.image); !why.empty())
    return invalid_argument(why);
  if (std::string why = image_problem("--evaluator-image", o.evaluator_image); !why.empty())
    return invalid_argument(why);
  if (!dns_label(o.name_space))
    return invalid_argument("--namespace '" + o.name_space +
                            "': lower-case letters, digits and '-'");
  if (o.gpus.empty())
    return invalid_argument(
        "--gpus: name the GPU products and how many of each, e.g. "
        "--gpus NVIDIA-H100-80GB-HBM3=8 (the node label nvidia.com/gpu.product)");
  for (const auto& [product, count] : o.gpus) {
    if (!label_value(product))
      return invalid_argument("--gpus: '" + product +
                              "' is not a node label value (as "
                              "nvidia.com/gpu.product shows it: letters, digits, '-', '_', '.')");
    if (count < 1) return invalid_argument("--gpus: " + product + " needs at least 1 GPU");
  }
  std::set<std::string> jobs;  // each product's evaluators are one Job, named after it
  for (const auto& [product, count] : o.gpus) {
    if (!jobs.insert(k8s_name_part(product)).second) {
      return invalid_argument("--gpus: '" + product + "' is named twice, or names the same Job " +
                              "(kiln-evaluator-" + k8s_name_part(product) +
                              ") as another product: give each product once");
    }
  }
  if (o.agents < 1) return invalid_argument("--agents must be at least 1");
  if (!k8s_quantity(o.storage)) {
    return invalid_argument("--storage '" + log_safe(o.storage, 40) +
                            "': a Kubernetes quantity, e.g. 10Gi or 500Mi");
  }
  if (!o.storage_class.empty() && !dns_subdomain(o.storage_class)) {
    return invalid_argument("--storage-class '" + log_safe(o.storage_class, 60) +
                            "': lower-case letters, digits, '-' and '.'");
  }
  for (const std::string& t : split_names(o.targets)) {
    if (!is_identifier(t)) {
      return invalid_argument("--targets: '" + log_safe(t, 60) + "' is not a target name");
    }
  }
  if (!o.sweep_targets.empty() && !label_value(o.sweep_gpu))
    return invalid_argument("--sweep-gpu: the GPU product the sweep runs on");
  for (const auto& t : o.sweep_targets) {
    if (!dns_label(k8s_name_part(t)) || k8s_name_part(t) != t)
      return invalid_argument("--sweep-targets: '" + t + "' is not a target name");
  }
  std::vector<RenderedFile> files = {{"00-namespace.yaml", to_yaml_stream(namespace_docs(o))},
                                     {"10-redis.yaml", to_yaml_stream(redis_docs(o))},
                                     {"20-coordinator.yaml", to_yaml_stream(coordinator_docs(o))},
                                     {"30-evaluators.yaml", to_yaml_stream(evaluator_docs(o))},
                                     {"40-agents.yaml", to_yaml_stream(agent_docs(o))},
                                     {"secrets.sh", secrets_script(o)}};
  if (!o.sweep_targets.empty()) files.push_back({"50-sweep.yaml", to_yaml_stream(sweep_docs(o))});
  return files;
}

}  // namespace kiln::cli
