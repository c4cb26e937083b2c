// `kiln targets`: lists the targets of a folder, or (--check) checks them without a GPU.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

// Registers the subcommand; when parsed, `action` is set to run it.
void add_targets_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
