#include "expr/lexer.h"

namespace outbox::expr::internal {
namespace {

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsWord(char c) { return IsAlpha(c) || IsDigit(c) || c == '_'; }
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::vector<Token> Lex(std::string_view s) {
  std::vector<Token> out;
  out.reserve(s.size() / 2 + 2);
  size_t i = 0;
  auto emit = [&](Tok t, size_t start, size_t end) {
    out.push_back(Token{t, s.substr(start, end - start), start});
  };
  while (i < s.size()) {
    char c = s[i];
    if (IsSpace(c)) {
      ++i;
      continue;
    }
    size_t start = i;
    if (IsAlpha(c)) {
      while (i < s.size() && IsWord(s[i])) ++i;
      emit(Tok::kName, start, i);
    } else if (IsDigit(c)) {
      while (i < s.size() && IsDigit(s[i])) ++i;
      emit(Tok::kInt, start, i);
    } else if (c == '#' || c == ':') {
      ++i;
      while (i < s.size() && IsWord(s[i])) ++i;
      if (i == start + 1) {
        emit(Tok::kInvalid, start, i);
      } else {
        emit(c == '#' ? Tok::kNamePh : Tok::kValuePh, start, i);
      }
    } else {
      Tok t = Tok::kInvalid;
      size_t len = 1;
      switch (c) {
        case '(':
          t = Tok::kLParen;
          break;
        case ')':
          t = Tok::kRParen;
          break;
        case '[':
          t = Tok::kLBracket;
          break;
        case ']':
          t = Tok::kRBracket;
          break;
        case ',':
          t = Tok::kComma;
          break;
        case '.':
          t = Tok::kDot;
          break;
        case '=':
          t = Tok::kEq;
          break;
        case '+':
          t = Tok::kPlus;
          break;
        case '-':
          t = Tok::kMinus;
          break;
        case '<':
          if (i + 1 < s.size() && s[i + 1] == '=') {
            t = Tok::kLe, len = 2;
          } else if (i + 1 < s.size() && s[i + 1] == '>') {
            t = Tok::kNe, len = 2;
          } else {
            t = Tok::kLt;
          }
          break;
        case '>':
          if (i + 1 < s.size() && s[i + 1] == '=') {
            t = Tok::kGe, len = 2;
          } else {
            t = Tok::kGt;
          }
          break;
        default: {
          // One UTF-8 sequence as the offending token.
          unsigned char u = static_cast<unsigned char>(c);
          len = u >= 0xF0 ? 4 : u >= 0xE0 ? 3 : u >= 0xC0 ? 2 : 1;
          if (i + len > s.size()) len = s.size() - i;
        }
      }
      i += len;
      emit(t, start, i);
    }
  }
  out.push_back(Token{Tok::kEnd, std::string_view(), s.size()});
  return out;
}

bool IsKeyword(const Token& t, std::string_view kw) {
  if (t.t != Tok::kName || t.text.size() != kw.size()) return false;
  for (size_t i = 0; i < kw.size(); ++i) {
    char c = t.text[i];
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c != kw[i]) return false;
  }
  return true;
}

}  // namespace outbox::expr::internal
