// paralab — measured corrections: one table of rows, each a fixed cost and a factor for a class
// of ops, written by `paralab calibrate` and applied by the simulator (docs/calibration.md,
// "Corrections"). In the spirit of SimGrid's NetworkModelFactors / FactorSet: the model stays
// the hardware's, and what a measurement says the model misses is data, keyed by op class.
//
// A row corrects one cost of the ops of its class:
//   time      the op's own time:        t = fixed_us + factor x modeled time
//   dispatch  the gap before an op whose last constraint was its stream predecessor (us)
//   handoff   the gap before an op whose last constraint was a dependency on another stream (us)
// The modeled gap is 0, so a gap row's factor must be 1.
//
// Classes form one fixed hierarchy; a row names a prefix of it (levels below the last it names
// are "any"):
//   family (compute | comm) -> op kind -> collective kind (collectives) -> span (communication:
//   within one node | across nodes) -> phase -> size bucket [min_bytes, max_bytes)
// An op takes the row of the deepest class that matches it; no row: no correction. Calibrate
// writes a row only for a class with at least kMinSamples samples, so a sparse class falls back
// to its parent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/op_kind.hpp"
#include "ir/step_graph.hpp"

namespace paralab {

enum class CostKind : uint8_t { time, dispatch, handoff };
enum class OpFamily : uint8_t { compute, comm };
enum class Span : uint8_t { intra_node, inter_node };

// What the table needs to know of one op to find its row.
struct OpFacts {
  OpKind kind = OpKind::gemm;
  std::optional<CollKind> collective{};  // set for collectives
  std::optional<Span> span{};            // set for communication with more than one member
  Phase phase = Phase::forward;
  double bytes = 0;                    // communication: bytes per rank; compute: memory traffic
};

// A class: the levels a row names, top down; unset = any.
struct OpClass {
  CostKind cost = CostKind::time;
  std::optional<OpFamily> family{};
  std::optional<OpKind> kind{};
  std::optional<CollKind> collective{};
  std::optional<Span> span{};
  std::optional<Phase> phase{};
  int64_t min_bytes = 0, max_bytes = 0;  // a bucket when max_bytes > 0

  [[nodiscard]] bool has_bucket() const { return max_bytes > 0; }
  // How many levels below the cost it names (0: every op; 6: a size bucket).
  [[nodiscard]] int depth() const;
  // Whether `f` (with this cost) lies in the class.
  [[nodiscard]] bool contains(const OpFacts& f) const;
  // "time comm/collective/all_gather/intra_node/fwd/[65536,262144)" for messages and files.
  [[nodiscard]] std::string label() const;
  friend bool operator==(const OpClass&, const OpClass&) = default;
};

struct Correction {
  double fixed_us = 0;
  double factor = 1;
  [[nodiscard]] double apply(double modeled_us) const { return fixed_us + factor * modeled_us; }
  [[nodiscard]] bool identity() const { return fixed_us == 0 && factor == 1; }
};

struct CorrectionRow {
  OpClass cls;
  Correction c;
  int64_t samples = 0;   // measurements it was fitted on (0: written by hand)
  double mape_pct = 0;   // its fit's mean absolute percentage error over them (0: not fitted)
};

class CorrectionTable {
 public:
  static constexpr int64_t kMinSamples = 20;

  CorrectionTable() = default;
  // Throws std::invalid_argument naming the row when a row's class is not a valid prefix of the
  // hierarchy (correction.cpp: validate_class), two rows share a class or their buckets overlap,
  // or a gap row has a factor other than 1.
  explicit CorrectionTable(std::vector<CorrectionRow> rows);

  [[nodiscard]] const std::vector<CorrectionRow>& rows() const { return rows_; }
  [[nodiscard]] bool empty() const { return rows_.empty(); }
  // The deepest row of cost `cost` containing `f`; identity without one.
  [[nodiscard]] Correction find(CostKind cost, const OpFacts& f) const;

 private:
  std::vector<CorrectionRow> rows_;  // as given
  std::vector<size_t> deepest_first_;  // rows_ by depth, deepest first: find takes the first match
};

// Why `c` is not a valid class (empty: valid): a level named below an unnamed one, a collective
// kind on another op kind, a span on a compute op, a bucket with min >= max, a family that does
// not hold the kind.
std::string validate_class(const OpClass& c);

OpFamily family_of(OpKind k);

}  // namespace paralab
