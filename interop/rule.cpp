// paralab interop — applying one conversion rule to one input item.
#include "interop/rule.hpp"

#include "ir/field_table.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace paralab::interop {

namespace {

// `list` split at `sep`.
std::vector<std::string> split(const std::string& list, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(sep, start), list.size());
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

void require_resolved(const SourceItem& item) {
  if (!item.unresolved.empty())
    fail(item, "the value is only known when the script runs: " + item.unresolved,
         "a literal value (or pass the argument on the command line after the script's)");
}

// A value that turns the feature off ("false", "null", "1" for a size of one), per `off`.
bool is_off(const SourceItem& item, const char* off) {
  const std::string v = item.null ? "null" : item.sequence && item.values.empty() ? "[]" : lowercase(item.value());
  for (const std::string& o : split(off, '|'))
    if (v == o) return true;
  return false;
}

void apply_choice(ScenarioDraft& draft, const Rule& rule, const SourceItem& item) {
  const std::string v = item_word(item);
  std::string names;
  for (const std::string& pair : split(rule.arg, ',')) {
    const size_t eq = pair.find('=');
    const std::string from = pair.substr(0, eq), to = pair.substr(eq + 1);
    if (v == from || lowercase(v) == lowercase(from)) {
      draft.set_from(rule.key, toml_value(to), item);
      return;
    }
    names += (names.empty() ? "" : " | ") + from;
  }
  fail(item, "a value paralab cannot model", names);
}

}  // namespace

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

const Rule* find_rule(std::span<const Rule> table, const std::string& name) {
  const Rule* best = nullptr;
  size_t best_len = 0;
  for (const Rule& r : table) {
    const std::string src = r.source;
    if (src == name) return &r;
    if (!src.empty() && src.back() == '*') {
      const size_t n = src.size() - 1;
      if (name.compare(0, n, src, 0, n) == 0 && n > best_len) best = &r, best_len = n;
    }
  }
  return best;
}

std::string item_word(const SourceItem& item) {
  require_resolved(item);
  if (item.values.size() != 1 || item.sequence)
    fail(item, item.values.empty() ? "needs a value" : "takes one value", "one value");
  return item.values[0];
}

int64_t item_integer(const SourceItem& item, int64_t min) {
  const std::string v = item_word(item);
  int64_t i = 0;
  const char* end = v.data() + v.size();
  auto r = std::from_chars(v.data(), end, i);
  if (r.ec != std::errc() || r.ptr != end) {
    double d = 0;  // "4096.0", "1e3"
    auto rd = std::from_chars(v.data(), end, d);
    if (rd.ec != std::errc() || rd.ptr != end || std::floor(d) != d || std::abs(d) > 9e15)
      fail(item, "expected an integer", "an integer >= " + std::to_string(min));
    i = static_cast<int64_t>(d);
  }
  if (i < min) fail(item, "out of range", "an integer >= " + std::to_string(min));
  return i;
}

double item_real(const SourceItem& item) {
  const std::string v = item_word(item);
  double d = 0;
  const char* begin = v.data() + (!v.empty() && v[0] == '+');
  auto r = std::from_chars(begin, v.data() + v.size(), d);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || !std::isfinite(d))
    fail(item, "expected a number", "a number");
  return d;
}

bool item_bool(const SourceItem& item) {
  const std::string v = lowercase(item_word(item));
  if (v == "true" || v == "yes" || v == "on" || v == "1") return true;
  if (v == "false" || v == "no" || v == "off" || v == "0") return false;
  fail(item, "expected a boolean", "true | false");
}

void apply_rule(ScenarioDraft& draft, const Rule* rule, const SourceItem& item) {
  if (!rule) {
    draft.skip(item, SkipKind::unknown, item.is_flag() ? "not an argument paralab knows" : "not a key paralab knows");
    return;
  }
  const bool valued = rule->conv != Conv::set && rule->conv != Conv::fact && rule->conv != Conv::ignore &&
                      rule->conv != Conv::unsupported;
  if (valued && item.null) return;  // YAML null: unset, paralab's default (as the tool's) applies
  switch (rule->conv) {
    case Conv::integer:
      draft.set_from(rule->key, std::to_string(item_integer(item, 0)), item);
      return;
    case Conv::real:
      draft.set_from(rule->key, toml_number(item_real(item)), item);
      return;
    case Conv::text:
      draft.set_from(rule->key, toml_string(item_word(item)), item);
      return;
    case Conv::boolean:
      draft.set_from(rule->key, item_bool(item) ? "true" : "false", item);
      return;
    case Conv::negated:
      draft.set_from(rule->key, item_bool(item) ? "false" : "true", item);
      return;
    case Conv::choice:
      apply_choice(draft, *rule, item);
      return;
    case Conv::fact:
      draft.keep(rule->key, item);
      return;
    case Conv::ignore:
      draft.skip(item, SkipKind::ignored, rule->arg);
      return;
    case Conv::set:
      if (item.is_flag()) {
        if (!item.values.empty()) fail(item, "takes no value", rule->source);
        draft.set_from(rule->key, rule->arg, item);
      } else if (!item.null && item_bool(item)) {
        draft.set_from(rule->key, rule->arg, item);
      }
      return;
    case Conv::unsupported:
      if (*rule->off && is_off(item, rule->off))
        draft.skip(item, SkipKind::ignored, "off here, as paralab models it");
      else
        draft.skip(item, SkipKind::unsupported, rule->arg);
      return;
  }
}

}  // namespace paralab::interop
