// The .graph text format's names (docs/graph-format.md): one place for the lexer, the parser, the
// verifier and the importers that make names for it.
#pragma once

#include <string_view>

namespace kiln::ir {

// An identifier starts with a letter or '_' and goes on with letters, digits, '_' and '.'.
inline bool is_identifier_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool is_identifier_char(char c) { return is_identifier_start(c) || (c >= '0' && c <= '9') || c == '.'; }

// The reserved words: graph, weights, const, param, true, false and every dtype name (f32, ...).
bool is_graph_keyword(std::string_view word);

// Whether `name` can name a value: an identifier that is no keyword (it then prints as itself).
bool is_valid_value_name(std::string_view name);

}  // namespace kiln::ir
