// The target a proposal task names, loaded for an agent that proposes children of its template.
// The built-in and the LLM proposer both answer tasks from a peer: the name is checked before any
// folder is read.
#pragma once

#include <string>

#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::agent {

// The target `name` on the target path `dirs` (shared/target_path.h), checked to have a template
// on `backend`. A name that is not an identifier (a path, "..", an empty or overlong string) is
// refused, quoted to its first 60 characters.
Result<TargetSpec> load_template_target(const std::string& dirs, const std::string& name,
                                        const std::string& backend);

}  // namespace kiln::agent
