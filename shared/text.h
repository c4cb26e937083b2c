// Small text helpers every component needs: C identifiers and errno messages.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// [A-Za-z_][A-Za-z0-9_]*: kernel names, macro names, target and dim names.
bool is_identifier(std::string_view s);

// strerror(err) as a string (the text of an errno value).
std::string errno_text(int err);

}  // namespace kiln
