// paralab — typed reads of raw configuration values, with errors that say what is allowed.
#include "ir/schema.hpp"

#include <charconv>
#include <cmath>
#include <sstream>

#include "ir/field_table.hpp"

namespace paralab {

namespace {
std::string num(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}
}  // namespace

int64_t read_int(const RawValue& v, const std::string& key, int64_t min, int64_t max) {
  const std::string allowed = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  if (v.type == RawValue::Type::floating && std::floor(v.f) == v.f && std::abs(v.f) < 9e15) {
    const auto i = static_cast<int64_t>(v.f);
    if (i < min || i > max) throw ConfigError(v.loc, key, v.text, "out of range", allowed);
    return i;
  }
  if (v.type != RawValue::Type::integer)
    throw ConfigError(v.loc, key, v.text, "expected an integer, got " + std::string(v.type_name()),
                      allowed);
  if (v.i < min || v.i > max)
    throw ConfigError(v.loc, key, v.text,
                      v.i <= 0 && min > 0 ? "must be positive" : "out of range", allowed);
  return v.i;
}

double read_double(const RawValue& v, const std::string& key, double min, double max,
                   bool min_exclusive) {
  const std::string allowed =
      "a number " + std::string(min_exclusive ? "> " : ">= ") + num(min) + " and <= " + num(max);
  if (v.type != RawValue::Type::integer && v.type != RawValue::Type::floating)
    throw ConfigError(v.loc, key, v.text, "expected a number, got " + std::string(v.type_name()),
                      allowed);
  const double x = v.f;
  if (!std::isfinite(x) || x < min || x > max || (min_exclusive && x == min))
    throw ConfigError(v.loc, key, v.text, "out of range", allowed);
  return x;
}

bool read_bool(const RawValue& v, const std::string& key) {
  if (v.type == RawValue::Type::boolean) return v.b;
  // `--set a.b=true` arrives typed; accept the bare words too for hand-written overrides.
  if (v.type == RawValue::Type::string && (v.s == "true" || v.s == "false")) return v.s == "true";
  throw ConfigError(v.loc, key, v.text, "expected a boolean, got " + std::string(v.type_name()),
                    "true | false");
}

std::string read_string(const RawValue& v, const std::string& key) {
  if (v.type != RawValue::Type::string)
    throw ConfigError(v.loc, key, v.text, "expected a string, got " + std::string(v.type_name()),
                      "a quoted string");
  return v.s;
}

std::string toml_number(double v) {
  if (!std::isfinite(v)) return v != v ? "nan" : v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace paralab
