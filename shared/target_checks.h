// Checks of a loaded target spec that look across its fields (load_target runs them last): the
// names a kernel's macros may take, its parameter space, and every expression evaluated at the
// benchmark shape. Errors name the file and the field.
#pragma once

#include <cstdint>
#include <string>

#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln {

// The most combinations a template's space may have: the coordinator lists the configurations
// that meet the constraints at every swept shape, and the agents walk the space. matmul's cuda
// template, the largest built-in one, has 622,080.
inline constexpr uint64_t kMaxTemplateCombinations = uint64_t{1} << 20;
// A parameter's or define's value is used in expressions as a double: exact up to 2^53.
inline constexpr int64_t kMaxParamMagnitude = int64_t{1} << 53;

// Every define and parameter is a macro name that clashes with nothing the kernel sees (a dim, an
// argument, T, S, KILN_*); a name is a define or a parameter, not both; parameter values are
// exact in expressions; the space has at most kMaxTemplateCombinations combinations.
Status check_kernel_names(const TargetSpec& t, const std::string& source);

// No tensor is too large at any of the spec's shapes (check_shape).
Status check_shape_sizes(const TargetSpec& t, const std::string& source);

// bytes (positive), flops (not negative), index bounds, scales, every kernel's launch geometry
// and shared memory, and every template constraint evaluate at the benchmark shape with the
// seed's defines (the template's: with each parameter's first value), so that a typo is caught at
// load time, not in the middle of a night's run.
Status check_expressions(const TargetSpec& t, const std::string& source);

}  // namespace kiln
