// paralab — Megatron's moe_layer_freq, an integer or a list pattern (ir/moe_config.hpp).
#include "ir/moe_config.hpp"

#include <cctype>

namespace paralab {

namespace {
constexpr const char* kAllowed =
    "an integer N >= 1 (every N-th layer) or a pattern of num_layers 0/1 entries such as \"([0]*3+[1]*58)\"";

// A cursor over the pattern that skips spaces.
struct Cursor {
  const std::string& t;
  size_t i = 0;
  void skip() {
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
  }
  bool eat(char c) {
    skip();
    if (i < t.size() && t[i] == c) return ++i, true;
    return false;
  }
  bool number(int64_t& out) {
    skip();
    const size_t start = i;
    out = 0;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) && i - start < 9) out = out * 10 + (t[i++] - '0');
    return i > start && (i >= t.size() || !std::isdigit(static_cast<unsigned char>(t[i])));
  }
};
}  // namespace

std::vector<bool> parse_moe_layer_freq(const std::string& text, int64_t num_layers, const SourceLoc& where,
                                       const std::string& key) {
  auto bad = [&](const std::string& why) -> std::vector<bool> { throw ConfigError(where, key, text, why, kAllowed); };
  Cursor c{text};
  int64_t n = 0;
  std::vector<bool> layers;
  if (c.number(n)) {  // an integer: every n-th layer, Megatron's [i % n == 0 for i in range(L)]
    c.skip();
    if (c.i != text.size()) return bad("is not an integer");
    if (n < 1) return bad("must be at least 1");
    for (int64_t l = 0; l < num_layers; ++l) layers.push_back(l % n == 0);
    return layers;
  }
  c.i = 0;
  const bool paren = c.eat('(');
  do {
    if (!c.eat('[')) return bad("expected '[' starting a list");
    std::vector<bool> term;
    do {
      int64_t v = 0;
      if (!c.number(v) || v > 1) return bad("list entries must be 0 or 1");
      term.push_back(v == 1);
    } while (c.eat(','));
    if (!c.eat(']')) return bad("expected ']' closing a list");
    int64_t times = 1;
    if (c.eat('*') && (!c.number(times) || times < 1)) return bad("a list repeats a positive number of times");
    if (static_cast<int64_t>(layers.size() + term.size() * static_cast<size_t>(times)) > num_layers)
      return bad("has more entries than num_layers (" + std::to_string(num_layers) + ")");
    for (int64_t r = 0; r < times; ++r) layers.insert(layers.end(), term.begin(), term.end());
  } while (c.eat('+'));
  if (paren && !c.eat(')')) return bad("expected ')'");
  c.skip();
  if (c.i != text.size()) return bad("has text after the pattern");
  if (static_cast<int64_t>(layers.size()) != num_layers)
    return bad("has " + std::to_string(layers.size()) + " entries for " + std::to_string(num_layers) + " layers");
  return layers;
}

}  // namespace paralab
