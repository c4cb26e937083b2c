// The `kiln` command line: global options, subcommand registration and dispatch.
#pragma once

namespace kiln::cli {

// Parses argv, configures logging, runs the chosen subcommand and returns the process exit code:
// 0 success, 1 the work failed, 2 bad usage or input.
int run_app(int argc, char** argv);

}  // namespace kiln::cli
