// The .graph parser: file structure, the signature, statements and calls. Types, numbers and
// literals are in parse_literal.cpp; attribute checking is in parse_attrs.cpp.
#include "frontend/parser.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>

#include "frontend/parser_internal.h"
#include "ir/infer.h"
#include "ir/names.h"
#include "support/file_io.h"

namespace kiln::frontend {
namespace detail {
namespace {

// Renders a byte for "invalid character" messages: printable ASCII as itself, others as \xNN.
std::string describe_byte(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  static const char* kHex = "0123456789abcdef";
  return std::string("'\\x") + kHex[u >> 4] + kHex[u & 15] + "'";
}

std::string lexer_error_message(const Token& token) {
  std::string_view what = token.error;
  if (what == "invalid character") return "invalid character " + describe_byte(token.text[0]);
  if (what == "name too long")
    return "a name of " + std::to_string(token.text.size()) + " characters; names have at most " +
           std::to_string(ir::kMaxNameLength);
  if (what == "malformed number") {
    Token as_ident = token;
    as_ident.kind = TokenKind::kIdent;
    return "malformed number " + describe_token(as_ident);
  }
  return std::string(what);
}

}  // namespace

Parser::Parser(std::string_view text, std::string filename, std::string base_dir, Diagnostics& diags)
    : filename_(std::move(filename)), base_dir_(std::move(base_dir)), diags_(diags), lexer_(text),
      text_(text) {}

// ---- tokens ----------------------------------------------------------------------------------

const Token& Parser::peek(int k) {
  while (buffered_ <= k) lookahead_[buffered_++] = lexer_.next();
  return lookahead_[k];
}

Token Parser::take() {
  Token t = peek(0);
  if (t.kind == TokenKind::kEnd) return t;  // stay at the end
  lookahead_[0] = lookahead_[1];
  --buffered_;
  return t;
}

SourceLoc Parser::loc_of(const Token& token) const { return SourceLoc{filename_, token.line, token.column}; }

std::optional<Token> Parser::expect(TokenKind kind, std::string_view what) {
  if (at(kind)) return take();
  error_expected(what);
  return std::nullopt;
}

// ---- diagnostics -----------------------------------------------------------------------------

void Parser::error(const SourceLoc& loc, std::string message) {
  had_error_ = true;
  diags_.error(loc, std::move(message));
}

void Parser::error_expected(std::string_view what) {
  const Token& t = peek();
  if (t.kind == TokenKind::kError) {
    error(loc_of(t), lexer_error_message(t));
  } else if (t.kind == TokenKind::kEnd) {
    if (!eof_reported_) error(loc_of(t), "unexpected end of file, expected " + std::string(what));
    eof_reported_ = true;
  } else {
    error(loc_of(t), "expected " + std::string(what) + ", found " + describe_token(t));
  }
}

// ---- structure -------------------------------------------------------------------------------

Result<ir::Graph> Parser::parse() {
  parse_directives();
  if (!stopped()) {
    if (at_ident("graph")) {
      signature_ok_ = parse_signature();
      parse_body();
    } else {
      error_expected("'graph' (or a 'weights' directive)");
      // Look for the graph further on (e.g. after a garbled directive).
      while (!at(TokenKind::kEnd) && !at_ident("graph")) take();
      if (at_ident("graph")) {
        signature_ok_ = parse_signature();
        parse_body();
      }
    }
  }
  if (!stopped() && signature_ok_) check_outputs();
  if (had_error_ || diags_.has_errors()) {
    if (!diags_.has_errors()) return invalid_argument("the graph has errors");
    return diags_.to_status();
  }
  return std::move(graph_);
}

void Parser::parse_directives() {
  while (at_ident("weights") && !stopped()) {
    Token keyword = take();
    if (!at(TokenKind::kString)) {
      error_expected("the weights file name (a string)");
      // Skip the rest of the broken directive.
      while (!at(TokenKind::kEnd) && !at_ident("graph") && !at_ident("weights")) take();
      continue;
    }
    Token path = take();
    if (has_weights_directive_) {
      error(loc_of(keyword), "only one 'weights' directive is allowed");
      continue;
    }
    has_weights_directive_ = true;
    load_weights(path);
  }
}

void Parser::load_weights(const Token& path_token) {
  weights_display_ = decode_string(path_token);
  graph_.weights_path = weights_display_;
  graph_.weights_base_dir = base_dir_;
  if (weights_display_.empty()) {
    error(loc_of(path_token), "the weights file name is empty");
    return;
  }
  std::string path = weights_display_;
  if (path[0] != '/' && !base_dir_.empty()) path = base_dir_ + "/" + path;
  Result<SafetensorsFile> file = SafetensorsFile::open(path, weights_display_);
  if (!file) {
    error(loc_of(path_token), file.status().message());
    return;
  }
  weights_ = std::move(file).value();
}

bool Parser::parse_signature() {
  take();  // 'graph'
  auto fail = [&] {
    // Resynchronize at the body so its statements are still checked.
    while (!at(TokenKind::kEnd) && !at(TokenKind::kLBrace)) take();
    if (at(TokenKind::kLBrace)) take();
    return false;
  };
  std::optional<Token> name = expect(TokenKind::kIdent, "the graph name");
  if (!name) return fail();
  graph_.name = std::string(name->text);
  if (!expect(TokenKind::kLParen, "'('")) return fail();
  if (!at(TokenKind::kRParen) && !parse_params(/*inputs=*/true)) return fail();
  if (!expect(TokenKind::kRParen, "')' or ','")) return fail();
  if (!expect(TokenKind::kArrow, "'->'")) return fail();
  if (!expect(TokenKind::kLParen, "'(' before the outputs")) return fail();
  if (!parse_params(/*inputs=*/false)) return fail();
  if (!expect(TokenKind::kRParen, "')' or ','")) return fail();
  if (!expect(TokenKind::kLBrace, "'{'")) return fail();
  return true;
}

bool Parser::parse_params(bool inputs) {
  for (;;) {
    std::optional<Token> name = expect(TokenKind::kIdent, inputs ? "an input name" : "an output name");
    if (!name) return false;
    if (!expect(TokenKind::kColon, "':' and a type")) return false;
    std::optional<ir::TensorType> type = parse_type(/*binds_symbols=*/inputs);
    if (!type) return false;
    const bool type_valid = last_type_valid_;
    std::string n(name->text);
    if (ir::is_graph_keyword(n)) {
      error(loc_of(*name), "'" + n + "' is a keyword and cannot name a value");
    } else if (inputs) {
      auto it = scope_.find(n);
      if (it != scope_.end()) {
        error(loc_of(*name), "duplicate input '" + n + "'");
      } else {
        ir::Node node;
        node.op = ir::OpKind::kInput;
        node.name = n;
        node.attrs = ir::InputAttrs{int64_t(graph_.inputs().size())};
        node.type = *type;
        node.loc = loc_of(*name);
        Operand op = type_valid ? add_node(std::move(node)) : Operand{ir::kNoNode, true};
        if (!op.poisoned) graph_.inputs().push_back(op.node);
        scope_[n] = Binding{op.node, op.poisoned, loc_of(*name)};
      }
    } else {
      bool duplicate = false;
      for (const DeclaredOutput& o : outputs_) duplicate |= o.name == n;
      if (duplicate) {
        error(loc_of(*name), "duplicate output '" + n + "'");
      } else if (type_valid) {
        outputs_.push_back(DeclaredOutput{n, *type, loc_of(*name)});
      }
    }
    if (!at(TokenKind::kComma)) return true;
    take();
  }
}

void Parser::parse_body() {
  while (!stopped() && !at(TokenKind::kRBrace) && !at(TokenKind::kEnd)) parse_statement();
  if (stopped()) return;
  if (!expect(TokenKind::kRBrace, "'}' at the end of the graph")) return;
  if (!at(TokenKind::kEnd)) {
    const Token& t = peek();
    if (t.kind == TokenKind::kError) {
      error(loc_of(t), lexer_error_message(t));
    } else {
      error(loc_of(t), "unexpected " + describe_token(t) + " after the end of the graph");
    }
  }
}

void Parser::recover_to_statement() {
  // Skip to a line that starts with `IDENT =`, or to the closing brace. Names defined by the
  // statements skipped over are remembered so that their uses do not cascade into errors.
  while (!at(TokenKind::kEnd) && !at(TokenKind::kRBrace)) {
    const Token& t = peek();
    if (t.kind == TokenKind::kIdent && peek(1).kind == TokenKind::kEquals) {
      if (t.first_on_line) return;
      skipped_names_.insert(std::string(t.text));
    }
    take();
  }
}

void Parser::parse_statement() {
  const Token start = peek();
  if (start.kind != TokenKind::kIdent || peek(1).kind != TokenKind::kEquals) {
    if (start.kind == TokenKind::kIdent) {
      take();
      error_expected("'=' after the value name");
    } else {
      error_expected("a statement (name = expression) or '}'");
      take();
    }
    recover_to_statement();
    return;
  }
  Token name_token = take();
  take();  // '='
  std::string name(name_token.text);
  SourceLoc name_loc = loc_of(name_token);
  bool bindable = true;
  if (ir::is_graph_keyword(name)) {
    error(name_loc, "'" + name + "' is a keyword and cannot name a value");
    bindable = false;
  } else if (auto it = scope_.find(name); it != scope_.end()) {
    const SourceLoc& first = it->second.name_loc;
    error(name_loc, "'" + name + "' is already defined (first defined at " + std::to_string(first.line) + ":" +
                        std::to_string(first.column) + ")");
    bindable = false;
  } else if (auto g = generated_.find(name); g != generated_.end()) {
    // A nested call took this name first; give it another so the user's name wins.
    ir::NodeId id = g->second;
    generated_.erase(g);
    std::string fresh = names_.fresh(name);
    graph_.node(id).name = fresh;
    generated_[fresh] = id;
  }
  if (bindable) names_.insert(name);

  // A failed duplicate still gets parsed (to find its errors) under a fresh name.
  std::string stmt_name = bindable ? name : names_.fresh(name);
  std::optional<Operand> value = parse_expr(stmt_name, /*top_level=*/true);
  if (!value) {
    if (bindable) scope_[name] = Binding{ir::kNoNode, true, name_loc};
    if (!stopped()) recover_to_statement();
    return;
  }
  if (at(TokenKind::kColon)) {
    take();
    const Token type_token = peek();
    std::optional<ir::TensorType> declared = parse_type(/*binds_symbols=*/false);
    if (!declared) {
      if (bindable) scope_[name] = Binding{ir::kNoNode, true, name_loc};
      if (!stopped()) recover_to_statement();
      return;
    }
    if (!last_type_valid_) value->poisoned = true;
    if (!value->poisoned) {
      const ir::TensorType& actual = graph_.node(value->node).type;
      if (actual != *declared) {
        error(loc_of(type_token), "'" + name + "' is declared " + declared->to_string() +
                                      " but its value is " + actual.to_string());
        value->poisoned = true;
      }
    }
  }
  if (bindable) scope_[name] = Binding{value->node, value->poisoned, name_loc};
}

void Parser::check_outputs() {
  for (const DeclaredOutput& out : outputs_) {
    auto it = scope_.find(out.name);
    if (it == scope_.end()) {
      if (!skipped_names_.count(out.name)) error(out.loc, "output '" + out.name + "' is not defined");
      continue;
    }
    const Binding& b = it->second;
    if (b.poisoned) continue;
    const ir::TensorType& actual = graph_.node(b.node).type;
    if (actual != out.type) {
      error(b.name_loc, "output '" + out.name + "' is declared " + out.type.to_string() +
                            " but defined as " + actual.to_string());
      continue;
    }
    graph_.outputs().push_back(ir::GraphOutput{out.name, b.node, out.type, out.loc});
  }
}

// ---- expressions -----------------------------------------------------------------------------

std::string Parser::node_name(const std::string& stmt_name, bool top_level) {
  if (top_level) return stmt_name;
  std::string name = names_.fresh(stmt_name);
  generated_[name] = ir::NodeId(graph_.num_nodes());  // the id add_node will give it
  return name;
}

Operand Parser::add_node(ir::Node node) {
  Status status = ir::infer_node(graph_, node);
  if (!status.is_ok()) {
    generated_.erase(node.name);
    error(node.loc, status.message());
    return Operand{ir::kNoNode, true};
  }
  names_.insert(node.name);
  return Operand{graph_.add_node(std::move(node)), false};
}

std::optional<Operand> Parser::parse_expr(const std::string& stmt_name, bool top_level) {
  if (depth_ >= kMaxNesting) {
    error(loc_of(peek()), "nesting too deep (more than " + std::to_string(kMaxNesting) + " levels)");
    return std::nullopt;
  }
  struct DepthGuard {
    int& depth;
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
  } guard(depth_);

  const Token& t = peek();
  if (t.is_ident("const")) return parse_const(stmt_name, top_level);
  if (t.is_ident("param")) return parse_param(stmt_name, top_level);
  if (t.kind == TokenKind::kIdent && peek(1).kind == TokenKind::kLParen) return parse_call(stmt_name, top_level);
  if (!top_level && t.kind == TokenKind::kIdent) return parse_value_ref();
  if (top_level && t.kind == TokenKind::kIdent && !ir::is_graph_keyword(t.text)) {
    error(loc_of(t), "expected an operator call, 'const' or 'param', found " + describe_token(t) +
                         " (a statement cannot just rename a value)");
    return std::nullopt;
  }
  error_expected(top_level ? "an expression (an operator call, 'const' or 'param')"
                           : "an operand (a value, a call, 'const' or 'param')");
  return std::nullopt;
}

void Parser::report_undefined(const Token& name_token) {
  std::string name(name_token.text);
  if (!reported_undefined_.insert(name).second) return;
  if (!definitions_) {
    // Pre-scan once for the statements of the file, to say "used before it is defined".
    definitions_.emplace();
    Lexer scan(text_);
    Token prev = scan.next();
    while (prev.kind != TokenKind::kEnd) {
      Token cur = scan.next();
      if (prev.kind == TokenKind::kIdent && prev.first_on_line && cur.kind == TokenKind::kEquals) {
        definitions_->emplace(std::string(prev.text), std::make_pair(prev.line, prev.column));
      }
      prev = cur;
    }
  }
  auto it = definitions_->find(name);
  if (it != definitions_->end() &&
      std::make_pair(name_token.line, name_token.column) < it->second) {
    error(loc_of(name_token), "'" + name + "' is used before it is defined");
  } else {
    error(loc_of(name_token), "undefined value '" + name + "'");
  }
}

std::optional<Operand> Parser::parse_value_ref() {
  Token t = take();
  std::string name(t.text);
  if (ir::is_graph_keyword(name)) {
    error(loc_of(t), "expected an operand, found keyword '" + name + "'");
    return Operand{ir::kNoNode, true};
  }
  auto it = scope_.find(name);
  if (it != scope_.end()) return Operand{it->second.node, it->second.poisoned};
  if (!skipped_names_.count(name)) report_undefined(t);
  return Operand{ir::kNoNode, true};
}

std::optional<Operand> Parser::parse_call(const std::string& stmt_name, bool top_level) {
  Token op_token = take();
  take();  // '('
  std::optional<ir::OpKind> kind = ir::parse_op_name(op_token.text);
  bool ok = true;
  if (!kind) {
    error(loc_of(op_token), "unknown operator " + describe_token(op_token));
    ok = false;
  }
  // Operands are parsed (and nested calls added, named "<stmt>.<n>") before this node, so the
  // node order is a valid execution order.
  std::vector<Operand> operands;
  std::vector<NamedAttr> attrs;
  while (!at(TokenKind::kRParen)) {
    if (at(TokenKind::kIdent) && peek(1).kind == TokenKind::kEquals) {
      Token attr_name = take();
      take();  // '='
      std::optional<AttrValue> value = parse_attr_value();
      if (!value) return std::nullopt;
      attrs.push_back(NamedAttr{std::string(attr_name.text), loc_of(attr_name), std::move(*value)});
    } else {
      std::optional<Operand> operand = parse_expr(stmt_name, /*top_level=*/false);
      if (!operand) return std::nullopt;
      // Operands after named attributes are accepted; their order among operands is kept.
      operands.push_back(*operand);
    }
    if (at(TokenKind::kComma)) {
      take();
      continue;
    }
    if (!at(TokenKind::kRParen)) {
      error_expected("',' or ')'");
      return std::nullopt;
    }
  }
  take();  // ')'
  if (!ok) return Operand{ir::kNoNode, true};

  ir::Node node;
  node.op = *kind;
  node.loc = loc_of(op_token);
  node.attrs = ir::default_attrs(*kind);
  const ir::OpInfo& info = ir::op_info(*kind);
  std::string op_name(info.name);

  int count = int(operands.size());
  if (count < info.min_inputs || (info.max_inputs >= 0 && count > info.max_inputs)) {
    std::string expected = info.max_inputs < 0   ? "at least " + std::to_string(info.min_inputs)
                           : info.min_inputs == info.max_inputs ? std::to_string(info.min_inputs)
                                                           : std::to_string(info.min_inputs) + " or " +
                                                                 std::to_string(info.max_inputs);
    error(node.loc, "'" + op_name + "' expects " + expected + " operand" +
                        (expected == "1" ? "" : "s") + ", got " + std::to_string(count));
    ok = false;
  }
  std::vector<std::string_view> seen;
  for (const NamedAttr& attr : attrs) {
    bool duplicate = false;
    for (std::string_view s : seen) duplicate |= s == attr.name;
    if (duplicate) {
      error(attr.name_loc, "attribute '" + attr.name + "' is given twice");
      ok = false;
      continue;
    }
    seen.push_back(attr.name);
    SourceLoc error_loc = attr.name_loc;
    if (std::optional<std::string> message = apply_attribute(*kind, node.attrs, attr, error_loc)) {
      error(error_loc, *message);
      ok = false;
      continue;
    }
    // Symbolic sizes inside shape lists must be bound by the graph inputs.
    for (const AttrValue& element : attr.value.list) {
      if (element.kind == AttrValue::Kind::kIdent && !check_bound(ir::Dim::symbol(element.text), element.loc)) {
        ok = false;
      }
    }
  }
  for (std::string_view required : required_attributes(*kind)) {
    bool present = false;
    for (std::string_view s : seen) present |= s == required;
    if (!present) {
      error(node.loc, "'" + op_name + "' needs the attribute '" + std::string(required) + "'");
      ok = false;
    }
  }
  if (!ok) return Operand{ir::kNoNode, true};
  for (const Operand& operand : operands) {
    if (operand.poisoned) return Operand{ir::kNoNode, true};
    node.inputs.push_back(operand.node);
  }
  node.name = node_name(stmt_name, top_level);
  return add_node(std::move(node));
}

std::optional<Operand> Parser::parse_const(const std::string& stmt_name, bool top_level) {
  Token keyword = take();
  std::optional<ir::TensorType> type = parse_type(/*binds_symbols=*/false);
  if (!type) return std::nullopt;
  bool ok = last_type_valid_;
  ir::Tensor tensor;
  std::optional<int64_t> numel = ir::static_num_elements(type->shape);
  if (!ok) {
    // The type's error was reported.
  } else if (!ir::is_static(type->shape)) {
    error(loc_of(keyword), "a const must have a static shape, not " + type->to_string());
    ok = false;
  } else if (!numel || *numel > (kMaxConstBytes - inline_const_bytes_) / int64_t(ir::dtype_size(type->dtype))) {
    error(loc_of(keyword), "const " + type->to_string() + " is too large for an inline literal (limit " +
                               std::to_string(kMaxConstBytes >> 20) + " MiB for all inline constants of a file)");
    ok = false;
  } else {
    inline_const_bytes_ += *numel * int64_t(ir::dtype_size(type->dtype));
    Result<ir::Tensor> zeros = ir::Tensor::zeros(type->dtype, ir::static_sizes(type->shape));
    if (!zeros) {
      error(loc_of(keyword), zeros.status().message());
      ok = false;
    } else {
      tensor = std::move(zeros).value();
    }
  }
  // Parse the literal even when the type is unusable, to keep the syntax in step.
  if (!parse_literal(tensor, *type, ok)) return std::nullopt;
  if (!ok) return Operand{ir::kNoNode, true};
  ir::Node node;
  node.op = ir::OpKind::kConstant;
  node.name = node_name(stmt_name, top_level);
  node.loc = loc_of(keyword);
  node.type = *type;
  node.attrs = ir::ConstantAttrs{graph_.add_constant(std::move(tensor)), ""};
  return add_node(std::move(node));
}

std::optional<Operand> Parser::parse_param(const std::string& stmt_name, bool top_level) {
  Token keyword = take();
  const Token type_token = peek();
  std::optional<ir::TensorType> type = parse_type(/*binds_symbols=*/false);
  if (!type) return std::nullopt;
  const bool type_valid = last_type_valid_;
  std::optional<Token> key_token = expect(TokenKind::kString, "the weight name (a string)");
  if (!key_token) return std::nullopt;
  std::string key = decode_string(*key_token);
  if (!type_valid) return Operand{ir::kNoNode, true};
  if (!ir::is_static(type->shape)) {
    error(loc_of(type_token), "a param must have a static shape, not " + type->to_string());
    return Operand{ir::kNoNode, true};
  }
  if (!has_weights_directive_) {
    error(loc_of(keyword), "'param' needs a 'weights \"FILE.safetensors\"' directive before the graph");
    has_weights_directive_ = true;  // say it once
    return Operand{ir::kNoNode, true};
  }
  if (!weights_) return Operand{ir::kNoNode, true};  // the directive's error was reported
  const SafetensorsEntry* entry = weights_->find(key);
  if (entry == nullptr) {
    error(loc_of(*key_token), "weight '" + key + "' not found in '" + weights_display_ + "'");
    return Operand{ir::kNoNode, true};
  }
  if (!entry->dtype || *entry->dtype != type->dtype || entry->shape != ir::static_sizes(type->shape)) {
    error(loc_of(type_token), "weight '" + key + "' is " + entry->type_string() + " in '" + weights_display_ +
                                  "' but declared " + type->to_string());
    return Operand{ir::kNoNode, true};
  }
  Result<ir::Tensor> tensor = weights_->load(key);
  if (!tensor) {
    error(loc_of(*key_token), tensor.status().message());
    return Operand{ir::kNoNode, true};
  }
  ir::Node node;
  node.op = ir::OpKind::kConstant;
  node.name = node_name(stmt_name, top_level);
  node.loc = loc_of(keyword);
  node.type = *type;
  node.attrs = ir::ConstantAttrs{graph_.add_constant(std::move(tensor).value()), key};
  return add_node(std::move(node));
}

std::optional<AttrValue> Parser::parse_attr_value() {
  AttrValue value;
  const Token t = peek();
  value.loc = loc_of(t);
  switch (t.kind) {
    case TokenKind::kMinus:
    case TokenKind::kInt:
    case TokenKind::kFloat: {
      bool negative = false;
      if (t.kind == TokenKind::kMinus) {
        take();
        negative = true;
        if (peek().is_ident("inf")) {
          take();
          value.kind = AttrValue::Kind::kFloat;
          value.float_value = -std::numeric_limits<double>::infinity();
          return value;
        }
        if (!at(TokenKind::kInt) && !at(TokenKind::kFloat)) {
          error_expected("a number after '-'");
          return std::nullopt;
        }
      }
      Token number = take();
      if (number.kind == TokenKind::kInt) {
        std::optional<int64_t> v = parse_signed_int(number, negative);
        if (!v) return std::nullopt;
        value.kind = AttrValue::Kind::kInt;
        value.int_value = *v;
        value.float_value = double(*v);
        if (!negative && at(TokenKind::kStar)) {  // shape=[2*batch]
          ir::Dim dim = ir::Dim::of(*v);
          if (!parse_size_product(dim)) return std::nullopt;
          if (dim.is_symbolic()) {
            value.kind = AttrValue::Kind::kIdent;
            value.text = dim.to_string();
          } else {
            value.int_value = dim.size();
            value.float_value = double(dim.size());
          }
        }
      } else {
        std::optional<double> v = parse_float_token(number, negative);
        if (!v) return std::nullopt;
        value.kind = AttrValue::Kind::kFloat;
        value.float_value = *v;
      }
      return value;
    }
    case TokenKind::kString:
      take();
      value.kind = AttrValue::Kind::kString;
      value.text = decode_string(t);
      return value;
    case TokenKind::kIdent:
      take();
      if (t.text == "true" || t.text == "false") {
        value.kind = AttrValue::Kind::kBool;
        value.bool_value = t.text == "true";
      } else if (std::optional<ir::DType> d = ir::parse_dtype(t.text)) {
        value.kind = AttrValue::Kind::kDType;
        value.dtype = *d;
      } else if (t.text == "inf" || t.text == "nan") {
        value.kind = AttrValue::Kind::kFloat;
        value.float_value = t.text == "inf" ? std::numeric_limits<double>::infinity()
                                            : std::numeric_limits<double>::quiet_NaN();
      } else {
        value.kind = AttrValue::Kind::kIdent;
        ir::Dim dim = ir::Dim::symbol(std::string(t.text));
        if (!parse_size_product(dim)) return std::nullopt;  // shape=[batch*seq, 64]
        value.text = dim.to_string();
      }
      return value;
    case TokenKind::kLBracket: {
      if (depth_ >= kMaxNesting) {
        error(loc_of(t), "nesting too deep (more than " + std::to_string(kMaxNesting) + " levels)");
        return std::nullopt;
      }
      take();
      ++depth_;
      value.kind = AttrValue::Kind::kList;
      bool good = true;
      while (!at(TokenKind::kRBracket)) {
        std::optional<AttrValue> element = parse_attr_value();
        if (!element) {
          good = false;
          break;
        }
        value.list.push_back(std::move(*element));
        if (at(TokenKind::kComma)) {
          take();
          continue;
        }
        if (!at(TokenKind::kRBracket)) {
          error_expected("',' or ']'");
          good = false;
          break;
        }
      }
      --depth_;
      if (!good) return std::nullopt;
      take();  // ']'
      return value;
    }
    default:
      error_expected("an attribute value");
      return std::nullopt;
  }
}

}  // namespace detail

Result<ir::Graph> parse_graph_text(std::string_view text, const std::string& filename,
                                   const std::string& base_dir, Diagnostics& diags) {
  detail::Parser parser(text, filename, base_dir, diags);
  return parser.parse();
}

Result<ir::Graph> parse_graph_file(const std::string& path, Diagnostics& diags) {
  std::string text;
  std::string base_dir;
  if (path == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    text = buffer.str();
  } else {
    Result<std::vector<std::byte>> bytes = read_regular_file(path);
    if (!bytes.is_ok()) {
      diags.error(SourceLoc{path, 0, 0}, bytes.status().message());
      return bytes.status();
    }
    text.assign(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    size_t slash = path.find_last_of('/');
    if (slash != std::string::npos) base_dir = path.substr(0, slash == 0 ? 1 : slash);
  }
  return parse_graph_text(text, path == "-" ? "<stdin>" : path, base_dir, diags);
}

}  // namespace kiln::frontend
