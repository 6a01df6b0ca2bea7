// paralab — one field table per file format, serving both reading and writing: each field is a
// key, the member it fills, its range, its unit and a line of documentation. Reading refuses
// unknown keys, wrong types and out-of-range values with a ConfigError naming file, line, key,
// value and what is allowed; writing emits `key = value  # doc` lines, section by section, so
// a written file reads back to the same values.
//
//   FieldTable<Row> t;
//   t.real("fixed_us", [](auto& r) -> auto& { return r.fixed_us; }, -1e9, 1e9, "us", "fixed cost");
//   t.read(row, raw_table, "calibration.correction.", where);   // or apply() one value
//   std::string toml = t.write(row);
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/enum_names.hpp"
#include "ir/raw_config.hpp"
#include "ir/schema.hpp"

namespace paralab {

// The shortest text that reads back to exactly `v` (std::to_chars), as TOML accepts it.
std::string toml_number(double v);
std::string toml_string(const std::string& s);

template <class T>
class FieldTable {
 public:
  struct Field {
    std::string key, unit, doc;
    bool required = false;
    bool omit_default = false;  // not written when it holds the default-constructed T's value
    std::function<void(T&, const RawValue&, const std::string&)> read;
    std::function<std::optional<std::string>(const T&)> write;  // nullopt: left out (an unset optional)
  };

  template <class A>
  FieldTable& integer(std::string key, A at, int64_t min, int64_t max, std::string unit, std::string doc) {
    return add(std::move(key), std::move(unit), std::move(doc),
               [=](T& t, const RawValue& v, const std::string& k) { at(t) = read_int(v, k, min, max); },
               [=](const T& t) -> std::optional<std::string> { return std::to_string(at(t)); });
  }
  template <class A>
  FieldTable& real(std::string key, A at, double min, double max, std::string unit, std::string doc,
                   bool min_exclusive = false) {
    return add(std::move(key), std::move(unit), std::move(doc),
               [=](T& t, const RawValue& v, const std::string& k) { at(t) = read_double(v, k, min, max, min_exclusive); },
               [=](const T& t) -> std::optional<std::string> { return toml_number(at(t)); });
  }
  // A std::optional<double> member: unset is left out of the file.
  template <class A>
  FieldTable& optional_real(std::string key, A at, double min, double max, std::string unit, std::string doc) {
    return add(std::move(key), std::move(unit), std::move(doc),
               [=](T& t, const RawValue& v, const std::string& k) { at(t) = read_double(v, k, min, max); },
               [=](const T& t) -> std::optional<std::string> {
                 const auto& x = at(t);
                 if (!x) return std::nullopt;
                 return toml_number(*x);
               });
  }
  template <class A>
  FieldTable& boolean(std::string key, A at, std::string doc) {
    return add(std::move(key), "", std::move(doc),
               [=](T& t, const RawValue& v, const std::string& k) { at(t) = read_bool(v, k); },
               [=](const T& t) -> std::optional<std::string> { return at(t) ? "true" : "false"; });
  }
  template <class A>
  FieldTable& text(std::string key, A at, std::string doc) {
    return add(std::move(key), "", std::move(doc),
               [=](T& t, const RawValue& v, const std::string& k) { at(t) = read_string(v, k); },
               [=](const T& t) -> std::optional<std::string> { return toml_string(at(t)); });
  }
  template <class E, class A>
  FieldTable& choice(std::string key, A at, std::string doc) {
    return add(std::move(key), "", std::move(doc),
               [=](T& t, const RawValue& v, const std::string& k) { at(t) = read_enum<E>(v, k); },
               [=](const T& t) -> std::optional<std::string> { return toml_string(std::string(enum_to_string(at(t)))); });
  }
  // A std::optional<E> member: unset (any) is left out of the file.
  template <class E, class A>
  FieldTable& optional_choice(std::string key, A at, std::string doc) {
    return add(std::move(key), "", std::move(doc),
               [=](T& t, const RawValue& v, const std::string& k) { at(t) = read_enum<E>(v, k); },
               [=](const T& t) -> std::optional<std::string> {
                 const auto& x = at(t);
                 if (!x) return std::nullopt;
                 return toml_string(std::string(enum_to_string(*x)));
               });
  }
  // The field added last must be present in every table read.
  FieldTable& required() {
    fields_.back().required = true;
    return *this;
  }
  // The field added last is left out of a written file while it holds its default.
  FieldTable& omit_default() {
    fields_.back().omit_default = true;
    return *this;
  }

  [[nodiscard]] const std::vector<Field>& fields() const { return fields_; }
  [[nodiscard]] const Field* find(const std::string& key) const {
    for (const Field& f : fields_)
      if (f.key == key) return &f;
    return nullptr;
  }
  // "a, b, c": the keys, for "allowed:" in messages (those of `key`'s section when it has one).
  [[nodiscard]] std::string allowed_near(const std::string& key) const {
    const auto dot = key.find('.');
    const std::string section = dot == std::string::npos ? "" : key.substr(0, dot + 1);
    std::string out;
    for (const Field& f : fields_) {
      const bool same = section.empty() ? true : f.key.compare(0, section.size(), section) == 0;
      if (same) out += (out.empty() ? "" : ", ") + f.key;
    }
    return out.empty() ? allowed_near("") : out;
  }

  // One value of key `key` (no prefix), named `prefix + key` in errors.
  void apply(T& t, const std::string& key, const RawValue& v, const std::string& prefix = "") const {
    if (const Field* f = find(key)) {
      f->read(t, v, prefix + key);
      return;
    }
    throw ConfigError(v.loc, prefix + key, v.text, "unknown key", allowed_near(key));
  }
  // Every value of `raw` (keys without prefix), then the required ones' presence; `where` locates
  // a missing key's table.
  void read(T& t, const RawTable& raw, const std::string& prefix, const SourceLoc& where) const {
    for (const auto& [k, v] : raw) apply(t, k, v, prefix);
    for (const Field& f : fields_)
      if (f.required && !raw.count(f.key))
        throw ConfigError(where, prefix + f.key, "", "required key is missing", allowed_near(f.key));
  }

  // `key = value  # doc (unit)[; note]` per field, a `[section]` line before each section's
  // first (keys with a dot); `notes` adds how a value was obtained, by key.
  [[nodiscard]] std::string write(const T& t, const std::map<std::string, std::string>& notes = {}) const {
    std::string out, section;
    for (const bool top : {true, false})  // keys without a section first: TOML puts them before any table
      for (const Field& f : fields_) {
        const auto dot = f.key.find('.');
        if ((dot == std::string::npos) != top) continue;
        const std::optional<std::string> v = f.write(t);
        if (!v || (f.omit_default && v == f.write(T{}))) continue;
        const std::string sec = top ? "" : f.key.substr(0, dot);
        if (sec != section) {
          out += "\n[" + sec + "]\n";
          section = sec;
        }
        std::string line = (top ? f.key : f.key.substr(dot + 1)) + " = " + *v;
        std::string comment = f.doc + (f.unit.empty() ? "" : " (" + f.unit + ")");
        if (auto it = notes.find(f.key); it != notes.end()) comment += "; " + it->second;
        if (line.size() < 36) line.resize(36, ' ');
        out += line + " # " + comment + "\n";
      }
    return out;
  }

 private:
  FieldTable& add(std::string key, std::string unit, std::string doc,
                  std::function<void(T&, const RawValue&, const std::string&)> r,
                  std::function<std::optional<std::string>(const T&)> w) {
    fields_.push_back(Field{std::move(key), std::move(unit), std::move(doc), false, false, std::move(r), std::move(w)});
    return *this;
  }
  std::vector<Field> fields_;
};

}  // namespace paralab
