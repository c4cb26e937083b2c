// Stored fields: see stored_fields.h.
#include "coordinator/stored_fields.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace kiln::coordinator {

FieldMap field_map(const FieldList& fields) { return FieldMap(fields.begin(), fields.end()); }

std::string exact_number(double v) {
  char b[40];
  std::snprintf(b, sizeof(b), "%.17g", v);
  return b;
}

std::string field(const FieldMap& f, std::string_view name) {
  auto it = f.find(std::string(name));
  return it == f.end() ? std::string() : it->second;
}

Result<double> number_field(const FieldMap& f, std::string_view name) {
  const std::string text = field(f, name);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    return data_loss("field " + std::string(name) + " '" + text + "' is not a number");
  }
  return v;
}

Result<uint64_t> integer_field(const FieldMap& f, std::string_view name) {
  const std::string text = field(f, name);
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return data_loss("field " + std::string(name) + " '" + text +
                     "' is not a non-negative integer");
  }
  return v;
}

}  // namespace kiln::coordinator
