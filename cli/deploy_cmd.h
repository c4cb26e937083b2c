// `kiln deploy k8s`: writes the Kubernetes manifests of one kiln run into a folder
// (docs/deploy.md); nothing is applied to a cluster.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kiln::cli {

void add_deploy_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
