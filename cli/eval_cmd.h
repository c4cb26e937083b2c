// `kiln eval`: evaluates one candidate of a target without a cluster.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

// Registers the subcommand; when parsed, `action` is set to run it.
void add_eval_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
