// paralab exec — verification of single ops against references computed on the host in
// double precision (OpChecker, exec/verify.hpp): which ops are sampled, their inputs and
// outputs read back, the references run (verify_refs.hpp: one table, filled by the
// verify_ref_*.cpp families) and their errors against the output dtype's tolerance reported.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <string_view>

#include "exec/error.hpp"
#include "exec/plan.hpp"
#include "exec/verify.hpp"
#include "exec/verify_refs.hpp"
#include "exec/verify_values.hpp"
#include "ir/enum_names.hpp"

namespace paralab::exec {

using namespace verify_detail;

namespace verify_detail {

Geo geo_of(const RankPlan& p) {
  const ModelShape& m = p.ir->shape;
  return {m.heads_local(), m.groups_local(), m.head_dim,      m.micro_batch,       m.seq_local(), m.qkv_cols(),
          m.attn_cols(),   m.vocab_local(),  p.coord.tp * m.vocab_local(), p.coord.tp, cp_split(m, p.coord.cp)};
}

void Compare::add(int64_t i, double got, double want) {
  scale = std::max(scale, std::abs(want));
  const double e = std::abs(got - want);
  if (!(e <= err)) {  // NaN counts as worst
    err = std::isnan(e) ? INFINITY : e;
    worst = i;
    got_w = got;
    want_w = want;
  }
}

void sample(int64_t n, const std::function<void(int64_t)>& f) {
  const int64_t stride = std::max<int64_t>(1, n / 4096);
  for (int64_t i = 0; i < n; i += stride) f(i);
  if (n > 0 && (n - 1) % stride != 0) f(n - 1);
}

const RefTable& ref_table() {
  static const RefTable table("--verify reference", {add_matmul_refs, add_kernel_refs, add_token_refs});
  return table;
}

bool has_reference(const Op& op) {
  if (!ref_table().has(op.kind)) return false;
  if (op.kind == OpKind::cast) return std::string_view(op.name) == "grad_accumulate";  // other casts convert
  if (const auto* a = op.attention()) return a->cp_size == 1;                           // ring attention: no reference
  return true;
}

}  // namespace verify_detail

namespace {

double tolerance(DType t) {
  switch (t) {
    case DType::f32: return 2e-4;
    case DType::f16: return 5e-3;
    default: return 2e-2;
  }
}

// A linear layer's product in FP8 (precision = fp8; the bias gradient, output 1, is not): both
// operands rounded to e4m3, 3 mantissa bits, a relative error up to 2^-4 each (OCP OFP8 rev 1.0;
// Micikevicius et al. 2022, "FP8 Formats for Deep Learning"), so a product term is off by up to
// ~13 % and the output's normalized error on random data is ~3-5 %. 0.1 still catches a wrong
// scale or layout (errors of order 1), and a backend that runs them in bf16 passes it as well.
double tolerance_of(const Op& op, size_t output, DType t) {
  const GemmAttrs* g = op.gemm();
  if (g && is_linear(g->role) && g->math == MathMode::fp8 && output == 0) return std::max(tolerance(t), 0.1);
  return tolerance(t);
}

}  // namespace

OpChecker::OpChecker(const RankPlan& plan, Backend& backend, int64_t every) : plan_(plan), backend_(backend) {
  const StepGraph& g = *plan.graph;
  sampled_.assign(g.ops.size(), 0);
  std::map<std::string, int> seen;
  int64_t counter = 0;
  for (const Op& op : g.ops) {
    std::string key(enum_to_string(op.kind));
    if (const auto* gm = op.gemm()) key += "." + std::string(to_string(gm->role));
    key += std::string(".") + op.name;
    if (!has_reference(op)) continue;
    if (seen[key]++ == 0 || ++counter % every == 0) sampled_[op.id] = 1;
  }
}

bool OpChecker::wants(const Op& op) { return sampled_[op.id] != 0; }

void OpChecker::before(const OpCall& call) {
  Snapshot s;
  for (size_t i = 0; i < call.reads.size(); ++i)
    s.reads.push_back(to_doubles(backend_, call.reads[i], call.plan.reads[i].dtype, call.plan.reads[i].numel));
  for (size_t i = 0; i < call.writes.size(); ++i)
    s.writes.push_back(to_doubles(backend_, call.writes[i], call.plan.writes[i].dtype, call.plan.writes[i].numel));
  std::lock_guard lk(mu_);
  snaps_[call.op.id] = std::move(s);
}


void OpChecker::after(const OpCall& call) {
  Snapshot s;
  {
    std::lock_guard lk(mu_);
    s = std::move(snaps_.at(call.op.id));
    snaps_.erase(call.op.id);
  }
  const Op& op = call.op;
  const OpPlan& o = call.plan;
  const Geo G = geo_of(plan_);
  std::vector<std::vector<double>> W;  // outputs after
  for (size_t i = 0; i < call.writes.size(); ++i)
    W.push_back(to_doubles(backend_, call.writes[i], o.writes[i].dtype, o.writes[i].numel));

  // The reference fills `cmp[w]` for output w over the elements it checks.
  std::vector<Compare> cmp(W.size());
  std::vector<RefFinding> findings;
  RefCase x{call, plan_, G, s.reads, s.writes, W, cmp, findings};
  if (op.kind == OpKind::xent_bwd && plan_.ir->scenario.training.precision == Precision::fp16)
    x.loss_scale = backend_.loss_scale();  // dynamic: it moves between steps (exec/plan.hpp xent_grad_scale)
  ref_table().run(call, x);

  std::lock_guard lk(mu_);
  for (const RefFinding& f : findings) report_.add(f.category, f.ok, f.error, f.message);
  for (size_t w = 0; w < cmp.size(); ++w) {
    if (cmp[w].worst < 0 && cmp[w].err == 0 && cmp[w].scale == 0) continue;  // output not checked
    const double err = cmp[w].scale > 1e-30 ? cmp[w].err / cmp[w].scale : cmp[w].err;
    const double tol = tolerance_of(op, w, o.writes[w].dtype);
    const bool ok = err <= tol;
    std::string msg;
    if (!ok)
      msg = "rank " + std::to_string(plan_.rank) + ": op " + op_label(op) + " output " + std::to_string(w) +
            ": normalized error " + std::to_string(err) + " > " + std::to_string(tol) + " (element " +
            std::to_string(cmp[w].worst) + ": got " + std::to_string(cmp[w].got_w) + ", reference " +
            std::to_string(cmp[w].want_w) + ")";
    report_.add("ops." + std::string(enum_to_string(op.kind)), ok, err, msg);
  }
}

VerifyReport OpChecker::report() const {
  std::lock_guard lk(mu_);
  return report_;
}

}  // namespace paralab::exec
