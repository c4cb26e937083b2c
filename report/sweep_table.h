// A shape sweep's dispatch table as `kiln report` shows it: per (target, GPU model), each swept
// shape's best, and what one configuration for every shape would have cost instead -- the
// configuration timed at the most of the shapes (the search times a configuration at several
// shapes when populations transfer their bests to neighbours), the fastest of those over them.
// docs/report.md says how each figure is computed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "report/run_data.h"

namespace kiln::report {

struct SweepEntry {
  std::string shape;       // "M=512,N=4096"
  double best_us = 0;      // the population's best (its crowned time)
  std::string best_label;  // "template BLOCK=256,..."
  double single_us = 0;    // the single configuration's time at this shape; 0: not timed here
};

struct SweepTable {
  std::string target;
  std::string gpu_model;
  std::vector<SweepEntry> entries;  // one per swept shape, in the run's order of populations
  // The single configuration: timed at the most shapes (at least two), then the lowest
  // geometric mean of its time over each shape's best there. Empty when no configuration was
  // timed at two shapes.
  std::map<std::string, std::string> single_params;
  size_t single_shapes = 0;      // at how many of the entries it was timed
  double single_over_table = 0;  // that geometric mean (above 1: the table is faster)
};

// Every swept (target, GPU model) of the run; none for a run without a sweep.
std::vector<SweepTable> sweep_tables(const RunData& run);

// "One configuration for every shape, BLOCK=256,VEC=8 (timed at 5 of 6 shapes), takes 1.12x the
// dispatch table's time there (geometric mean)." or why there is no such figure.
std::string single_config_sentence(const SweepTable& table);

}  // namespace kiln::report
