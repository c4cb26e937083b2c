// JSON documents written as YAML block text, for manifests people read and edit (`kiln deploy`).
// Objects become indented mappings, arrays dash lists; strings are written plain when YAML reads
// them back as the same string, double-quoted (JSON escapes, which YAML accepts) otherwise.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::cli {

// One document, without the "---" separator; ends with a newline.
std::string to_yaml(const nlohmann::json& document);

// Several documents, each after a "---" line.
std::string to_yaml_stream(const std::vector<nlohmann::json>& documents);

}  // namespace kiln::cli
