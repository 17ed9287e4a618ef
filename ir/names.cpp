#include "ir/names.h"

#include <algorithm>

#include "ir/dtype.h"

namespace kiln::ir {

bool is_graph_keyword(std::string_view word) {
  static constexpr std::string_view kKeywords[] = {"graph", "weights", "const", "param", "true", "false"};
  return std::find(std::begin(kKeywords), std::end(kKeywords), word) != std::end(kKeywords) ||
         parse_dtype(word).has_value();
}

bool is_valid_value_name(std::string_view name) {
  return !name.empty() && is_identifier_start(name[0]) && std::all_of(name.begin(), name.end(), is_identifier_char) &&
         !is_graph_keyword(name);
}

}  // namespace kiln::ir
