// Where targets are found. A user's own targets and the built-in ones work together: the folders
// named by --targets-dir (separated by ':' or ','), else those of $KILN_TARGETS_DIR (separated by
// ':'), then the built-in folder. A name is looked up in that order and the first folder that
// holds it wins, so a user's copy of a built-in target shadows it (docs/targets.md).
#pragma once

#include <string>
#include <vector>

#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln {

// The folders, in lookup order, for a --targets-dir value (`dirs`, "" when not given); the
// built-in folder is always last.
std::vector<std::string> target_folders(const std::string& dirs);

// Whether `dirs` or $KILN_TARGETS_DIR names folders of the user's.
bool has_own_targets(const std::string& dirs);

// NOT_FOUND naming the first of `dirs` (or of $KILN_TARGETS_DIR where `dirs` is empty) that is
// not a folder: a misspelt --targets-dir would otherwise fall back to the built-in targets.
Status check_target_folders(const std::string& dirs);

// The folder of target `name`: `name` itself when it is a folder holding a target.json, else the
// first folder of target_folders(dirs) with a `name` subfolder holding one. NOT_FOUND names the
// folders searched.
Result<std::string> find_target(const std::string& dirs, const std::string& name);

// Every target on the path, the first of each name, sorted by name. With `own_only` and folders
// of the user's, only the targets in those (what `kiln run --targets-dir DIR` runs when no
// --targets is given); without folders of the user's, the built-in targets.
Result<std::vector<TargetSpec>> load_target_path(const std::string& dirs, bool own_only);

}  // namespace kiln
