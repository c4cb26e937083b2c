// `kiln keys`: CURVE keys for the coordinator and its workers (docs/security.md): `new` makes a
// keypair, `allow` adds workers' public keys to an allow-list file, `show` prints what a key file
// or an allow-list holds (public keys only).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kiln::cli {

void add_keys_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
