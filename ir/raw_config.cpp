// paralab — TOML++ behind a flat, line-tracking view of a configuration file.
#include "ir/raw_config.hpp"

#include <fstream>
#include <sstream>

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

namespace paralab {

std::string_view RawValue::type_name() const {
  switch (type) {
    case Type::integer: return "integer";
    case Type::floating: return "float";
    case Type::boolean: return "boolean";
    case Type::string: return "string";
    case Type::other: return "table or array";
  }
  return "?";
}

namespace {

SourceLoc loc_of(const toml::source_region& src, const std::string& file) {
  return SourceLoc{file, static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)};
}

RawValue to_raw(const toml::node& node, const std::string& file) {
  RawValue v;
  v.loc = loc_of(node.source(), file);
  if (auto x = node.as_integer()) {
    v.type = RawValue::Type::integer;
    v.i = x->get();
    v.f = static_cast<double>(v.i);
    v.text = std::to_string(v.i);
  } else if (auto y = node.as_floating_point()) {
    v.type = RawValue::Type::floating;
    v.f = y->get();
    std::ostringstream os;
    os << v.f;
    v.text = os.str();
  } else if (auto z = node.as_boolean()) {
    v.type = RawValue::Type::boolean;
    v.b = z->get();
    v.text = v.b ? "true" : "false";
  } else if (auto w = node.as_string()) {
    v.type = RawValue::Type::string;
    v.s = w->get();
    v.text = "\"" + v.s + "\"";
  } else {
    v.type = RawValue::Type::other;
    std::ostringstream os;
    if (node.is_array()) os << *node.as_array();
    else if (node.is_table()) os << *node.as_table();
    v.text = os.str();
  }
  return v;
}

void flatten_table(const toml::table& tbl, const std::string& prefix, const std::string& file,
                   RawFile& out) {
  for (auto&& [key, node] : tbl) {
    const std::string name = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const auto* sub = node.as_table()) {
      if (!prefix.empty())
        throw ConfigError(loc_of(node.source(), file), name, "", "tables nest at most one level",
                          "[section] tables with key = value entries");
      out.sections[name] = loc_of(node.source(), file);
      flatten_table(*sub, name, file, out);
    } else if (const auto* arr = node.as_array(); arr && arr->is_array_of_tables() && !arr->empty()) {
      RawArray entries;
      for (const auto& el : *arr) {
        RawTable entry;
        for (auto&& [k2, n2] : *el.as_table()) entry[std::string(k2.str())] = to_raw(n2, file);
        entries.push_back(std::move(entry));
      }
      out.arrays[name] = std::move(entries);
    } else {
      out.values[name] = to_raw(node, file);
    }
  }
}

}  // namespace

RawFile read_toml_file(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(SourceLoc{file, 0, 0}, "", "", "cannot open file (missing or unreadable)",
                      "an existing, readable TOML file");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  toml::table tbl;
  try {
    tbl = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    throw ConfigError(loc_of(e.source(), file), "", "",
                      "TOML syntax error: " + std::string(e.description()), "valid TOML (toml.io)");
  }
  RawFile out;
  out.file = file;
  flatten_table(tbl, "", file, out);
  return out;
}

std::pair<std::string, RawValue> parse_override(const std::string& assignment) {
  const SourceLoc loc{"--set " + assignment, 0, 0};
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(loc, assignment, "", "an override must look like section.key=value",
                      "--set section.key=value, e.g. --set parallel.tensor=4");
  std::string key = assignment.substr(0, eq);
  std::string value = assignment.substr(eq + 1);
  while (!key.empty() && key.back() == ' ') key.pop_back();
  while (!value.empty() && value.front() == ' ') value.erase(value.begin());
  RawValue v;
  try {
    const toml::table t = toml::parse("v = " + value);
    v = to_raw(*t.get("v"), loc.file);
  } catch (const toml::parse_error&) {
    v.type = RawValue::Type::string;
    v.s = value;
    v.text = value;
  }
  v.loc = loc;
  return {key, v};
}

}  // namespace paralab
