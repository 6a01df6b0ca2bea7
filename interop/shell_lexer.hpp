// paralab interop — the tokens of a bash launch script: words made of literal, quoted and
// expansion parts ($VAR, ${VAR:-default}, ${ARR[@]}, $(cmd), $((expr))), and the operators
// between commands. Handles quoting, backslash line continuations, comments, redirections and
// here-documents; every character keeps the line it was written on.
#pragma once

#include <string>
#include <vector>

namespace paralab::interop {

// One character of a word after expansion, with its source line. `split`: it came from an
// unquoted expansion, so whitespace there separates words (bash's word splitting). `why`: it
// stands for a value only the running shell knows (ShellEnv::reason(why) says which), or -1.
struct ShellChar {
  char c;
  int line;
  bool split;
  int why;
};
using ShellText = std::vector<ShellChar>;

struct WordPart {
  enum class Kind : uint8_t { literal, variable, command, arithmetic };
  Kind kind = Kind::literal;
  bool quoted = false;
  ShellText text;          // literal: the characters
  std::string name;        // variable: "GPUS", "1", "@"; command / arithmetic: the source text
  std::string index;       // variable: "" (scalar), "@", "*" or an element number
  std::string op;          // variable: "", ":-", "-", ":=", "=", ":+", "+", "#" (length)
  std::vector<WordPart> alt;  // variable: the word after `op`
  int line = 0;
};

struct ShellWord {
  std::vector<WordPart> parts;
  int line = 0;
  // The word's text when it has no expansions ("if", "then", "GPT_ARGS="), else empty.
  [[nodiscard]] std::string literal() const;
};

struct ShellToken {
  enum class Kind : uint8_t { word, newline, semicolon, and_if, or_if, pipe, amp, lparen, rparen, redirect };
  Kind kind = Kind::word;
  ShellWord word;
  int line = 0;
  bool redirect_has_target = false;  // `> file` (the next word is the target), not `2>&1`
};

// Tokens of `text`. Throws ConfigError naming `file` and the line for an unterminated quote,
// expansion or here-document.
std::vector<ShellToken> lex_shell(const std::string& text, const std::string& file);

}  // namespace paralab::interop
