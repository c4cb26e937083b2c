// The files of a target that `kiln import-triton` writes besides target.json and the kernel
// module: the reference skeleton (reference.cpp) and IMPORTED.md, which says what kiln guessed
// from the captured launch and what the user does next (docs/import-triton.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::cli {

// The capture script's three parts, embedded at build time (cli/import_triton_*.py); kiln runs
// them as one text, in this order.
const char* import_triton_module_script();
const char* import_triton_target_script();
const char* import_triton_capture_script();

// reference.cpp for `target` (target.json's content) when the user gave none: kiln_reference
// with the ABI's signature, every dim, scalar, input and output named, and no computation. Until
// the user writes one it fills each output with a pattern no kernel writes (NaN and 1e4 in turn)
// and says so on stderr once per process, so that verification fails rather than passes a wrong
// kernel, while `kiln targets --check` (which compiles the reference, never runs it) accepts it.
std::string reference_skeleton(const nlohmann::json& target, const std::string& from_file,
                               const std::string& kernel);

// Whether `text` is still the skeleton (its marker line is there).
bool is_reference_skeleton(const std::string& text);

struct ImportSummary {
  std::string from_file;  // the user's file, as given
  std::string kernel;     // the @triton.jit function's name
  std::string folder;     // the target's folder, as written
  bool own_reference = false;
  nlohmann::json target;  // target.json's content
  std::vector<std::string> notes;
  std::vector<std::string> next;  // the commands to run next, in order
};

// IMPORTED.md: where the target came from, each guess to check, and the next steps.
std::string imported_markdown(const ImportSummary& s);

}  // namespace kiln::cli
