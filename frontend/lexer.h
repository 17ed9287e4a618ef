// The .graph lexer: turns source text into tokens on demand (it never tokenizes the whole file
// up front, so a 100 MB line costs no more memory than the text itself).
//
// Tokens point into the source text (string_view), which must outlive the lexer. Bad input
// never stops the lexer: a run of invalid bytes becomes one kError token (so binary garbage is
// reported once per run, not once per byte), an unterminated string becomes a kError token
// ending at the end of its line. The lexer never reads outside the text; NUL bytes are ordinary
// invalid characters.
//
// Not thread-safe; one Lexer per parse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::frontend {

enum class TokenKind : uint8_t {
  kEnd,       // end of the text
  kError,     // invalid characters or an unterminated string; Token::error says which
  kIdent,     // [A-Za-z_][A-Za-z0-9_.]*  (keywords and dtype names are identifiers too)
  kInt,       // [0-9]+
  kFloat,     // 1.5, 1e-5, 2.5E+3, .5
  kString,    // "...", with \" \\ \n \t escapes; Token::text includes the quotes
  kLParen, kRParen, kLBracket, kRBracket, kLBrace, kRBrace,
  kComma, kColon, kEquals, kArrow, kMinus,
  kStar,      // '*', between the factors of a symbolic size product (batch*seq)
};

// "identifier", "'('", ... for messages such as "expected ')', found identifier".
std::string_view token_kind_name(TokenKind kind);

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;  // the token's characters in the source
  int line = 1;           // 1-based
  int column = 1;         // 1-based, in bytes
  bool first_on_line = false;  // no other token precedes it on its line
  std::string_view error;      // for kError: a static description

  bool is(TokenKind k) const { return kind == k; }
  bool is_ident(std::string_view word) const { return kind == TokenKind::kIdent && text == word; }
};

// A short, printable rendering of a token for messages: identifiers and numbers as written
// (truncated when very long), punctuation quoted, "end of file" for kEnd.
std::string describe_token(const Token& token);

// Decodes the contents of a kString token (without quotes, escapes resolved). Unknown escapes
// keep the escaped character.
std::string decode_string(const Token& token);

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  // Returns the next token and advances.
  Token next();

  // Byte offset of the next unread character (for tests).
  size_t offset() const { return pos_; }

 private:
  void skip_space_and_comments();
  Token make(TokenKind kind, size_t start, int line, int column);
  Token lex_number(size_t start, int line, int column);
  Token lex_string(size_t start, int line, int column);
  Token lex_invalid(size_t start, int line, int column);
  void advance(size_t n);  // moves pos_ forward within one line (no newlines in the range)

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  bool at_line_start_ = true;  // no token has been produced on the current line yet
};

}  // namespace kiln::frontend
