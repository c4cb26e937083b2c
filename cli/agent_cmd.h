// `kiln agent`: the proposal agent daemon's command line.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_agent_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
