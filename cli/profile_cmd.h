// `kiln profile`: runs a whole program (a PyTorch training step, a CUDA binary) with kiln's CUPTI
// injection library, ranks its kernels by GPU time with Amdahl's-law gains and writes plan.json;
// or re-ranks recorded traces (--from-traces). See docs/profile.md.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

// Registers the subcommand; when parsed, `action` is set to run it.
void add_profile_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
