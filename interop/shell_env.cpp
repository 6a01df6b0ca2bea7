// paralab interop — bash variable expansion and arithmetic for launch scripts.
#include "interop/shell_env.hpp"

#include <cctype>
#include <charconv>

namespace paralab::interop {

std::string ShellPiece::str() const {
  std::string out;
  for (const ShellChar& c : text) out += c.c;
  return out;
}

namespace {

void append(ShellText& to, const std::string& s, int line, bool split, int why = -1) {
  for (char c : s) to.push_back({c, line, split, why});
}

void append(ShellText& to, const ShellText& from, bool split) {
  for (ShellChar c : from) to.push_back({c.c, c.line, split || c.split, c.why});
}

std::string why_unset(const std::string& name) {
  if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0])))
    return "$" + name + " is an argument given to the script";
  if (name == "@" || name == "*" || name == "#") return "$" + name + " depends on the script's arguments";
  return name + " is not set in the script (it would come from the caller's environment)";
}

// A tiny integer expression parser: + - * / % ( ) and unary minus over numbers and names.
class Arith {
 public:
  Arith(const std::string& s, const std::map<std::string, std::optional<int64_t>>& names) : s_(s), names_(names) {}
  std::optional<int64_t> run() {
    auto v = sum();
    skip();
    if (!ok_ || i_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  int64_t sum() {
    int64_t v = product();
    while (ok_)
      if (eat('+'))
        v += product();
      else if (eat('-'))
        v -= product();
      else
        break;
    return v;
  }
  int64_t product() {
    int64_t v = factor();
    while (ok_) {
      const bool mul = eat('*'), div = !mul && eat('/'), mod = !mul && !div && eat('%');
      if (!mul && !div && !mod) break;
      const int64_t r = factor();
      if ((div || mod) && r == 0) return ok_ = false, 0;
      v = mul ? v * r : div ? v / r : v % r;
    }
    return v;
  }
  int64_t factor() {
    if (eat('-')) return -factor();
    if (eat('+')) return factor();
    if (eat('(')) {
      const int64_t v = sum();
      if (!eat(')')) ok_ = false;
      return v;
    }
    skip();
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '$')) ++i_;
    std::string tok = s_.substr(start, i_ - start);
    if (tok.empty()) return ok_ = false, 0;
    int64_t v = 0;
    if (std::isdigit(static_cast<unsigned char>(tok[0]))) {
      auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (r.ec != std::errc() || r.ptr != tok.data() + tok.size()) ok_ = false;
      return v;
    }
    if (tok[0] == '$') tok.erase(0, 1);
    auto it = names_.find(tok);
    if (it == names_.end()) return 0;  // unset names are 0 in bash arithmetic
    if (!it->second) ok_ = false;
    return it->second.value_or(0);
  }
  const std::string& s_;
  const std::map<std::string, std::optional<int64_t>>& names_;
  size_t i_ = 0;
  bool ok_ = true;
};

}  // namespace

void ShellEnv::assign(const std::string& name, std::vector<ShellPiece> elements, bool array, bool append_to) {
  Var& v = vars_[name];
  if (!append_to) v.elements.clear();
  if (append_to && !array && !v.elements.empty()) {  // NAME+=text: string concatenation
    for (const ShellPiece& e : elements) append(v.elements[0].text, e.text, false);
    return;
  }
  for (ShellPiece& e : elements) v.elements.push_back(std::move(e));
  v.array = v.array || array;
}

std::optional<ShellPiece> ShellEnv::scalar(const std::string& name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  if (it->second.elements.empty()) return ShellPiece{};
  return it->second.elements[0];
}

std::optional<int64_t> ShellEnv::arithmetic(const std::string& expr) const {
  std::map<std::string, std::optional<int64_t>> names;
  for (const auto& [name, v] : vars_) {
    const ShellPiece p = v.elements.empty() ? ShellPiece{} : v.elements[0];
    const std::string s = p.str();
    int64_t x = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), x);
    names[name] = unresolved(p.text).empty() && r.ec == std::errc() && r.ptr == s.data() + s.size()
                      ? std::optional<int64_t>(x)
                      : std::nullopt;
  }
  // ${NAME} inside the expression reads as NAME.
  std::string plain;
  for (char c : expr)
    if (c != '{' && c != '}') plain += c;
  return Arith(plain, names).run();
}

void ShellEnv::expand_variable(const WordPart& p, std::vector<Segment>& segs, Mode mode, bool whole,
                               std::vector<std::string>* vanished) const {
  const auto it = vars_.find(p.name);
  const Var* v = it == vars_.end() ? nullptr : &it->second;
  const bool all = p.index == "@" || p.index == "*";
  size_t idx = 0;
  if (!all && !p.index.empty()) std::from_chars(p.index.data(), p.index.data() + p.index.size(), idx);
  const bool set = v && (all ? !v->elements.empty() : idx < v->elements.size());
  const bool empty = !set || (!all && v->elements[idx].text.empty());
  Segment& seg = segs.back();
  if (p.op == "#") {
    const size_t n = !set ? 0 : all ? v->elements.size() : v->elements[idx].text.size();
    append(seg.text, std::to_string(n), p.line, false);
    return;
  }
  if (p.op == "edit") {
    append(seg.text, "${" + p.name + "...}", p.line, false,
           reason_id("${" + p.name + "...} edits a value (not evaluated here)"));
    return;
  }
  const bool colon = !p.op.empty() && p.op[0] == ':';
  const bool missing = colon ? empty : !set;
  const bool use_alt = ((p.op == ":-" || p.op == "-" || p.op == ":=" || p.op == "=") && missing) ||
                       ((p.op == ":+" || p.op == "+") && !missing);
  if (use_alt) {
    for (WordPart a : p.alt) {
      a.quoted = a.quoted || p.quoted;
      expand(a, segs, mode, false, vanished);
    }
    return;
  }
  if (p.op == ":+" || p.op == "+") return;
  if (!set) {
    if (mode == Mode::test) return;
    if (mode == Mode::command && whole && !p.quoted) {
      if (vanished) vanished->push_back(p.name);
      return;
    }
    append(seg.text, "$" + p.name, p.line, false, reason_id(why_unset(p.name)));
    return;
  }
  if (p.quoted) seg.keep = true;
  const size_t first = all ? 0 : idx, last = all ? v->elements.size() : idx + 1;
  for (size_t k = first; k < last; ++k) {
    if (k > first) {
      // Each element is a word of its own in a command ("${A[@]}", or split anyway when unquoted).
      if (mode == Mode::command && (!p.quoted || p.index == "@"))
        segs.push_back(Segment{{}, p.quoted});
      else
        append(segs.back().text, " ", p.line, false);
    }
    append(segs.back().text, v->elements[k].text, !p.quoted);
  }
}

void ShellEnv::expand(const WordPart& p, std::vector<Segment>& segs, Mode mode, bool whole,
                      std::vector<std::string>* vanished) const {
  using K = WordPart::Kind;
  Segment& seg = segs.back();
  switch (p.kind) {
    case K::literal:
      append(seg.text, p.text, false);
      if (p.quoted) seg.keep = true;
      return;
    case K::command:
      append(seg.text, p.name, p.line, false,
             reason_id("the command substitution " + p.name + " runs when the script runs"));
      return;
    case K::arithmetic:
      if (auto x = arithmetic(p.name)) {
        append(seg.text, std::to_string(*x), p.line, false);
      } else {
        append(seg.text, "$((" + p.name + "))", p.line, false,
               reason_id("the arithmetic $((" + p.name + ")) uses values not known here"));
      }
      return;
    case K::variable:
      expand_variable(p, segs, mode, whole, vanished);
      return;
  }
}

std::vector<ShellEnv::Segment> ShellEnv::segments(const ShellWord& w, Mode mode,
                                                  std::vector<std::string>* vanished) const {
  std::vector<Segment> segs(1);
  for (const WordPart& p : w.parts) expand(p, segs, mode, w.parts.size() == 1, vanished);
  return segs;
}

std::vector<ShellPiece> ShellEnv::words(const ShellWord& w, std::vector<std::string>* vanished) const {
  std::vector<ShellPiece> out;
  auto emit = [&](ShellText& t) {
    out.push_back(ShellPiece{t, unresolved(t)});
    t.clear();
  };
  for (const Segment& seg : segments(w, Mode::command, vanished)) {
    const size_t before = out.size();
    ShellText cur;
    for (const ShellChar& c : seg.text) {
      if (!(c.split && std::isspace(static_cast<unsigned char>(c.c))))
        cur.push_back(c);
      else if (!cur.empty())
        emit(cur);
    }
    if (!cur.empty() || (out.size() == before && seg.keep)) emit(cur);
  }
  return out;
}

ShellPiece ShellEnv::joined(const ShellWord& w, bool test) const {
  ShellText text;
  for (const Segment& seg : segments(w, test ? Mode::test : Mode::assignment, nullptr))
    for (ShellChar c : seg.text) text.push_back({c.c, c.line, false, c.why});
  return ShellPiece{text, unresolved(text)};
}

int ShellEnv::reason_id(const std::string& why) const {
  for (size_t i = 0; i < reasons_.size(); ++i)
    if (reasons_[i] == why) return static_cast<int>(i);
  reasons_.push_back(why);
  return static_cast<int>(reasons_.size()) - 1;
}

std::string ShellEnv::unresolved(const ShellText& t) const {
  for (const ShellChar& c : t)
    if (c.why >= 0) return reasons_[static_cast<size_t>(c.why)];
  return "";
}

}  // namespace paralab::interop
