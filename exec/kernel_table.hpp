// paralab exec — a backend's memory-bound ops as a table: one function per OpKind.
//
// Each backend fills its table from one file per family of kinds (norms, pointwise,
// token-level, optimizer): adding a kind to a backend is a function in a family file and one
// `add` line there, not a case in a switch. A backend builds its table once, immutable after
// (a function-local static const), and run() is a lookup. A kind asked for that the backend
// has no entry for is an InternalError naming the op; a kind added twice is one too, when
// the table is built.
#pragma once

#include <array>
#include <initializer_list>
#include <string>
#include <string_view>

#include "exec/backend.hpp"
#include "ir/error.hpp"
#include "ir/op_kind.hpp"

namespace paralab::exec {

template <class Context>
class KernelTable {
 public:
  using Fn = void (*)(const OpCall&, Context&);
  using Family = void (*)(KernelTable&);  // adds one family's kinds

  explicit KernelTable(std::string_view backend) : backend_(backend) {}
  // The table of `backend` filled by `families`, in order.
  KernelTable(std::string_view backend, std::initializer_list<Family> families) : backend_(backend) {
    for (Family f : families) f(*this);
  }

  // Registers `fn` for every kind in `kinds`, or for none of them when one is taken already.
  KernelTable& add(std::initializer_list<OpKind> kinds, Fn fn) {
    for (OpKind k : kinds)
      if (fns_[index(k)]) throw InternalError(backend_ + " kernel table: " + std::string(to_string(k)) + " registered twice");
    for (OpKind k : kinds) fns_[index(k)] = fn;
    return *this;
  }

  [[nodiscard]] bool has(OpKind k) const { return fns_[index(k)] != nullptr; }

  void run(const OpCall& call, Context& ctx) const {
    const Fn fn = fns_[index(call.op.kind)];
    if (!fn) throw InternalError("op " + op_label(call.op) + ": no " + backend_ + " implementation for this kind");
    fn(call, ctx);
  }

 private:
  static size_t index(OpKind k) {  // a kind outside the enum (a corrupt op) is an error, not UB
    const auto i = static_cast<size_t>(k);
    if (i >= static_cast<size_t>(OpKind::kCount)) throw InternalError("kernel table: op kind " + std::to_string(i) + " out of range");
    return i;
  }

  std::string backend_;
  std::array<Fn, static_cast<size_t>(OpKind::kCount)> fns_{};
};

}  // namespace paralab::exec
