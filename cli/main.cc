// The `kiln` entry point: builds the context (logging, config) and dispatches to a subcommand.
#include "cli/app.h"

int main(int argc, char** argv) { return kiln::cli::run_app(argc, argv); }
