// paralab interop — YAML (through yaml-cpp) flattened to items, OmegaConf interpolations resolved.
#include "interop/yaml_config.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

#include "ir/field_table.hpp"

namespace paralab::interop {

namespace {

struct Resolved {
  std::string text;
  bool null = false;
  std::string why;  // non-empty: not resolved
};

class Flattener {
 public:
  explicit Flattener(std::string file) : file_(std::move(file)) {}
  void walk(const YAML::Node& n, const std::string& key, int line);
  std::vector<SourceItem> items();

 private:
  Resolved resolve(const std::string& s, const std::string& key, int depth) const;
  Resolved evaluate(const std::string& inner, const std::string& key, int depth) const;
  std::string file_;
  std::vector<SourceItem> items_;
  std::map<std::string, size_t> index_;  // key -> items_ position
};

void Flattener::walk(const YAML::Node& n, const std::string& key, int line) {
  if (n.IsMap() && n.size() > 0) {
    for (auto it = n.begin(); it != n.end(); ++it)
      walk(it->second, key.empty() ? it->first.Scalar() : key + "." + it->first.Scalar(), it->first.Mark().line + 1);
    return;
  }
  SourceItem item;
  item.name = key;
  item.loc = SourceLoc{file_, line, 0};
  if (n.IsSequence()) {
    item.sequence = true;
    for (const YAML::Node& e : n) {
      if (e.IsScalar()) {
        item.values.push_back(e.Scalar());
      } else {
        YAML::Emitter out;
        out << YAML::Flow << e;
        item.values.push_back(out.c_str());
      }
    }
  } else if (n.IsScalar()) {
    item.values.push_back(n.Scalar());
  } else if (n.IsNull()) {
    item.null = true;
  }
  index_[key] = items_.size();
  items_.push_back(std::move(item));
}

std::optional<double> number(const std::string& s, bool& integral) {
  int64_t i = 0;
  if (auto r = std::from_chars(s.data(), s.data() + s.size(), i); r.ec == std::errc() && r.ptr == s.data() + s.size())
    return static_cast<double>(i);
  double d = 0;
  integral = false;
  if (auto r = std::from_chars(s.data(), s.data() + s.size(), d); r.ec == std::errc() && r.ptr == s.data() + s.size())
    return d;
  return std::nullopt;
}

// `inner` of one ${...}: a key reference or a multiply/sum resolver.
Resolved Flattener::evaluate(const std::string& inner, const std::string& key, int depth) const {
  const std::string shown = "${" + inner + "}";
  const size_t colon = inner.find(':');
  const std::string fn = colon == std::string::npos ? "" : inner.substr(0, colon);
  if (fn == "multiply" || fn == "sum") {
    std::vector<std::string> args;
    int nest = 0;
    std::string cur;
    for (char c : inner.substr(colon + 1)) {
      nest += c == '{' ? 1 : c == '}' ? -1 : 0;
      if (c == ',' && nest == 0)
        args.push_back(cur), cur.clear();
      else
        cur += c;
    }
    args.push_back(cur);
    double acc = fn == "multiply" ? 1 : 0;
    bool integral = true;
    for (std::string a : args) {
      a.erase(0, a.find_first_not_of(' '));
      a.erase(a.find_last_not_of(' ') + 1);
      const Resolved r = resolve(a, key, depth + 1);
      if (!r.why.empty()) return r;
      const auto x = number(r.text, integral);
      if (!x) return {shown, false, shown + ": '" + r.text + "' is not a number"};
      acc = fn == "multiply" ? acc * *x : acc + *x;
    }
    return {integral ? std::to_string(static_cast<int64_t>(acc)) : toml_number(acc), false, ""};
  }
  if (!fn.empty()) return {shown, false, "the OmegaConf resolver " + shown + " is not evaluated by paralab"};
  std::string path = inner;
  if (!path.empty() && path[0] == '.') {  // relative: '.' is this key's mapping, each further '.' one up
    std::string base = key.substr(0, key.rfind('.') == std::string::npos ? 0 : key.rfind('.'));
    size_t dots = 0;
    while (dots < path.size() && path[dots] == '.') ++dots;
    for (size_t k = 1; k < dots; ++k) base = base.substr(0, base.rfind('.') == std::string::npos ? 0 : base.rfind('.'));
    path = (base.empty() ? "" : base + ".") + path.substr(dots);
  }
  auto it = index_.find(path);
  if (it == index_.end() && path.rfind("training.", 0) == 0) it = index_.find(path.substr(9));  // the launcher's prefix
  if (it == index_.end())
    return {shown, false,
            shown + " names no key of this file (it is set elsewhere: a Hydra default or the command line)"};
  const SourceItem& target = items_[it->second];
  if (target.null) return {"", true, ""};
  if (target.sequence || target.values.size() != 1) return {shown, false, shown + " is not a single value"};
  if (depth > 16) return {shown, false, shown + " refers to itself"};
  return resolve(target.values[0], target.name, depth + 1);
}

Resolved Flattener::resolve(const std::string& s, const std::string& key, int depth) const {
  if (s == "???") return {s, false, "??? is OmegaConf's mandatory value, left for NeMo's command line"};
  Resolved out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t open = s.find("${", i);
    if (open == std::string::npos) {
      out.text += s.substr(i);
      break;
    }
    out.text += s.substr(i, open - i);
    int nest = 0;
    size_t close = open;
    for (; close < s.size(); ++close) {
      if (s.compare(close, 2, "${") == 0)
        ++nest;
      else if (s[close] == '}' && --nest == 0)
        break;
    }
    if (close >= s.size()) return {s, false, "an unterminated ${ interpolation"};
    const Resolved r = evaluate(s.substr(open + 2, close - open - 2), key, depth);
    if (!r.why.empty()) return {s, false, r.why};
    if (r.null && open == 0 && close + 1 == s.size()) return r;
    out.text += r.text;
    i = close + 1;
  }
  return out;
}

std::vector<SourceItem> Flattener::items() {
  std::vector<SourceItem> out = items_;
  for (SourceItem& item : out) {
    if (item.null || item.values.empty()) continue;
    for (std::string& v : item.values) {
      if (v.find("${") == std::string::npos && v != "???") continue;
      const Resolved r = resolve(v, item.name, 0);
      if (!r.why.empty())
        item.unresolved = r.why;
      else if (r.null && !item.sequence)
        item.null = true, item.values.clear();
      else
        v = r.text;
      if (item.values.empty()) break;
    }
  }
  return out;
}

}  // namespace

std::vector<SourceItem> parse_yaml_items(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(SourceLoc{file, e.mark.line + 1, e.mark.column + 1}, "", "", "YAML syntax error: " + e.msg,
                      "a YAML file (NeMo 1.x or NeMo-Framework-Launcher training configuration)");
  }
  if (!root.IsMap())
    throw ConfigError(SourceLoc{file, 1, 0}, "", "", "not a YAML mapping of keys",
                      "a NeMo training configuration (trainer:, model:, ...)");
  Flattener f(file);
  f.walk(root, "", 1);
  return f.items();
}

std::vector<SourceItem> read_yaml_items(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(path, ec))
    throw ConfigError(SourceLoc{path.string(), 0, 0}, "", path.string(), "cannot read the file",
                      "a readable YAML file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_yaml_items(ss.str(), path.string());
}

}  // namespace paralab::interop
