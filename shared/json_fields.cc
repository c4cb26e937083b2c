// Strict JSON field reading with errors that name the file and the field.
#include "shared/json_fields.h"

#include <cmath>
#include <limits>

#include "shared/bounded_file.h"

namespace kiln {

Result<nlohmann::json> load_json_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text,
                        read_bounded_file(path, {kMaxJsonFileBytes, "a JSON file"}));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return invalid_argument(path + ": not valid JSON (" + e.what() + ")");
  } catch (const nlohmann::json::exception& e) {  // a number too large for any type (406)
    return invalid_argument(path + ": cannot be read (" + std::string(e.what()) + ")");
  }
}

std::string json_type_name(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "object";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "integer";
    case nlohmann::json::value_t::number_float: return "number";
    default: return "binary";
  }
}

JsonFields::JsonFields(const nlohmann::json& object, std::string source, std::string path)
    : object_(&object), source_(std::move(source)), path_(std::move(path)) {
  if (!object.is_object()) {
    status_ = invalid_argument(source_ + ": " +
                               (path_.empty() ? std::string("top level") : "field '" + path_ + "'") +
                               ": expected an object, got " + json_type_name(object));
  }
}

JsonFields JsonFields::nested(const nlohmann::json& value, const std::string& key) const {
  return JsonFields(value, source_, path_.empty() ? key : path_ + "." + key);
}

std::string JsonFields::where(const std::string& key) const {
  return source_ + ": field '" + (path_.empty() ? key : path_ + "." + key) + "'";
}

Status JsonFields::field_error(const std::string& key, const std::string& problem) const {
  return invalid_argument(where(key) + ": " + problem);
}

bool JsonFields::has(const std::string& key) const {
  return status_.is_ok() && object_->contains(key);
}

const nlohmann::json* JsonFields::find(const std::string& key, bool required, Status* error) {
  if (!status_.is_ok()) {
    *error = status_;
    return nullptr;
  }
  asked_.insert(key);
  auto it = object_->find(key);
  if (it == object_->end()) {
    if (required) *error = field_error(key, "missing (required)");
    return nullptr;
  }
  return &*it;
}

const nlohmann::json* JsonFields::raw(const std::string& key) {
  Status ignored;
  return find(key, false, &ignored);
}

Status JsonFields::get(const std::string& key, std::string* out, bool required) {
  Status err;
  const nlohmann::json* v = find(key, required, &err);
  if (!v) return err;
  if (!v->is_string()) return field_error(key, "expected a string, got " + json_type_name(*v));
  *out = v->get<std::string>();
  return Status::ok();
}

Status JsonFields::get(const std::string& key, bool* out, bool required) {
  Status err;
  const nlohmann::json* v = find(key, required, &err);
  if (!v) return err;
  if (!v->is_boolean()) return field_error(key, "expected true or false, got " + json_type_name(*v));
  *out = v->get<bool>();
  return Status::ok();
}

Status JsonFields::get(const std::string& key, int64_t* out, bool required) {
  Status err;
  const nlohmann::json* v = find(key, required, &err);
  if (!v) return err;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return field_error(key, "integer out of range");
    }
    *out = static_cast<int64_t>(u);
    return Status::ok();
  }
  if (!v->is_number_integer()) return field_error(key, "expected an integer, got " + json_type_name(*v));
  *out = v->get<int64_t>();
  return Status::ok();
}

Status JsonFields::get(const std::string& key, int* out, bool required) {
  int64_t wide = *out;
  KILN_RETURN_IF_ERROR(get(key, &wide, required));
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
    return field_error(key, "integer out of range");
  }
  *out = static_cast<int>(wide);
  return Status::ok();
}

Status JsonFields::get(const std::string& key, uint32_t* out, bool required) {
  int64_t wide = *out;
  KILN_RETURN_IF_ERROR(get(key, &wide, required));
  if (wide < 0 || wide > std::numeric_limits<uint32_t>::max()) {
    return field_error(key, "expected a non-negative integer below 2^32, got " + std::to_string(wide));
  }
  *out = static_cast<uint32_t>(wide);
  return Status::ok();
}

Status JsonFields::get(const std::string& key, double* out, bool required) {
  Status err;
  const nlohmann::json* v = find(key, required, &err);
  if (!v) return err;
  if (!v->is_number()) return field_error(key, "expected a number, got " + json_type_name(*v));
  *out = v->get<double>();
  if (!std::isfinite(*out)) return field_error(key, "expected a finite number");
  return Status::ok();
}

Status JsonFields::get(const std::string& key, std::vector<std::string>* out, bool required) {
  Status err;
  const nlohmann::json* v = find(key, required, &err);
  if (!v) return err;
  if (!v->is_array()) return field_error(key, "expected an array of strings, got " + json_type_name(*v));
  std::vector<std::string> items;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      return field_error(key + "[" + std::to_string(i) + "]",
                         "expected a string, got " + json_type_name((*v)[i]));
    }
    items.push_back((*v)[i].get<std::string>());
  }
  *out = std::move(items);
  return Status::ok();
}

Status JsonFields::get(const std::string& key, std::map<std::string, std::string>* out,
                       bool required) {
  Status err;
  const nlohmann::json* v = find(key, required, &err);
  if (!v) return err;
  if (!v->is_object()) return field_error(key, "expected an object of strings, got " + json_type_name(*v));
  std::map<std::string, std::string> items;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (it->is_string()) {
      items[it.key()] = it->get<std::string>();
    } else if (it->is_number() || it->is_boolean()) {
      items[it.key()] = it->dump();  // numbers as their JSON text: "256", "true"
    } else {
      return field_error(key + "." + it.key(), "expected a string or number, got " + json_type_name(*it));
    }
  }
  *out = std::move(items);
  return Status::ok();
}

Status JsonFields::get(const std::string& key, std::map<std::string, double>* out, bool required) {
  Status err;
  const nlohmann::json* v = find(key, required, &err);
  if (!v) return err;
  if (!v->is_object()) return field_error(key, "expected an object of numbers, got " + json_type_name(*v));
  std::map<std::string, double> items;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it->is_number()) {
      return field_error(key + "." + it.key(), "expected a number, got " + json_type_name(*it));
    }
    items[it.key()] = it->get<double>();
  }
  *out = std::move(items);
  return Status::ok();
}

Result<std::optional<JsonFields>> JsonFields::object(const std::string& key, bool required) {
  Status err;
  const nlohmann::json* v = find(key, required, &err);
  if (!v) {
    if (!err.is_ok()) return err;
    return std::optional<JsonFields>();
  }
  JsonFields nested(*v, source_, path_.empty() ? key : path_ + "." + key);
  if (!nested.status().is_ok()) return nested.status();
  return std::optional<JsonFields>(std::move(nested));
}

Status JsonFields::finish() const {
  if (!status_.is_ok()) return status_;
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (!asked_.count(it.key())) {
      std::string known;
      for (const auto& k : asked_) known += (known.empty() ? "" : ", ") + k;
      return field_error(it.key(), "unknown key" +
                                       (known.empty() ? std::string() : " (expected one of: " + known + ")"));
    }
  }
  return Status::ok();
}

}  // namespace kiln
