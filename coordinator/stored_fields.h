// Typed values in the string fields that the coordinator keeps in Redis (the run's record,
// kiln:run, and the entries of the search log, kiln:events:{run}): numbers are written so that
// they read back exactly, and reading one back that does not parse is DATA_LOSS naming the field.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/status.h"

namespace kiln::coordinator {

// Fields as written: (name, value) in the order they are stored.
using FieldList = std::vector<std::pair<std::string, std::string>>;
// Fields as read back, by name (the first of a repeated name).
using FieldMap = std::map<std::string, std::string>;

FieldMap field_map(const FieldList& fields);

// A double with every digit ("%.17g"): what is read back (a replay judges with it) is exactly the
// number that was written.
std::string exact_number(double v);

// The value of field `name`; "" when absent.
std::string field(const FieldMap& f, std::string_view name);
// The value of field `name` parsed; DATA_LOSS "field NAME 'TEXT' is not ..." when it is absent or
// does not parse.
Result<double> number_field(const FieldMap& f, std::string_view name);
Result<uint64_t> integer_field(const FieldMap& f, std::string_view name);

}  // namespace kiln::coordinator
