// The command line that continues a run, as `kiln run` and `kiln coordinator` print it when they
// stop early or refuse to start over a run: it must work when pasted, so it names every option of
// the first command that the run's record in Redis does not keep (where the Redis is, the output
// folder, the targets folder, the endpoint, ...), with shell quoting.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::cli {

// `text` quoted for a POSIX shell when it holds anything but letters, digits and _-./:@%+=,
// (e.g. a path with a space, or the * of tcp://*:5555).
std::string shell_quote(std::string_view text);

// "<command> --resume" and then, in order, "--name value" for every option whose value is not
// empty, and "--name" for every flag.
std::string resume_command(std::string_view command,
                           const std::vector<std::pair<std::string, std::string>>& options,
                           const std::vector<std::string>& flags = {});

}  // namespace kiln::cli
