// `kiln run`: a whole search on this machine (private redis, coordinator, evaluators, proposer).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

// Registers the subcommand; when parsed, `action` is set to run it.
void add_run_command(CLI::App& app, std::function<int()>& action);

// `kiln coordinator`: the same search for a farm: workers connect from other machines.
void add_coordinator_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
