// paralab — a declarative schema that turns raw "section.key" values into typed struct fields,
// refusing unknown keys, wrong types and out-of-range values with a ConfigError that names the
// file, line, key, the bad value and what is allowed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/enum_names.hpp"
#include "ir/raw_config.hpp"

namespace paralab {

// Typed reads of one raw value; each throws ConfigError naming `key` and `v.loc`.
int64_t read_int(const RawValue& v, const std::string& key, int64_t min, int64_t max);
double read_double(const RawValue& v, const std::string& key, double min, double max,
                   bool min_exclusive = false);
bool read_bool(const RawValue& v, const std::string& key);
std::string read_string(const RawValue& v, const std::string& key);

template <class E>
E read_enum(const RawValue& v, const std::string& key) {
  if (v.type != RawValue::Type::string)
    throw ConfigError(v.loc, key, v.text, "expected a string, got " + std::string(v.type_name()),
                      enum_choices<E>());
  if (auto e = enum_from_string<E>(v.s)) return *e;
  throw ConfigError(v.loc, key, v.text, "unknown value", enum_choices<E>());
}

// A schema for target struct T: a list of keys with their setters.
template <class T>
class Schema {
 public:
  using Setter = std::function<void(T&, const RawValue&, const std::string& key)>;

  Schema& field(std::string key, Setter set) {
    fields_.push_back({std::move(key), std::move(set)});
    return *this;
  }
  template <class M>
  Schema& integer(std::string key, M member, int64_t min, int64_t max) {
    return field(std::move(key), [member, min, max](T& t, const RawValue& v, const std::string& k) {
      member(t) = read_int(v, k, min, max);
    });
  }
  template <class M>
  Schema& real(std::string key, M member, double min, double max, bool min_exclusive = false) {
    return field(std::move(key), [=](T& t, const RawValue& v, const std::string& k) {
      member(t) = read_double(v, k, min, max, min_exclusive);
    });
  }
  template <class M>
  Schema& boolean(std::string key, M member) {
    return field(std::move(key),
                 [member](T& t, const RawValue& v, const std::string& k) { member(t) = read_bool(v, k); });
  }
  template <class M>
  Schema& text(std::string key, M member) {
    return field(std::move(key), [member](T& t, const RawValue& v, const std::string& k) {
      member(t) = read_string(v, k);
    });
  }
  template <class E, class M>
  Schema& choice(std::string key, M member) {
    return field(std::move(key), [member](T& t, const RawValue& v, const std::string& k) {
      member(t) = read_enum<E>(v, k);
    });
  }

  [[nodiscard]] bool has(const std::string& key) const { return find(key) != nullptr; }

  // Applies one value; unknown keys are refused with the list of keys of that section.
  void apply(T& target, const std::string& key, const RawValue& v) const {
    if (const auto* f = find(key)) {
      f->set(target, v, key);
      return;
    }
    throw ConfigError(v.loc, key, v.text, "unknown key", allowed_near(key));
  }

  // "model.num_layers, model.hidden_size, ..." for the section of `key` (or all sections).
  [[nodiscard]] std::string allowed_near(const std::string& key) const {
    const auto dot = key.find('.');
    const std::string section = dot == std::string::npos ? "" : key.substr(0, dot + 1);
    std::string out;
    for (const auto& f : fields_) {
      const bool same = section.empty() ? f.key.find('.') == std::string::npos
                                        : f.key.compare(0, section.size(), section) == 0;
      if (!same) continue;
      if (!out.empty()) out += ", ";
      out += f.key;
    }
    if (out.empty()) out = "sections " + sections();
    return out;
  }

  [[nodiscard]] std::string sections() const {
    std::vector<std::string> seen;
    for (const auto& f : fields_) {
      const auto dot = f.key.find('.');
      std::string s = dot == std::string::npos ? "" : "[" + f.key.substr(0, dot) + "]";
      bool dup = s.empty();
      for (const auto& x : seen) dup = dup || x == s;
      if (!dup) seen.push_back(s);
    }
    std::string out;
    for (const auto& s : seen) out += (out.empty() ? "" : ", ") + s;
    return out;
  }

 private:
  struct Field {
    std::string key;
    Setter set;
  };
  const Field* find(const std::string& key) const {
    for (const auto& f : fields_)
      if (f.key == key) return &f;
    return nullptr;
  }
  std::vector<Field> fields_;
};

}  // namespace paralab
