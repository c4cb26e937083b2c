// `kiln selftest`: checks that this node can run kiln (Redis and ZeroMQ round trips, CUDA found).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_selftest_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
