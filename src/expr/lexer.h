// Tokenizer of the DynamoDB expression language.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "expr/ast.h"

namespace outbox::expr::internal {

enum class Tok {
  kName,     // bare identifier [A-Za-z][A-Za-z0-9_]* (keywords too)
  kNamePh,   // #name
  kValuePh,  // :value
  kInt,      // [0-9]+ (list index)
  kLParen,
  kRParen,
  kLBracket,
  kRBracket,
  kComma,
  kDot,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kPlus,
  kMinus,
  kInvalid,  // a character the language does not have
  kEnd,
};

struct Token {
  Tok t = Tok::kEnd;
  std::string_view text;  // view into the expression text
  size_t pos = 0;         // byte offset
};

// Never fails: unknown characters become kInvalid tokens that the parser
// reports as syntax errors. The last token is kEnd.
std::vector<Token> Lex(std::string_view text);

// Case-insensitive keyword test for a kName token.
bool IsKeyword(const Token& t, std::string_view upper_keyword);

}  // namespace outbox::expr::internal
