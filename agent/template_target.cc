// See template_target.h.
#include "agent/template_target.h"

#include "shared/target_path.h"
#include "shared/text.h"

namespace kiln::agent {

Result<TargetSpec> load_template_target(const std::string& dirs, const std::string& name,
                                        const std::string& backend) {
  constexpr size_t kQuoted = 60;
  if (name.size() > 128 || !is_identifier(name)) {
    return invalid_argument("bad target name '" + name.substr(0, kQuoted) +
                            (name.size() > kQuoted ? "...'" : "'") +
                            ": a task names a target by its identifier");
  }
  KILN_ASSIGN_OR_RETURN(std::string dir, find_target(dirs, name));
  KILN_ASSIGN_OR_RETURN(TargetSpec spec, load_target(dir));
  const BackendSpec* b = spec.backend(backend);
  if (b == nullptr) {
    return invalid_argument("target " + name + " has no " + backend.substr(0, kQuoted) +
                            " kernels here");
  }
  if (!b->tunable) {
    return invalid_argument("target " + name + " has no " + backend +
                            " template: an agent proposes configurations and rewrites of one");
  }
  return spec;
}

}  // namespace kiln::agent
