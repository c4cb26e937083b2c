// `kiln evaluator`: the evaluator daemon's command line.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_evaluator_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
