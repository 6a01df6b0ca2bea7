// paralab — Chakra node attributes (name/value pairs, chakra/et_def.proto's Attribute): adding
// them with the value variant Chakra's feeder reads, and reading them leniently (an integer from
// any integer variant) since writers differ.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "chakra/et_def.pb.h"

namespace paralab::chakra {

using Attrs = google::protobuf::RepeatedPtrField<paralab::chakra_et::Attribute>;

void add_int64(Attrs& a, const char* name, int64_t v);
void add_uint64(Attrs& a, const char* name, uint64_t v);
void add_int32(Attrs& a, const char* name, int32_t v);
void add_bool(Attrs& a, const char* name, bool v);
void add_double(Attrs& a, const char* name, double v);
void add_string(Attrs& a, const char* name, const std::string& v);

const paralab::chakra_et::Attribute* find_attr(const Attrs& a, const char* name);
// The value as an integer: any integer variant, or a bool; nothing for other variants or none.
std::optional<int64_t> int_attr(const Attrs& a, const char* name);
// A floating-point or integer variant as a double.
std::optional<double> double_attr(const Attrs& a, const char* name);
std::optional<std::string> string_attr(const Attrs& a, const char* name);

}  // namespace paralab::chakra
