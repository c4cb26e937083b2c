// `kiln import-triton FILE.py --kernel NAME`: runs the user's own launcher once, in a child Python
// with a deadline and a private working folder, with hooks on Triton's launches that capture the
// first launch of the @triton.jit kernel NAME (its source, arguments, constexprs, grid, launch
// settings and @triton.autotune configs) without launching it (no GPU needed), and writes a kiln
// target folder that runs the kernel: target.json, kernel_triton.py (the kernel and an entry point
// in kiln's calling convention), reference.cpp (a skeleton, or --reference) and IMPORTED.md. Exit
// code 0 when the folder is written and its seed compiles, 1 when the import failed, 2 for bad
// usage (docs/import-triton.md).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kiln::cli {

// Registers the subcommand; when parsed, `action` is set to run it.
void add_import_triton_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
