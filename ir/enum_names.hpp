// paralab — the spelling of every enum value in files, JSON and messages, in one place.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "ir/dtype.hpp"
#include "ir/layout.hpp"
#include "ir/op_kind.hpp"
#include "ir/scenario.hpp"
#include "ir/step_graph.hpp"
#include "ir/topology.hpp"

namespace paralab {

template <class E>
using NameTable = std::span<const std::pair<std::string_view, E>>;

// names<E>(): the table of (spelling, value) for enum E.
template <class E>
NameTable<E> names();

template <class E>
std::optional<E> enum_from_string(std::string_view s) {
  for (const auto& [name, value] : names<E>())
    if (name == s) return value;
  return std::nullopt;
}

template <class E>
std::string_view enum_to_string(E e) {
  for (const auto& [name, value] : names<E>())
    if (value == e) return name;
  return "?";
}

// "a | b | c", for "allowed:" in error messages.
template <class E>
std::string enum_choices() {
  std::string out;
  for (const auto& [name, value] : names<E>()) {
    if (!out.empty()) out += " | ";
    out += name;
  }
  return out;
}

}  // namespace paralab
