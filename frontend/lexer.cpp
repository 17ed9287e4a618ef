#include "frontend/lexer.h"

#include <climits>
#include <string>

#include "ir/graph.h"
#include "ir/names.h"

namespace kiln::frontend {
namespace {

using ir::is_identifier_char;
using ir::is_identifier_start;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

// True for bytes that can begin a token (or whitespace/comment), i.e. that end a run of
// invalid characters.
bool starts_something(std::string_view text, size_t pos) {
  char c = text[pos];
  if (is_space(c) || is_identifier_start(c) || is_digit(c)) return true;
  switch (c) {
    case '#': case '"': case '(': case ')': case '[': case ']': case '{': case '}':
    case ',': case ':': case '=': case '-':
      return true;
    case '.':
      return pos + 1 < text.size() && is_digit(text[pos + 1]);
    default:
      return false;
  }
}

}  // namespace

std::string_view token_kind_name(TokenKind kind) {
  switch (kind) {
    case TokenKind::kEnd: return "end of file";
    case TokenKind::kError: return "invalid input";
    case TokenKind::kIdent: return "identifier";
    case TokenKind::kInt: return "integer";
    case TokenKind::kFloat: return "number";
    case TokenKind::kString: return "string";
    case TokenKind::kLParen: return "'('";
    case TokenKind::kRParen: return "')'";
    case TokenKind::kLBracket: return "'['";
    case TokenKind::kRBracket: return "']'";
    case TokenKind::kLBrace: return "'{'";
    case TokenKind::kRBrace: return "'}'";
    case TokenKind::kComma: return "','";
    case TokenKind::kColon: return "':'";
    case TokenKind::kEquals: return "'='";
    case TokenKind::kArrow: return "'->'";
    case TokenKind::kMinus: return "'-'";
    case TokenKind::kStar: return "'*'";
  }
  return "token";
}

std::string describe_token(const Token& token) {
  constexpr size_t kMaxShown = 40;
  auto shown = [&](std::string_view text) {
    std::string s(text.substr(0, kMaxShown));
    if (text.size() > kMaxShown) s += "...";
    return s;
  };
  switch (token.kind) {
    case TokenKind::kIdent: return "'" + shown(token.text) + "'";
    case TokenKind::kInt:
    case TokenKind::kFloat: return "number " + shown(token.text);
    case TokenKind::kString: return "string " + shown(token.text);
    default: return std::string(token_kind_name(token.kind));
  }
}

std::string decode_string(const Token& token) {
  std::string_view body = token.text;
  if (body.size() >= 2) body = body.substr(1, body.size() - 2);
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '\\' && i + 1 < body.size()) {
      char e = body[++i];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        default: out += e; break;  // \" \\ and anything else: the character itself
      }
    } else {
      out += c;
    }
  }
  return out;
}

void Lexer::advance(size_t n) { pos_ += n; }

void Lexer::skip_space_and_comments() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '\n') {
      ++pos_;
      if (line_ < INT_MAX) ++line_;
      line_start_ = pos_;
      at_line_start_ = true;
    } else if (is_space(c)) {
      ++pos_;
    } else if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      return;
    }
  }
}

Token Lexer::make(TokenKind kind, size_t start, int line, int column) {
  Token t;
  t.kind = kind;
  t.text = text_.substr(start, pos_ - start);
  t.line = line;
  t.column = column;
  t.first_on_line = at_line_start_;
  at_line_start_ = false;
  return t;
}

Token Lexer::next() {
  skip_space_and_comments();
  size_t start = pos_;
  int line = line_;
  size_t col = pos_ - line_start_ + 1;
  int column = col > size_t(INT_MAX) ? INT_MAX : int(col);
  if (pos_ >= text_.size()) return make(TokenKind::kEnd, start, line, column);

  char c = text_[pos_];
  if (is_identifier_start(c)) {
    while (pos_ < text_.size() && is_identifier_char(text_[pos_])) ++pos_;
    if (pos_ - start > ir::kMaxNameLength) {
      Token t = make(TokenKind::kError, start, line, column);
      t.error = "name too long";
      return t;
    }
    return make(TokenKind::kIdent, start, line, column);
  }
  if (is_digit(c) || (c == '.' && pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1]))) {
    return lex_number(start, line, column);
  }
  if (c == '"') return lex_string(start, line, column);

  TokenKind kind;
  switch (c) {
    case '(': kind = TokenKind::kLParen; break;
    case ')': kind = TokenKind::kRParen; break;
    case '[': kind = TokenKind::kLBracket; break;
    case ']': kind = TokenKind::kRBracket; break;
    case '{': kind = TokenKind::kLBrace; break;
    case '}': kind = TokenKind::kRBrace; break;
    case ',': kind = TokenKind::kComma; break;
    case ':': kind = TokenKind::kColon; break;
    case '=': kind = TokenKind::kEquals; break;
    case '*': kind = TokenKind::kStar; break;
    case '-':
      if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
        advance(2);
        return make(TokenKind::kArrow, start, line, column);
      }
      kind = TokenKind::kMinus;
      break;
    default:
      return lex_invalid(start, line, column);
  }
  advance(1);
  return make(kind, start, line, column);
}

Token Lexer::lex_number(size_t start, int line, int column) {
  bool is_float = false;
  while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
  if (pos_ < text_.size() && text_[pos_] == '.') {
    is_float = true;
    ++pos_;
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    size_t p = pos_ + 1;
    if (p < text_.size() && (text_[p] == '+' || text_[p] == '-')) ++p;
    if (p < text_.size() && is_digit(text_[p])) {
      is_float = true;
      pos_ = p;
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    }
  }
  // "12abc" or "1.5.2" is one malformed token, not a number followed by an identifier.
  if (pos_ < text_.size() && is_identifier_char(text_[pos_])) {
    while (pos_ < text_.size() && is_identifier_char(text_[pos_])) ++pos_;
    Token t = make(TokenKind::kError, start, line, column);
    t.error = "malformed number";
    return t;
  }
  return make(is_float ? TokenKind::kFloat : TokenKind::kInt, start, line, column);
}

Token Lexer::lex_string(size_t start, int line, int column) {
  ++pos_;  // opening quote
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      return make(TokenKind::kString, start, line, column);
    }
    if (c == '\n') break;
    if (c == '\\' && pos_ + 1 < text_.size() && text_[pos_ + 1] != '\n') {
      pos_ += 2;
      continue;
    }
    ++pos_;
  }
  Token t = make(TokenKind::kError, start, line, column);
  t.error = "unterminated string";
  return t;
}

Token Lexer::lex_invalid(size_t start, int line, int column) {
  ++pos_;
  while (pos_ < text_.size() && !starts_something(text_, pos_)) ++pos_;
  Token t = make(TokenKind::kError, start, line, column);
  t.error = "invalid character";
  return t;
}

}  // namespace kiln::frontend
