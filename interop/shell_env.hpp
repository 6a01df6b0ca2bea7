// paralab interop — the variables of a launch script and the expansion of its words, as bash
// does it for what launch scripts use: $VAR, ${VAR}, ${VAR:-default} (and -, :=, :+), arrays
// (${ARR[@]}, "${ARR[@]}", ${ARR[0]}, ${#ARR[@]}), word splitting of unquoted expansions and
// $((arithmetic)). What only the running shell knows ($(command), script arguments $1..., the
// caller's environment) is kept as text and marked unresolved, with the reason.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "interop/shell_lexer.hpp"

namespace paralab::interop {

// A word (or variable element) after expansion.
struct ShellPiece {
  ShellText text;
  std::string unresolved;  // non-empty: only the running shell knows its value; says why

  [[nodiscard]] std::string str() const;
  [[nodiscard]] int line() const { return text.empty() ? 0 : text.front().line; }
};

class ShellEnv {
 public:
  // NAME=value (one element) or NAME=(elements); `append` for NAME+=.
  void assign(const std::string& name, std::vector<ShellPiece> elements, bool array, bool append);
  [[nodiscard]] bool is_set(const std::string& name) const { return vars_.count(name) > 0; }
  // The first element of a variable (its value when scalar).
  [[nodiscard]] std::optional<ShellPiece> scalar(const std::string& name) const;

  // A command's word: split at unquoted whitespace of expansions; "${A[@]}" gives one word per
  // element; an unquoted variable that is unset and the whole word gives no word (its name is
  // added to `vanished`).
  std::vector<ShellPiece> words(const ShellWord& w, std::vector<std::string>* vanished = nullptr) const;
  // The value of an assignment: no splitting; unset variables stay as marked text.
  ShellPiece value(const ShellWord& w) const { return joined(w, false); }
  // An operand of a test ([ ], [[ ]]): no splitting; unset variables are empty, as in bash.
  ShellPiece operand(const ShellWord& w) const { return joined(w, true); }

 private:
  enum class Mode : uint8_t { command, assignment, test };
  struct Segment {
    ShellText text;
    bool keep = false;  // quoted: an empty segment is still a word ("")
  };
  struct Var {
    std::vector<ShellPiece> elements;
    bool array = false;
  };
  void expand(const WordPart& p, std::vector<Segment>& segs, Mode mode, bool whole, std::vector<std::string>* vanished) const;
  void expand_variable(const WordPart& p, std::vector<Segment>& segs, Mode mode, bool whole,
                       std::vector<std::string>* vanished) const;
  std::vector<Segment> segments(const ShellWord& w, Mode mode, std::vector<std::string>* vanished) const;
  std::optional<int64_t> arithmetic(const std::string& expr) const;
  ShellPiece joined(const ShellWord& w, bool test) const;
  // Why a marked character is unresolved: interned reasons, indexed by ShellChar::why.
  int reason_id(const std::string& why) const;
  std::string unresolved(const ShellText& t) const;

  std::map<std::string, Var> vars_;
  mutable std::vector<std::string> reasons_;
};

}  // namespace paralab::interop
