// `kiln status`: a run's per-target table, from its Redis or its output folder.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

// Registers the subcommand; when parsed, `action` is set to run it.
void add_status_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
