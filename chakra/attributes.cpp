// paralab — Chakra attribute helpers (attributes.hpp).
#include "chakra/attributes.hpp"

namespace paralab::chakra {

using paralab::chakra_et::Attribute;

namespace {

Attribute& add(Attrs& a, const char* name) {
  Attribute* x = a.Add();
  x->set_name(name);
  return *x;
}

}  // namespace

void add_int64(Attrs& a, const char* name, int64_t v) { add(a, name).set_int64_val(v); }
void add_uint64(Attrs& a, const char* name, uint64_t v) { add(a, name).set_uint64_val(v); }
void add_int32(Attrs& a, const char* name, int32_t v) { add(a, name).set_int32_val(v); }
void add_bool(Attrs& a, const char* name, bool v) { add(a, name).set_bool_val(v); }
void add_double(Attrs& a, const char* name, double v) { add(a, name).set_double_val(v); }
void add_string(Attrs& a, const char* name, const std::string& v) { add(a, name).set_string_val(v); }

const Attribute* find_attr(const Attrs& a, const char* name) {
  for (const Attribute& x : a)
    if (x.name() == name) return &x;
  return nullptr;
}

std::optional<int64_t> int_attr(const Attrs& a, const char* name) {
  const Attribute* x = find_attr(a, name);
  if (!x) return std::nullopt;
  switch (x->value_case()) {
    case Attribute::kInt32Val: return x->int32_val();
    case Attribute::kInt64Val: return x->int64_val();
    case Attribute::kUint32Val: return static_cast<int64_t>(x->uint32_val());
    case Attribute::kUint64Val: return static_cast<int64_t>(x->uint64_val());
    case Attribute::kSint32Val: return x->sint32_val();
    case Attribute::kSint64Val: return x->sint64_val();
    case Attribute::kFixed32Val: return static_cast<int64_t>(x->fixed32_val());
    case Attribute::kFixed64Val: return static_cast<int64_t>(x->fixed64_val());
    case Attribute::kSfixed32Val: return x->sfixed32_val();
    case Attribute::kSfixed64Val: return x->sfixed64_val();
    case Attribute::kBoolVal: return x->bool_val() ? 1 : 0;
    default: return std::nullopt;
  }
}

std::optional<double> double_attr(const Attrs& a, const char* name) {
  const Attribute* x = find_attr(a, name);
  if (!x) return std::nullopt;
  if (x->value_case() == Attribute::kDoubleVal) return x->double_val();
  if (x->value_case() == Attribute::kFloatVal) return x->float_val();
  if (auto i = int_attr(a, name)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<std::string> string_attr(const Attrs& a, const char* name) {
  const Attribute* x = find_attr(a, name);
  if (!x || x->value_case() != Attribute::kStringVal) return std::nullopt;
  return x->string_val();
}

}  // namespace paralab::chakra
