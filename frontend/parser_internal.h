// Internals of the .graph parser, shared by parser.cpp (structure: directives, signature,
// statements, calls), parse_literal.cpp (const literals, numbers, types) and
// parse_attrs.cpp (named attributes -> typed attribute structs). Not a public header.
//
// Error handling: a *syntax* error is reported and makes the parse function return nullopt /
// false, and the statement loop then skips to the next statement boundary. A *semantic* error
// (unknown operator, bad attribute, failed shape inference, ...) is reported, parsing goes on,
// and the value comes out "poisoned": later statements that use it fail silently instead of
// cascading errors.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "frontend/lexer.h"
#include "frontend/safetensors.h"
#include "ir/graph.h"
#include "support/diagnostics.h"

namespace kiln::frontend::detail {

// Calls, literal brackets and attribute lists nested deeper than this are an error (which
// bounds the parser's recursion, so no input can overflow its stack).
inline constexpr int kMaxNesting = 256;
// Inline `const` literals of a file larger than this in total are rejected (they would be
// absurd in text anyway, and a splat of an absurd shape must not try to allocate it).
inline constexpr int64_t kMaxConstBytes = int64_t(1) << 30;

// A named attribute's value as written, before it is checked against the operator.
struct AttrValue {
  enum class Kind : uint8_t { kInt, kFloat, kString, kDType, kBool, kIdent, kList };
  Kind kind = Kind::kInt;
  int64_t int_value = 0;
  double float_value = 0;
  bool bool_value = false;
  ir::DType dtype = ir::DType::kF32;
  std::string text;  // kString contents, kIdent name
  std::vector<AttrValue> list;
  SourceLoc loc;
};

struct NamedAttr {
  std::string name;
  SourceLoc name_loc;
  AttrValue value;
};

// "an integer", "a string", "identifier 'N'", ... for "expected X, found Y" messages.
std::string describe_attr_value(const AttrValue& value);

// Applies one named attribute to `attrs` (which holds default_attrs(kind)). On failure
// returns the message and sets `error_loc` (the attribute name for unknown attributes, the value
// for wrong types). Symbols inside shape lists are accepted here; the parser checks they are
// bound.
std::optional<std::string> apply_attribute(ir::OpKind kind, ir::Attrs& attrs, const NamedAttr& attr,
                                           SourceLoc& error_loc);
// The attributes an operator cannot do without ("shape" for reshape, ...), or empty.
std::vector<std::string_view> required_attributes(ir::OpKind kind);

// One operand of a call: a node, or a value that failed earlier (poisoned).
struct Operand {
  ir::NodeId node = ir::kNoNode;
  bool poisoned = false;
};

// A value name in scope.
struct Binding {
  ir::NodeId node = ir::kNoNode;
  bool poisoned = false;
  SourceLoc name_loc;  // where the name was defined
};

class Parser {
 public:
  Parser(std::string_view text, std::string filename, std::string base_dir, Diagnostics& diags);
  Result<ir::Graph> parse();

 private:
  // ---- tokens ----
  const Token& peek(int k = 0);  // k = 0: the current token; 1: the one after
  Token take();
  bool at(TokenKind kind) { return peek().kind == kind; }
  bool at_ident(std::string_view word) { return peek().is_ident(word); }
  SourceLoc loc_of(const Token& token) const;
  // Consumes a token of `kind` or reports "expected WHAT, found ..." and returns nullopt.
  std::optional<Token> expect(TokenKind kind, std::string_view what);

  // ---- diagnostics ----
  void error(const SourceLoc& loc, std::string message);
  // "expected X, found Y" at the current token (lexer errors reported as themselves).
  void error_expected(std::string_view what);
  bool stopped() const { return diags_.at_limit(); }

  // ---- structure (parser.cpp) ----
  void parse_directives();
  bool parse_signature();
  bool parse_params(bool inputs);
  void parse_body();
  void parse_statement();
  void recover_to_statement();
  void check_outputs();

  // ---- expressions (parser.cpp) ----
  // `value_name` names the node the expression creates (top-level: the statement's name;
  // nested: a fresh "<stmt>.<n>").
  std::optional<Operand> parse_expr(const std::string& stmt_name, bool top_level);
  std::optional<Operand> parse_call(const std::string& stmt_name, bool top_level);
  std::optional<Operand> parse_const(const std::string& stmt_name, bool top_level);
  std::optional<Operand> parse_param(const std::string& stmt_name, bool top_level);
  std::optional<Operand> parse_value_ref();
  std::optional<AttrValue> parse_attr_value();
  // Adds a node after shape inference; reports inference errors at node.loc.
  Operand add_node(ir::Node node);
  std::string node_name(const std::string& stmt_name, bool top_level);
  void report_undefined(const Token& name_token);

  // ---- types, numbers and literals (parse_literal.cpp) ----
  // Parses DTYPE '[' dims ']'. Symbols are recorded as bound when `binds_symbols` (graph
  // inputs), otherwise they must already be bound. Returns nullopt on syntax errors. Semantic
  // errors (a size that overflows, an unbound symbol) are reported, the type is returned, and
  // last_type_valid_ is false.
  std::optional<ir::TensorType> parse_type(bool binds_symbols);
  // After a size factor (`acc`): `* factor` repeated, each an integer or a symbol, into the
  // canonical product (Kiln's extension: batch*seq). False after reporting an error.
  bool parse_size_product(ir::Dim& acc);
  // Whether every symbol of `dim` is bound by a graph input; reports the first that is not.
  bool check_bound(const ir::Dim& dim, const SourceLoc& loc);
  // A symbolic dim of a type: an input's plain symbol is bound by it (a product there is an
  // error); elsewhere every factor must be bound. False after reporting an error.
  bool accept_symbolic_dim(const ir::Dim& dim, bool binds_symbols, const SourceLoc& loc);
  // A possibly negative integer (INT or '-' INT) that fits in int64.
  std::optional<int64_t> parse_signed_int(const Token& number, bool negative);
  std::optional<double> parse_float_token(const Token& number, bool negative);
  // Fills `tensor` from a literal (splat or nested); nullopt on a syntax error.
  // `ok` turns false on semantic errors (reported) such as shape mismatches.
  bool parse_literal(ir::Tensor& tensor, const ir::TensorType& type, bool& ok);
  bool parse_literal_list(ir::Tensor& tensor, const ir::TensorType& type, size_t dim,
                          int64_t& flat_index, bool& ok);
  // Parses one scalar literal and stores it at `index` (when index >= 0).
  bool parse_scalar_literal(ir::Tensor& tensor, int64_t index, bool& ok, int64_t fill_count);

  // ---- weights ----
  void load_weights(const Token& path_token);

  std::string filename_;
  std::string base_dir_;
  Diagnostics& diags_;
  Lexer lexer_;
  Token lookahead_[2];
  int buffered_ = 0;
  bool eof_reported_ = false;
  bool had_error_ = false;
  int depth_ = 0;
  bool last_type_valid_ = true;
  int64_t inline_const_bytes_ = 0;  // data of the `const` literals so far (see kMaxConstBytes)

  ir::Graph graph_;
  ir::NameTable names_;
  std::unordered_map<std::string, Binding> scope_;
  // Names the parser generated for nested calls, so a later user statement with the same name
  // can take it (the generated node is renamed).
  std::unordered_map<std::string, ir::NodeId> generated_;
  // Names skipped during error recovery: using them later is silent (the error was reported).
  std::unordered_set<std::string> skipped_names_;
  std::unordered_set<std::string> reported_undefined_;
  // Symbolic sizes bound by the graph inputs.
  std::unordered_set<std::string> bound_symbols_;
  bool signature_ok_ = false;
  struct DeclaredOutput {
    std::string name;
    ir::TensorType type;
    SourceLoc loc;
  };
  std::vector<DeclaredOutput> outputs_;

  // Statement names by position, found by a lazy pre-scan the first time a name is undefined
  // (to tell "used before it is defined" from "undefined").
  std::optional<std::unordered_map<std::string, std::pair<int, int>>> definitions_;

  bool has_weights_directive_ = false;
  std::string weights_display_;  // the path as written
  std::optional<SafetensorsFile> weights_;

  std::string_view text_;
};

}  // namespace kiln::frontend::detail
