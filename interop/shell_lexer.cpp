// paralab interop — bash tokens, as far as launch scripts use them.
#include "interop/shell_lexer.hpp"

#include <cctype>

#include "ir/error.hpp"

namespace paralab::interop {

std::string ShellWord::literal() const {
  std::string out;
  for (const WordPart& p : parts) {
    if (p.kind != WordPart::Kind::literal || p.quoted) return "";
    for (const ShellChar& c : p.text) out += c.c;
  }
  return out;
}

namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(const std::string& s, std::string file, int line) : s_(s), file_(std::move(file)), line_(line) {}

  std::vector<ShellToken> tokens();
  // The parts of a whole string where whitespace is literal: the word after ${X:-.
  std::vector<WordPart> alt_parts();

 private:
  [[noreturn]] void error(const std::string& what, int line) const {
    throw ConfigError(SourceLoc{file_, line, 0}, "", "", what, "a complete bash script");
  }
  char at(size_t k) const { return k < s_.size() ? s_[k] : '\0'; }
  void add_char(std::vector<WordPart>& parts, char c, bool quoted) {
    if (parts.empty() || parts.back().kind != WordPart::Kind::literal || parts.back().quoted != quoted) {
      parts.push_back(WordPart{});
      parts.back().quoted = quoted;
      parts.back().line = line_;
    }
    parts.back().text.push_back({c, line_, false, -1});
  }
  void empty_quoted(std::vector<WordPart>& parts) {
    WordPart p;
    p.quoted = true;
    p.line = line_;
    parts.push_back(p);
  }
  // Advances over s_[i_] and counts its newline.
  char take() {
    const char c = s_[i_++];
    if (c == '\n') ++line_;
    return c;
  }
  // The text up to the bracket closing the one just passed (`depth` levels open), skipping quotes.
  std::string balanced(char open, char close, int depth);
  void single_quoted(std::vector<WordPart>& parts);
  void double_quoted(std::vector<WordPart>& parts);
  void dollar(std::vector<WordPart>& parts, bool quoted);
  void braced(std::vector<WordPart>& parts, bool quoted);
  bool operator_token(std::vector<ShellToken>& out, ShellWord& word);
  void redirect(std::vector<ShellToken>& out, ShellWord& word);
  void skip_heredoc();

  std::string s_;
  std::string file_;
  int line_;
  size_t i_ = 0;
  std::string heredoc_;  // delimiter of a pending here-document
  bool heredoc_tabs_ = false;
};

std::string Lexer::balanced(char open, char close, int depth) {
  const int start_line = line_;
  std::string out;
  char quote = 0;
  while (i_ < s_.size()) {
    const char c = take();
    if (c == '\\' && quote != '\'' && i_ < s_.size()) {
      out += c;
      out += take();
      continue;
    }
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == open) {
      ++depth;
    } else if (c == close && --depth == 0) {
      return out;
    }
    out += c;
  }
  error(std::string("unterminated expansion: no closing '") + close + "'", start_line);
}

void Lexer::single_quoted(std::vector<WordPart>& parts) {
  const int start = line_;
  ++i_;
  empty_quoted(parts);
  while (i_ < s_.size() && s_[i_] != '\'') {
    const char c = take();
    parts.back().text.push_back({c, c == '\n' ? line_ - 1 : line_, false, -1});
  }
  if (i_ >= s_.size()) error("unterminated single quote", start);
  ++i_;
}

void Lexer::double_quoted(std::vector<WordPart>& parts) {
  const int start = line_;
  ++i_;
  empty_quoted(parts);
  while (i_ < s_.size() && s_[i_] != '"') {
    const char c = s_[i_];
    if (c == '\\' && at(i_ + 1) == '\n') {
      i_ += 2, ++line_;
    } else if (c == '\\' && (at(i_ + 1) == '"' || at(i_ + 1) == '\\' || at(i_ + 1) == '$' || at(i_ + 1) == '`')) {
      add_char(parts, s_[i_ + 1], true);
      i_ += 2;
    } else if (c == '$') {
      dollar(parts, true);
    } else if (c == '`') {
      ++i_;
      WordPart p{WordPart::Kind::command, true, {}, "`" + balanced('\0', '`', 1) + "`", "", "", {}, line_};
      parts.push_back(p);
    } else {
      add_char(parts, take(), true);
    }
  }
  if (i_ >= s_.size()) error("unterminated double quote", start);
  ++i_;
}

void Lexer::braced(std::vector<WordPart>& parts, bool quoted) {
  const int line = line_;
  i_ += 2;  // "${"
  const std::string body = balanced('{', '}', 1);
  WordPart p;
  p.kind = WordPart::Kind::variable;
  p.quoted = quoted;
  p.line = line;
  size_t k = 0;
  if (body.size() > 1 && body[0] == '#') p.op = "#", k = 1;
  while (k < body.size() && (is_name_char(body[k]) || (k == p.op.size() && (body[k] == '@' || body[k] == '*'))))
    p.name += body[k++];
  if (k < body.size() && body[k] == '[') {
    const size_t close = body.find(']', k);
    if (close == std::string::npos) error("unterminated ${...[ index", line);
    p.index = body.substr(k + 1, close - k - 1);
    k = close + 1;
  }
  if (p.name.empty()) error("bad substitution ${" + body + "}", line);
  if (k < body.size() && p.op.empty()) {
    for (const char* op : {":-", ":=", ":+", ":?", "-", "=", "+", "?"})
      if (body.compare(k, std::string(op).size(), op) == 0) {
        p.op = op;
        break;
      }
    if (p.op.empty())
      p.op = body.substr(k, 1) == "#" || body.substr(k, 1) == "%" || body.substr(k, 1) == "/" ? "edit" : "?";
    if (p.op != "edit") {
      Lexer sub(body.substr(k + p.op.size()), file_, line);
      p.alt = sub.alt_parts();
    }
  }
  parts.push_back(std::move(p));
}

void Lexer::dollar(std::vector<WordPart>& parts, bool quoted) {
  const char n = at(i_ + 1);
  if (n == '(') {
    const bool arith = at(i_ + 2) == '(';
    const int line = line_;
    i_ += arith ? 3 : 2;
    std::string body = balanced('(', ')', arith ? 2 : 1);
    if (arith) body = body.substr(0, body.size() - (body.empty() || body.back() != ')' ? 0 : 1));
    WordPart p{arith ? WordPart::Kind::arithmetic : WordPart::Kind::command,
               quoted,
               {},
               arith ? body : "$(" + body + ")",
               "",
               "",
               {},
               line};
    parts.push_back(p);
  } else if (n == '{') {
    braced(parts, quoted);
  } else if (is_name_char(n) || n == '@' || n == '*' || n == '#' || n == '?' || n == '$' || n == '!') {
    WordPart p;
    p.kind = WordPart::Kind::variable;
    p.quoted = quoted;
    p.line = line_;
    ++i_;
    if (std::isdigit(static_cast<unsigned char>(n)) || !is_name_char(n))
      p.name = take();
    else
      while (i_ < s_.size() && is_name_char(s_[i_])) p.name += take();
    parts.push_back(std::move(p));
  } else {
    add_char(parts, take(), quoted);
  }
}

std::vector<WordPart> Lexer::alt_parts() {
  std::vector<WordPart> parts;
  while (i_ < s_.size()) {
    const char c = s_[i_];
    if (c == '\'')
      single_quoted(parts);
    else if (c == '"')
      double_quoted(parts);
    else if (c == '$')
      dollar(parts, false);
    else if (c == '\\' && i_ + 1 < s_.size())
      ++i_, add_char(parts, take(), true);
    else
      add_char(parts, take(), false);
  }
  return parts;
}

void Lexer::skip_heredoc() {
  const int start = line_;
  while (i_ < s_.size()) {
    const size_t end = std::min(s_.find('\n', i_), s_.size());
    std::string l = s_.substr(i_, end - i_);
    i_ = std::min(end + 1, s_.size());
    ++line_;
    if (heredoc_tabs_)
      l.erase(0, l.find_first_not_of('\t') == std::string::npos ? l.size() : l.find_first_not_of('\t'));
    if (l == heredoc_) {
      heredoc_.clear();
      return;
    }
  }
  error("unterminated here-document (no line '" + heredoc_ + "')", start);
}

void Lexer::redirect(std::vector<ShellToken>& out, ShellWord& word) {
  // A file descriptor written right before the operator (`2>`) belongs to it.
  if (!word.literal().empty() && word.literal().find_first_not_of("0123456789") == std::string::npos)
    word = ShellWord{};
  ShellToken t;
  t.kind = ShellToken::Kind::redirect;
  t.line = line_;
  const char c = take();
  const bool heredoc = c == '<' && at(i_) == '<' && at(i_ + 1) != '<';
  while (at(i_) == '<' || at(i_) == '>' || at(i_) == '|') ++i_;
  if (at(i_) == '&') {  // >&2, <&0, >&-: no target word
    ++i_;
    while (std::isdigit(static_cast<unsigned char>(at(i_))) || at(i_) == '-') ++i_;
  } else {
    t.redirect_has_target = true;
  }
  if (heredoc) {
    heredoc_tabs_ = at(i_) == '-';
    if (heredoc_tabs_) ++i_;
    while (at(i_) == ' ' || at(i_) == '\t') ++i_;
    std::string delim;
    while (i_ < s_.size() && !std::isspace(static_cast<unsigned char>(s_[i_])) && s_[i_] != ';') {
      const char d = s_[i_++];
      if (d != '\'' && d != '"' && d != '\\') delim += d;
    }
    heredoc_ = delim;
    t.redirect_has_target = false;
  }
  out.push_back(t);
}

// An operator at i_: flushes `word` and appends the operator's token. False when s_[i_] is not one.
bool Lexer::operator_token(std::vector<ShellToken>& out, ShellWord& word) {
  using K = ShellToken::Kind;
  const char c = s_[i_];
  if (c != ';' && c != '&' && c != '|' && c != '(' && c != ')' && c != '<' && c != '>' && c != '\n') return false;
  if (c == '<' || c == '>') {
    redirect(out, word);
    return true;
  }
  if (!word.parts.empty()) {
    const int line = word.line;
    out.push_back({K::word, std::move(word), line});
  }
  word = ShellWord{};
  ShellToken t;
  t.line = line_;
  const char n = at(i_ + 1);
  size_t len = 1;
  if (c == '\n')
    t.kind = K::newline;
  else if (c == ';')
    t.kind = K::semicolon, len = n == ';' ? 2 : 1;
  else if (c == '&')
    t.kind = n == '&' ? K::and_if : K::amp, len = n == '&' ? 2 : 1;
  else if (c == '|')
    t.kind = n == '|' ? K::or_if : K::pipe, len = n == '|' || n == '&' ? 2 : 1;
  else
    t.kind = c == '(' ? K::lparen : K::rparen;
  for (size_t k = 0; k < len; ++k) take();
  out.push_back(t);
  if (c == '\n' && !heredoc_.empty()) skip_heredoc();
  return true;
}

std::vector<ShellToken> Lexer::tokens() {
  std::vector<ShellToken> out;
  ShellWord word;
  auto flush = [&] {
    if (!word.parts.empty()) {
      const int line = word.line;
      out.push_back({ShellToken::Kind::word, std::move(word), line});
    }
    word = ShellWord{};
  };
  while (i_ < s_.size()) {
    const char c = s_[i_];
    if (word.parts.empty()) word.line = line_;
    if (c == '\\' && at(i_ + 1) == '\n') {
      i_ += 2, ++line_;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      flush();
      ++i_;
    } else if (c == '#' && word.parts.empty()) {
      while (i_ < s_.size() && s_[i_] != '\n') ++i_;
    } else if (operator_token(out, word)) {
    } else if (c == '\'') {
      single_quoted(word.parts);
    } else if (c == '"') {
      double_quoted(word.parts);
    } else if (c == '$') {
      dollar(word.parts, false);
    } else if (c == '`') {
      ++i_;
      word.parts.push_back({WordPart::Kind::command, false, {}, "`" + balanced('\0', '`', 1) + "`", "", "", {}, line_});
    } else if (c == '\\') {
      ++i_;
      if (i_ < s_.size()) add_char(word.parts, take(), true);
    } else {
      add_char(word.parts, take(), false);
    }
  }
  flush();
  if (!heredoc_.empty()) skip_heredoc();
  return out;
}

}  // namespace

std::vector<ShellToken> lex_shell(const std::string& text, const std::string& file) {
  return Lexer(text, file, 1).tokens();
}

}  // namespace paralab::interop
