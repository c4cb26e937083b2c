// A shape sweep: the shapes each target is searched at (`kiln run --shapes FILE`), one
// population per (target, shape, GPU model), and how near two shapes are (transfer between
// populations, the export's dispatch table). docs/run.md "Shape sweeps" shows the file.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::coordinator {

// The most shapes one target may have in a sweep.
inline constexpr size_t kMaxSweepShapes = 256;

// Target name -> the shapes it is searched at, each once, in the file's order (a grid's
// combinations with its first dim changing slowest). A target absent from it is searched at its
// benchmark shape only.
using ShapeSweep = std::map<std::string, std::vector<Shape>>;

// Parses a sweep file's text against the run's targets: a JSON object whose keys are target
// names, each holding a list of shapes, or an object with "shapes" (a list) and/or "grid" (dim ->
// list of sizes, every combination); an optional top-level "description" string is skipped.
// INVALID_ARGUMENT naming the place for an unknown target or dim, a missing dim, a size that is
// not a positive integer below 2^31, or more than kMaxSweepShapes shapes for one target.
Result<ShapeSweep> parse_shape_sweep(const std::string& text,
                                     const std::vector<TargetSpec>& targets);
// The same, read from a file (NOT_FOUND when it cannot be read).
Result<ShapeSweep> load_shape_sweep(const std::string& path,
                                    const std::vector<TargetSpec>& targets);

// A shape as shape_string() spells it ("K=4096,M=16,N=4096") read back; INVALID_ARGUMENT when it
// does not parse. Dims are not checked against a target (check_shape does).
Result<Shape> parse_shape_label(const std::string& label);

// The shapes a run record names (RunRecord::shapes, shape_string each) as a sweep again, checked
// against the targets like a file's.
Result<ShapeSweep> sweep_from_labels(const std::map<std::string, std::vector<std::string>>& labels,
                                     const std::vector<TargetSpec>& targets);
// The sweep as a run record names it: shape_string of each shape.
std::map<std::string, std::vector<std::string>> sweep_labels(const ShapeSweep& sweep);

// How far apart two shapes of one target are: the sum over dims of |log2(a/b)| (a dim twice as
// large is as far as one half as large; doubling two dims is twice as far as doubling one).
double shape_distance(const Shape& a, const Shape& b);

}  // namespace kiln::coordinator
