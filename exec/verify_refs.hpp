// paralab exec — the references `--verify` checks sampled ops against (OpChecker, verify.hpp):
// each op kind's outputs recomputed on the host in double precision from the op's inputs, as a
// table (exec/kernel_table.hpp) filled by one file per family: verify_ref_matmul.cpp (GEMMs of
// every role, fused attention), verify_ref_kernels.cpp (norms, activations, softmax, dropout),
// verify_ref_tokens.cpp (RoPE, embedding, cross-entropy stages, gradient accumulation, the
// gradient norm, the optimizer step). Independent of the backends' code on purpose: a kind
// without a reference is not sampled. Internal to exec/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "exec/kernel_table.hpp"
#include "exec/plan.hpp"

namespace paralab::exec::verify_detail {

// Shapes every reference needs, of this rank.
struct Geo {
  int64_t al, gl, d, b, s, qc, cc, V, vstart, tp;
  CpSplit cp;  // global position of a local one (load-balanced context parallelism)

  // The fused QKV layout [s*b rows, (a/t + 2 g/t) heads x d]: query head h, key and value group
  // gr of token i (row i*b + bi), element c.
  [[nodiscard]] double Qi(const std::vector<double>& qkv, int64_t bi, int64_t h, int64_t i, int64_t c) const {
    return qkv[static_cast<size_t>((i * b + bi) * qc + h * d + c)];
  }
  [[nodiscard]] double Ki(const std::vector<double>& qkv, int64_t bi, int64_t gr, int64_t j, int64_t c) const {
    return qkv[static_cast<size_t>((j * b + bi) * qc + (al + gr) * d + c)];
  }
  [[nodiscard]] double Vi(const std::vector<double>& qkv, int64_t bi, int64_t gr, int64_t j, int64_t c) const {
    return qkv[static_cast<size_t>((j * b + bi) * qc + (al + gl + gr) * d + c)];
  }
};
Geo geo_of(const RankPlan& p);

// Normalized max error of `got` against `want` over the listed elements.
struct Compare {
  double err = 0, scale = 0;
  int64_t worst = -1;
  double got_w = 0, want_w = 0;
  void add(int64_t i, double got, double want);
};

// A finding that is not an output's error (the dropout mask's kept fraction).
struct RefFinding {
  std::string category;
  bool ok = true;
  double error = 0;
  std::string message;
};

// One sampled op: its inputs and outputs as doubles, and where its checks go.
struct RefCase {
  const OpCall& call;
  const RankPlan& plan;
  const Geo& G;
  const std::vector<std::vector<double>>& R;   // inputs
  const std::vector<std::vector<double>>& W0;  // outputs before the op
  const std::vector<std::vector<double>>& W;   // outputs after
  std::vector<Compare>& cmp;                   // per output
  std::vector<RefFinding>& findings;
  double loss_scale = 1;                       // the loss scale in use (fp16: the backend's dynamic one)

  // What every reference reads, for a structured binding: `const auto& [op, G, R, W0, W] = rc.view();`.
  struct View {
    const Op& op;
    const Geo& G;
    const std::vector<std::vector<double>>& R;
    const std::vector<std::vector<double>>& W0;
    const std::vector<std::vector<double>>& W;
  };
  [[nodiscard]] View view() const { return {call.op, G, R, W0, W}; }
  // Output w's element i should be `want`.
  void check(size_t w, int64_t i, double want) { cmp[w].add(i, W[w][static_cast<size_t>(i)], want); }
};

// At most ~4096 elements of a large output, the last included (a reference element can cost O(k)).
void sample(int64_t n, const std::function<void(int64_t)>& f);

using RefTable = KernelTable<RefCase>;
void add_matmul_refs(RefTable& t);
void add_kernel_refs(RefTable& t);
void add_token_refs(RefTable& t);
// The table, built once from the families above (verify_ops.cpp).
const RefTable& ref_table();
// Whether OpChecker can check `op`: its kind has a reference, and it is not a plain cast (only
// grad_accumulate among casts) nor context-parallel ring attention.
bool has_reference(const Op& op);

}  // namespace paralab::exec::verify_detail
