// `kiln export`: a verified kernel out of a run (its --out folder or its Redis) or straight from a
// target, as files a user drops in, with the verification record; and `kiln verify`, which
// re-runs that record on this machine. docs/export.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kiln::cli {

void add_export_command(CLI::App& app, std::function<int()>& action);
void add_verify_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
