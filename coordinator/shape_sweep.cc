// Shape sweeps: see shape_sweep.h.
#include "coordinator/shape_sweep.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kiln::coordinator {
namespace {

// Every combination of a grid (dim -> sizes), the target's first dim changing slowest.
Status add_grid(const nlohmann::json& grid, const TargetSpec& t, const std::string& where,
                std::vector<Shape>* out) {
  if (!grid.is_object()) return invalid_argument(where + ": expected an object of dim -> sizes");
  std::vector<std::pair<std::string, std::vector<int64_t>>> axes;
  size_t combinations = 1;
  for (const std::string& d : t.dims) {
    if (!grid.contains(d)) return invalid_argument(where + ": dim '" + d + "' missing");
    const nlohmann::json& sizes = grid[d];
    if (!sizes.is_array() || sizes.empty()) {
      return invalid_argument(where + "." + d + ": expected a non-empty list of sizes");
    }
    std::vector<int64_t> values;
    for (const nlohmann::json& v : sizes) {
      if (!v.is_number_integer()) {
        return invalid_argument(where + "." + d + ": expected positive integers below 2^31");
      }
      values.push_back(v.get<int64_t>());
    }
    combinations *= values.size();
    if (combinations > kMaxSweepShapes) {
      return invalid_argument(where + ": more than " + std::to_string(kMaxSweepShapes) + " shapes");
    }
    axes.emplace_back(d, std::move(values));
  }
  for (auto it = grid.begin(); it != grid.end(); ++it) {
    if (std::find(t.dims.begin(), t.dims.end(), it.key()) == t.dims.end()) {
      return invalid_argument(where + ": '" + t.name + "' has no dim '" + it.key() + "'");
    }
  }
  for (size_t i = 0; i < combinations; ++i) {
    Shape s;
    size_t rest = i;
    for (size_t a = axes.size(); a-- > 0;) {
      s[axes[a].first] = axes[a].second[rest % axes[a].second.size()];
      rest /= axes[a].second.size();
    }
    Status ok = check_shape(t.dims, s);
    if (!ok.is_ok()) return invalid_argument(where + ": " + ok.message());
    out->push_back(std::move(s));
  }
  return Status::ok();
}

}  // namespace

Result<ShapeSweep> parse_shape_sweep(const std::string& text,
                                     const std::vector<TargetSpec>& targets) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid_argument("the shape sweep is not valid JSON");
  if (!j.is_object())
    return invalid_argument("the shape sweep must be a JSON object of target -> shapes");
  ShapeSweep sweep;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "description" && it->is_string()) continue;
    auto t = std::find_if(targets.begin(), targets.end(),
                          [&](const TargetSpec& s) { return s.name == it.key(); });
    if (t == targets.end()) {
      std::string names;
      for (const TargetSpec& s : targets) names += (names.empty() ? "" : ", ") + s.name;
      return invalid_argument("the shape sweep names '" + it.key() +
                              "', which is not a target of this run (" + names + ")");
    }
    std::vector<Shape> shapes;
    const std::string where = it.key();
    if (it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i) {
        KILN_ASSIGN_OR_RETURN(
            Shape s, shape_from_json((*it)[i], where + "[" + std::to_string(i) + "]", t->dims));
        shapes.push_back(std::move(s));
      }
    } else if (it->is_object()) {
      for (auto k = it->begin(); k != it->end(); ++k) {
        if (k.key() != "shapes" && k.key() != "grid") {
          return invalid_argument(where + ": unknown key '" + k.key() +
                                  "' (expected shapes, grid)");
        }
      }
      if (it->contains("shapes")) {
        const nlohmann::json& list = (*it)["shapes"];
        if (!list.is_array()) return invalid_argument(where + ".shapes: expected a list of shapes");
        for (size_t i = 0; i < list.size(); ++i) {
          KILN_ASSIGN_OR_RETURN(
              Shape s,
              shape_from_json(list[i], where + ".shapes[" + std::to_string(i) + "]", t->dims));
          shapes.push_back(std::move(s));
        }
      }
      if (it->contains("grid"))
        KILN_RETURN_IF_ERROR(add_grid((*it)["grid"], *t, where + ".grid", &shapes));
    } else {
      return invalid_argument(where + ": expected a list of shapes or an object with shapes/grid");
    }
    std::vector<Shape> unique;
    for (Shape& s : shapes) {
      if (std::find(unique.begin(), unique.end(), s) == unique.end())
        unique.push_back(std::move(s));
    }
    if (unique.empty()) return invalid_argument(where + ": no shapes");
    // The limits `kiln eval --shape` keeps (no tensor over 2^40 elements): checked here, before a
    // run starts, not by the evaluator when the shape's first task reaches it.
    for (const Shape& s : unique) {
      if (Status fits = check_shape(*t, s); !fits.is_ok())
        return invalid_argument(where + ": " + fits.message());
    }
    if (unique.size() > kMaxSweepShapes) {
      return invalid_argument(where + ": " + std::to_string(unique.size()) + " shapes, more than " +
                              std::to_string(kMaxSweepShapes));
    }
    sweep[it.key()] = std::move(unique);
  }
  return sweep;
}

Result<ShapeSweep> load_shape_sweep(const std::string& path,
                                    const std::vector<TargetSpec>& targets) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read the shape sweep " + path);
  std::stringstream text;
  text << in.rdbuf();
  Result<ShapeSweep> sweep = parse_shape_sweep(text.str(), targets);
  if (!sweep.is_ok()) return sweep.status().with_context(path);
  return sweep;
}

Result<Shape> parse_shape_label(const std::string& label) {
  Shape shape;
  size_t at = 0;
  while (at <= label.size()) {
    const size_t comma = std::min(label.find(',', at), label.size());
    const std::string item = label.substr(at, comma - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return invalid_argument("shape '" + label + "' does not parse");
    try {
      size_t used = 0;
      const long long n = std::stoll(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1 || n < 1 || n > kMaxDimSize)
        throw std::invalid_argument(item);
      shape[item.substr(0, eq)] = n;
    } catch (const std::exception&) {
      return invalid_argument("shape '" + label + "' does not parse");
    }
    at = comma + 1;
  }
  return shape;
}

Result<ShapeSweep> sweep_from_labels(const std::map<std::string, std::vector<std::string>>& labels,
                                     const std::vector<TargetSpec>& targets) {
  // Back into the file's form, then through the file's checks.
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [target, list] : labels) {
    nlohmann::json shapes = nlohmann::json::array();
    for (const std::string& label : list) {
      KILN_ASSIGN_OR_RETURN(Shape s, parse_shape_label(label));
      shapes.push_back(s);
    }
    j[target] = std::move(shapes);
  }
  return parse_shape_sweep(j.dump(), targets);
}

std::map<std::string, std::vector<std::string>> sweep_labels(const ShapeSweep& sweep) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [target, shapes] : sweep) {
    for (const Shape& s : shapes) out[target].push_back(shape_string(s));
  }
  return out;
}

double shape_distance(const Shape& a, const Shape& b) {
  double d = 0;
  for (const auto& [dim, n] : a) {
    auto it = b.find(dim);
    if (it == b.end()) return INFINITY;
    d += std::abs(std::log2(static_cast<double>(n) / static_cast<double>(it->second)));
  }
  return d;
}

}  // namespace kiln::coordinator
