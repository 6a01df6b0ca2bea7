// paralab interop — running a launch script's assignments and conditions to its training command.
#include "interop/launch_script.hpp"

#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include "ir/error.hpp"

namespace paralab::interop {

bool is_training_script(const std::string& word) {
  const std::string base = word.substr(word.find_last_of('/') == std::string::npos ? 0 : word.find_last_of('/') + 1);
  return base.size() > 12 && base.rfind("pretrain_", 0) == 0 && base.compare(base.size() - 3, 3, ".py") == 0;
}

namespace {

using K = ShellToken::Kind;
enum class Truth : uint8_t { no, yes, unknown };

Truth negate(Truth t) { return t == Truth::unknown ? t : t == Truth::yes ? Truth::no : Truth::yes; }

bool glob(const std::string& s, const std::string& p, size_t i = 0, size_t j = 0) {
  if (j == p.size()) return i == s.size();
  if (p[j] == '*') return glob(s, p, i, j + 1) || (i < s.size() && glob(s, p, i + 1, j));
  return i < s.size() && (p[j] == '?' || p[j] == s[i]) && glob(s, p, i + 1, j + 1);
}

std::optional<int64_t> to_int(const std::string& s) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// A test's operands ([ ... ] or [[ ... ]] without the brackets).
Truth test(const std::vector<ShellPiece>& args) {
  for (const ShellPiece& a : args)
    if (!a.unresolved.empty()) return Truth::unknown;
  std::vector<std::string> w;
  for (const ShellPiece& a : args) w.push_back(a.str());
  if (!w.empty() && w[0] == "!") return negate(test(std::vector<ShellPiece>(args.begin() + 1, args.end())));
  if (w.empty()) return Truth::no;
  if (w.size() == 1) return w[0].empty() ? Truth::no : Truth::yes;
  if (w.size() == 2 && (w[0] == "-n" || w[0] == "-z")) return (w[1].empty() == (w[0] == "-z")) ? Truth::yes : Truth::no;
  if (w.size() != 3) return Truth::unknown;
  const std::string& op = w[1];
  if (op == "=" || op == "==") return glob(w[0], w[2]) ? Truth::yes : Truth::no;
  if (op == "!=") return glob(w[0], w[2]) ? Truth::no : Truth::yes;
  const auto a = to_int(w[0]), b = to_int(w[2]);
  if (!a || !b) return Truth::unknown;
  if (op == "-eq") return *a == *b ? Truth::yes : Truth::no;
  if (op == "-ne") return *a != *b ? Truth::yes : Truth::no;
  if (op == "-lt") return *a < *b ? Truth::yes : Truth::no;
  if (op == "-le") return *a <= *b ? Truth::yes : Truth::no;
  if (op == "-gt") return *a > *b ? Truth::yes : Truth::no;
  if (op == "-ge") return *a >= *b ? Truth::yes : Truth::no;
  return Truth::unknown;
}

class Runner {
 public:
  Runner(std::vector<ShellToken> toks, std::string file) : t_(std::move(toks)), file_(std::move(file)) {}
  LaunchCommand run();

 private:
  struct Branch {
    bool parent = true, taken = false, active = false;
  };
  bool active() const { return branches_.empty() || branches_.back().active; }
  bool word_is(size_t k, const char* w) const {
    return k < t_.size() && t_[k].kind == K::word && t_[k].word.literal() == w;
  }
  bool separator(size_t k) const {
    const K kind = t_[k].kind;
    return kind == K::newline || kind == K::semicolon || kind == K::and_if || kind == K::or_if || kind == K::pipe ||
           kind == K::amp;
  }
  // Index of the word `w` in command position at or after `k` (t_.size() when none).
  size_t find_keyword(size_t k, const char* w) const {
    for (; k < t_.size(); ++k)
      if (word_is(k, w) && (k == 0 || separator(k - 1))) return k;
    return t_.size();
  }
  [[noreturn]] void error(const std::string& what, int line) const {
    throw ConfigError(SourceLoc{file_, line, 0}, "", "", what, "a bash script with one pretrain_*.py command");
  }
  void keyword(const std::string& w);
  Truth condition(size_t begin, size_t end) const;
  Truth primary(size_t begin, size_t end) const;
  void command();
  void run_words(const std::vector<const ShellWord*>& words, int line);

  std::vector<ShellToken> t_;
  std::string file_;
  size_t k_ = 0;
  std::vector<Branch> branches_;
  LaunchCommand out_;
  bool found_ = false;
  int found_line_ = 0;
};

Truth Runner::primary(size_t begin, size_t end) const {
  bool neg = false;
  while (begin < end && word_is(begin, "!")) neg = !neg, ++begin;
  std::vector<ShellPiece> args;
  for (size_t k = begin; k < end; ++k)
    if (t_[k].kind == K::word) args.push_back(out_.env.operand(t_[k].word));
  if (args.empty()) return Truth::unknown;
  const std::string first = args.front().str(), last = args.back().str();
  const bool opens = first == "[" || first == "[[" || first == "test";
  const bool closes = last == "]" || last == "]]";
  Truth r = Truth::unknown;
  if (opens || closes) {
    args.erase(args.begin(), args.begin() + (opens ? 1 : 0));
    if (closes && !args.empty()) args.pop_back();
    r = test(args);
  } else if (args.size() == 1 && (first == "true" || first == ":")) {
    r = Truth::yes;
  } else if (args.size() == 1 && first == "false") {
    r = Truth::no;
  }
  return neg ? negate(r) : r;
}

// `a && b || c` over the tokens [begin, end): bash gives && and || equal precedence, left to right.
Truth Runner::condition(size_t begin, size_t end) const {
  Truth acc = Truth::yes;
  K pending = K::and_if;
  size_t start = begin;
  for (size_t k = begin; k <= end; ++k) {
    const bool op = k < end && (t_[k].kind == K::and_if || t_[k].kind == K::or_if);
    if (!op && k < end) continue;
    const Truth r = primary(start, k);
    if (pending == K::and_if)
      acc = acc == Truth::no || r == Truth::no     ? Truth::no
            : acc == Truth::yes && r == Truth::yes ? Truth::yes
                                                   : Truth::unknown;
    else
      acc = acc == Truth::yes || r == Truth::yes ? Truth::yes
            : acc == Truth::no && r == Truth::no ? Truth::no
                                                 : Truth::unknown;
    if (k < end) pending = t_[k].kind;
    start = k + 1;
  }
  return acc;
}

void Runner::keyword(const std::string& w) {
  const int line = t_[k_].line;
  if (w == "if" || w == "elif") {
    const size_t then = find_keyword(k_ + 1, "then");
    if (then == t_.size()) error("`" + w + "` without `then`", line);
    size_t end = then;
    while (end > k_ + 1 && separator(end - 1)) --end;
    if (w == "if") branches_.push_back({active(), false, false});
    if (branches_.empty()) error("`elif` without `if`", line);
    Branch& b = branches_.back();
    if (b.parent && !b.taken) {
      const Truth c = condition(k_ + 1, end);
      if (c == Truth::unknown)
        out_.notes.push_back(file_ + ":" + std::to_string(line) +
                             ": a condition paralab cannot decide (a file test, a command or a value set outside the "
                             "script): taken as false");
      b.active = c == Truth::yes;
      b.taken = b.active;
    } else {
      b.active = false;
    }
    k_ = then + 1;
    return;
  }
  if (w == "else" || w == "fi") {
    if (branches_.empty()) error("`" + w + "` without `if`", line);
    Branch& b = branches_.back();
    if (w == "fi")
      branches_.pop_back();
    else
      b.active = b.parent && !b.taken, b.taken = true;
    ++k_;
    return;
  }
  if (w == "for" || w == "while" || w == "until" || w == "select") {
    out_.notes.push_back(file_ + ":" + std::to_string(line) + ": a `" + w +
                         "` loop: its body is read once, its condition not run");
    k_ = std::min(find_keyword(k_ + 1, "do") + 1, t_.size());
    return;
  }
  if (w == "case") {
    out_.notes.push_back(file_ + ":" + std::to_string(line) + ": a `case` block is not read");
    k_ = std::min(find_keyword(k_ + 1, "esac") + 1, t_.size());
    return;
  }
  ++k_;  // then, do, done, {, }, function, !, time: nothing to run
}

void Runner::run_words(const std::vector<const ShellWord*>& words, int line) {
  std::vector<std::string> vanished;
  std::vector<ShellPiece> pieces;
  for (const ShellWord* w : words)
    for (ShellPiece& p : out_.env.words(*w, &vanished)) pieces.push_back(std::move(p));
  if (!pieces.empty() && (pieces[0].str() == "source" || pieces[0].str() == "."))
    out_.notes.push_back(file_ + ":" + std::to_string(line) + ": `" + pieces[0].str() +
                         "` of another file is not followed");
  size_t script = pieces.size();
  for (size_t i = 0; i < pieces.size() && script == pieces.size(); ++i)
    if (is_training_script(pieces[i].str())) script = i;
  if (script == pieces.size()) return;
  if (found_)
    error("a second training command (the first is at line " + std::to_string(found_line_) +
              "): keep the one to convert, or pass its arguments directly",
          line);
  found_ = true;
  found_line_ = line;
  auto word = [&](const ShellPiece& p) { return ScriptWord{p.str(), p.line() ? p.line() : line, p.unresolved}; };
  for (size_t i = 0; i < pieces.size(); ++i) (i < script ? out_.launcher : out_.args).push_back(word(pieces[i]));
  out_.args.erase(out_.args.begin());  // the script itself
  out_.script = word(pieces[script]);
  std::string names;
  for (const std::string& v : vanished)
    if (names.find(" " + v + ",") == std::string::npos) names += " " + v + ",";
  if (!names.empty())
    out_.notes.push_back(file_ + ":" + std::to_string(line) +
                         ": not set in the script, so expanded to nothing:" + names.substr(0, names.size() - 1));
}

struct Assignment {
  std::string name;
  bool append = false;
  ShellWord value;
};

// NAME=value or NAME+=value (the first part unquoted and starting with a name and '=').
std::optional<Assignment> assignment(const ShellWord& w) {
  if (w.parts.empty() || w.parts[0].kind != WordPart::Kind::literal || w.parts[0].quoted) return std::nullopt;
  const ShellText& t = w.parts[0].text;
  size_t eq = 0;
  while (eq < t.size() && (std::isalnum(static_cast<unsigned char>(t[eq].c)) || t[eq].c == '_')) ++eq;
  Assignment a;
  for (size_t k = 0; k < eq; ++k) a.name += t[k].c;
  if (a.name.empty() || std::isdigit(static_cast<unsigned char>(a.name[0]))) return std::nullopt;
  if (eq < t.size() && t[eq].c == '+') a.append = true, ++eq;
  if (eq >= t.size() || t[eq].c != '=') return std::nullopt;
  a.value = w;
  a.value.parts[0].text.erase(a.value.parts[0].text.begin(), a.value.parts[0].text.begin() + static_cast<long>(eq) + 1);
  if (a.value.parts[0].text.empty()) a.value.parts.erase(a.value.parts.begin());
  return a;
}

void Runner::command() {
  const int line = t_[k_].line;
  std::vector<const ShellWord*> words;
  bool leading = true, declaration = false;
  while (k_ < t_.size() && !separator(k_)) {
    const ShellToken& tok = t_[k_];
    if (tok.kind == K::redirect) {
      k_ += 1 + (tok.redirect_has_target && k_ + 1 < t_.size() && t_[k_ + 1].kind == K::word ? 1 : 0);
      continue;
    }
    if (tok.kind == K::lparen && words.size() == 1 && k_ + 1 < t_.size() && t_[k_ + 1].kind == K::rparen) {
      out_.notes.push_back(file_ + ":" + std::to_string(line) + ": function " + words[0]->literal() +
                           ": its body is read where it is defined");
      k_ += 2;
      return;
    }
    if (tok.kind != K::word) {
      ++k_;
      continue;
    }
    const std::string lit = tok.word.literal();
    if (auto a = (leading || declaration) ? assignment(tok.word) : std::nullopt) {
      ++k_;
      if (a->value.parts.empty() && k_ < t_.size() && t_[k_].kind == K::lparen) {  // NAME=( elements )
        std::vector<ShellPiece> elements;
        for (++k_; k_ < t_.size() && t_[k_].kind != K::rparen; ++k_)
          if (t_[k_].kind == K::word && active())
            for (ShellPiece& p : out_.env.words(t_[k_].word)) elements.push_back(std::move(p));
        if (k_ >= t_.size()) error("array " + a->name + "=( has no closing ')'", line);
        ++k_;
        if (active()) out_.env.assign(a->name, std::move(elements), true, a->append);
      } else if (active()) {
        out_.env.assign(a->name, {out_.env.value(a->value)}, false, a->append);
      }
      continue;
    }
    ++k_;
    if (leading && (lit == "export" || lit == "declare" || lit == "local" || lit == "readonly" || lit == "typeset")) {
      declaration = true;
      continue;
    }
    if (declaration) continue;  // an option (-x) or a bare name
    leading = false;
    words.push_back(&tok.word);
  }
  if (active() && !words.empty()) run_words(words, line);
}

LaunchCommand Runner::run() {
  out_.file = file_;
  static const char* const kKeywords[] = {"if", "elif", "else", "fi",   "then", "for", "while",    "until", "select",
                                          "do", "done", "case", "esac", "{",    "}",   "function", "!",     "time"};
  while (k_ < t_.size()) {
    if (t_[k_].kind != K::word) {
      k_ += t_[k_].kind == K::redirect && t_[k_].redirect_has_target ? 2 : 1;
      continue;
    }
    const std::string w = t_[k_].word.literal();
    bool is_keyword = false;
    for (const char* kw : kKeywords) is_keyword = is_keyword || w == kw;
    if (is_keyword)
      keyword(w);
    else
      command();
  }
  if (!branches_.empty()) error("an `if` without its `fi`", t_.empty() ? 0 : t_.back().line);
  if (!found_) {
    std::string why;
    for (const std::string& n : out_.notes) why += "; " + n;
    error("no command runs a training script (pretrain_gpt.py or another pretrain_*.py)" + why, 0);
  }
  return std::move(out_);
}

}  // namespace

LaunchCommand parse_launch_script(const std::string& text, const std::string& file) {
  Runner r(lex_shell(text, file), file);
  return r.run();
}

LaunchCommand read_launch_script(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::error_code ec;
  if (!f || std::filesystem::is_directory(path, ec))
    throw ConfigError(SourceLoc{path.string(), 0, 0}, "--file", path.string(), "cannot read the launch script",
                      "a readable bash script");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_launch_script(ss.str(), path.string());
}

}  // namespace paralab::interop
