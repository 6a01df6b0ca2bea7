// tests/exec — the backends' kernel tables (exec/kernel_table.hpp): every memory-bound op kind
// has exactly one entry, nothing else has one, a kind registered twice or run without an
// entry is an InternalError naming it; and the CPU backend's accumulating copies on random data.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "exec/cpu/kernel_families.hpp"
#include "exec_test_util.hpp"
#include "ir/error.hpp"

#ifdef PARALAB_EXEC_CUDA
#include "exec/cuda/kernel_families.hpp"
#endif

using namespace paralab;
using namespace paralab::exec;

namespace {

// The kinds a backend's kernel table must hold: neither a matmul (run_gemm, run_attention) nor
// communication (run_comm).
bool memory_bound(OpKind k) { return !is_matmul(k) && !is_comm(k); }

template <class Table>
void check_coverage(const Table& t) {
  for (size_t i = 0; i < static_cast<size_t>(OpKind::kCount); ++i) {
    const auto k = static_cast<OpKind>(i);
    CAPTURE(to_string(k));
    CHECK(t.has(k) == memory_bound(k));
  }
}

struct Counter {
  int calls = 0;
};
void count(const OpCall&, Counter& c) { ++c.calls; }

}  // namespace

TEST_CASE("the CPU kernel table holds every memory-bound kind and nothing else", "[exec][kernel_table]") {
  check_coverage(cpu::kernel_table());
}

#ifdef PARALAB_EXEC_CUDA
TEST_CASE("the CUDA kernel table holds every memory-bound kind and nothing else", "[exec][kernel_table][cuda]") {
  check_coverage(cuda::kernel_table());  // function pointers only: no device needed
}
#endif

TEST_CASE("a kernel table refuses a kind twice and names a kind it has no entry for", "[exec][kernel_table]") {
  KernelTable<Counter> t("Test");
  t.add({OpKind::gelu_fwd, OpKind::gelu_bwd}, count);
  CHECK(t.has(OpKind::gelu_fwd));
  CHECK_FALSE(t.has(OpKind::cast));
  CHECK_THROWS_WITH(t.add({OpKind::cast, OpKind::gelu_bwd}, count), Catch::Contains("gelu_bwd registered twice"));
  CHECK_FALSE(t.has(OpKind::cast));  // all or nothing

  test::OpHarness x;
  x.op.name = "L0.mb0.fwd.gelu";
  x.op.kind = OpKind::gelu_fwd;
  Counter c;
  t.run(x.call(), c);
  CHECK(c.calls == 1);
  x.op.kind = OpKind::softmax_fwd;
  CHECK_THROWS_AS(t.run(x.call(), c), InternalError);
  CHECK_THROWS_WITH(t.run(x.call(), c), Catch::Contains("L0.mb0.fwd.gelu") && Catch::Contains("no Test implementation"));
  CHECK(c.calls == 1);
}

TEST_CASE("CPU grad_accumulate adds the fresh gradient into the main gradient, one rounding", "[exec][kernel_table]") {
  // Without gradient-accumulation fusion the wgrad GEMM writes a fresh gradient (bf16 here) and
  // grad_accumulate adds it into the main gradient view (fp32 and bf16 views): old + fresh.
  constexpr int64_t m = 24, n = 40;
  const auto fresh = test::random_floats(m * n, 11);
  const auto old = test::random_floats(m * n, 12, 3.0f);
  for (DType main_t : {DType::f32, DType::bf16}) {
    CAPTURE(to_string(main_t));
    auto fresh_s = test::storage(fresh, DType::bf16);
    auto main_s = test::storage(old, main_t);
    const auto main_before = test::values(main_s, main_t);
    test::OpHarness x;
    x.op.kind = OpKind::cast;
    x.op.name = "grad_accumulate";
    x.op.attrs = KernelAttrs{m, n, 0, 0, 1, 0};
    x.add_read(fresh_s.data(), m * n, DType::bf16);
    x.add_read(main_s.data(), m * n, main_t);
    x.add_write(main_s.data(), m * n, main_t);
    test::CpuHarness h;
    auto ctx = h.ctx();
    cpu::run_kernel(x.call(), ctx);
    const auto fresh_v = test::values(fresh_s, DType::bf16);
    const auto got = test::values(main_s, main_t);
    for (int64_t i = 0; i < m * n; ++i) {
      // The reference: the sum in fp32, rounded once into the view's dtype.
      std::vector<uint8_t> one = test::storage({main_before[static_cast<size_t>(i)] + fresh_v[static_cast<size_t>(i)]}, main_t);
      const float want = test::values(one, main_t)[0];
      REQUIRE(got[static_cast<size_t>(i)] == want);
    }
  }
}

TEST_CASE("shared kernel arguments: dropout draws this tensor rank's slice of the mask under SP", "[exec][kernel_args]") {
  test::CpuHarness h;
  h.shape.tp = 2;
  test::OpHarness x;
  x.op.kind = OpKind::dropout_add_fwd;
  x.op.name = "attn_out_dropout_add";
  x.op.layer = 3;
  x.op.microbatch = 1;
  x.op.attrs = KernelAttrs{8, 16, 0.1f, 0, 1, 0};
  std::vector<float> buf(8 * 16, 0.5f);
  x.add_read(buf.data(), 8 * 16, DType::f32);
  x.add_read(buf.data(), 8 * 16, DType::f32);
  x.add_write(buf.data(), 8 * 16, DType::f32);
  for (bool sp : {false, true})
    for (int64_t tp : {0, 1}) {
      CAPTURE(sp, tp);
      h.shape.sp = sp;
      h.plan.coord.tp = tp;
      const args::OpSite at{h.plan, h.shape, h.scenario};
      const auto a = args::dropout_add_fwd(x.call(), at);
      CHECK(a.offset == (sp ? static_cast<uint64_t>(tp * 8 * 16) : 0u));
      // Hidden-state dropout: one seed for all tensor ranks (they draw slices of one mask).
      CHECK(a.seed == args::dropout_seed(h.scenario, x.op, 0));
      CHECK(a.p == Approx(0.1f));
    }
  // Attention-probability dropout: a seed of its own per tensor rank, no offset.
  x.op.kind = OpKind::dropout_fwd;
  x.op.name = "attn_dropout";
  h.shape.sp = true;
  h.plan.coord.tp = 1;
  const args::OpSite at{h.plan, h.shape, h.scenario};
  const auto a = args::dropout_fwd(x.call(), at);
  CHECK(a.offset == 0u);
  CHECK(a.seed != args::dropout_seed(h.scenario, x.op, 0));
}

TEST_CASE("shared kernel arguments: the optimizer's views are checked against the training config", "[exec][kernel_args]") {
  TrainingConfig t;
  t.precision = Precision::bf16;  // mixed: reads {grad, param, master, exp_avg, [norm^2]}
  t.optimizer = Optimizer::adam;
  t.clip_grad = 1.0;
  constexpr int64_t n = 10;
  std::vector<float> g(n, 1.0f), p(n), m(n), s1(n), s2(n), norm(1, 4.0f);
  test::OpHarness x;
  x.op.kind = OpKind::optimizer_step;
  x.op.name = "optimizer";
  x.add_read(g.data(), n, DType::bf16);
  x.add_read(p.data(), n, DType::bf16);
  x.add_read(m.data(), n, DType::f32);
  x.add_read(s1.data(), n, DType::f32);
  x.add_read(norm.data(), 1, DType::f32);
  x.add_write(p.data(), n, DType::bf16);
  x.add_write(m.data(), n, DType::f32);
  x.add_write(s1.data(), n, DType::f32);
  x.add_write(s2.data(), n, DType::f32);
  const args::OptimizerViews v = args::optimizer_views(x.call(), t);
  CHECK(v.n == n);
  CHECK(v.master == m.data());
  CHECK(v.state1 == s1.data());
  CHECK(v.state2 == s2.data());
  CHECK(v.param == p.data());
  CHECK(v.norm_sq == norm.data());
  CHECK(v.found_flag == nullptr);
  // Without clipping the norm is one read too many: named, with the counts.
  t.clip_grad = 0;
  CHECK_THROWS_WITH(args::optimizer_views(x.call(), t),
                    Catch::Contains("optimizer") && Catch::Contains("5 reads and 4 writes, expected 4 and 4"));
  // Views of different sizes.
  t.clip_grad = 1.0;
  x.plan.writes[3].numel = n - 1;
  CHECK_THROWS_WITH(args::optimizer_views(x.call(), t), Catch::Contains("optimizer views differ in size"));
}

TEST_CASE("CPU xent_bwd multiplies by the dynamic fp16 loss scale in use, not the initial one", "[exec][kernel_table]") {
  constexpr int64_t T = 6, V = 10, micro = 2;
  test::CpuHarness h;
  h.scenario.training.precision = Precision::fp16;
  h.plan.dp_size = 2;
  h.scaler.scale = 2048.0f;  // backed off from the IR's 65536
  const auto logits = test::random_floats(T * V, 21, 2.0f);
  std::vector<float> ex(T * V), sums(2 * T), out(T * V);
  std::vector<int32_t> labels(T);
  for (int64_t r = 0; r < T; ++r) {
    labels[static_cast<size_t>(r)] = static_cast<int32_t>((r * 7) % V);
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += ex[static_cast<size_t>(r * V + v)] = std::exp(logits[static_cast<size_t>(r * V + v)]);
    sums[static_cast<size_t>(2 * r)] = static_cast<float>(s);
  }
  test::OpHarness x;
  x.op.kind = OpKind::xent_bwd;
  x.op.name = "xent_bwd";
  x.op.attrs = KernelAttrs{T, V, 0, 0, 65536.0f, micro};
  x.add_read(ex.data(), T * V, DType::f32);
  x.add_read(sums.data(), 2 * T, DType::f32);
  x.add_read(labels.data(), T, DType::i32);
  x.add_write(out.data(), T * V, DType::f32);
  auto ctx = h.ctx();
  cpu::run_kernel(x.call(), ctx);
  const double g = 2048.0 / (T * micro * 2);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t v = 0; v < V; ++v) {
      const size_t e = static_cast<size_t>(r * V + v);
      const double want = (ex[e] / sums[static_cast<size_t>(2 * r)] - (v == labels[static_cast<size_t>(r)] ? 1.0 : 0.0)) * g;
      REQUIRE(out[e] == Approx(want).epsilon(1e-5).margin(1e-6));
    }
}
