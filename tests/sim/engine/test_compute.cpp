// paralab — the compute model (sim/compute): roofline, tile and wave quantization, the small-k
// factor, split-K, flash attention's causal halving, CPU devices, calibration overrides.
#include <catch2/catch.hpp>

#include <cmath>

#include "sim/compute/compute_model.hpp"

using namespace paralab;
using namespace paralab::sim;

namespace {

// A GPU with round numbers: 100 SMs, 100 TFLOP/s bf16, 1000 GB/s at 100 % efficiency,
// 128 x 128 tiles, 1 us launch.
DeviceSpec round_gpu() {
  DeviceSpec d;
  d.kind = DeviceKind::gpu;
  d.name = "round";
  d.sm_count = 100;
  d.peak_tflops[math_index(MathMode::f32)] = 10;
  d.peak_tflops[math_index(MathMode::bf16)] = 100;
  d.mem_bw_gbps = 1000;
  d.mem_efficiency = 1.0;
  d.launch_overhead_us = 1.0;
  d.gemm_max_efficiency = 0.8;
  d.gemm_tile_m = 128;
  d.gemm_tile_n = 128;
  d.flash_fwd_efficiency = 0.5;
  d.flash_bwd_efficiency = 0.4;
  d.memory_gib = 80;
  return d;
}

GemmAttrs gemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  GemmAttrs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.math = MathMode::bf16;
  return g;
}

Op gemm_op(const GemmAttrs& g, double bytes = -1) {
  Op op;
  op.kind = OpKind::gemm;
  op.attrs = g;
  op.flops = 2.0 * static_cast<double>(g.m * g.n) * static_cast<double>(g.k * g.batch);
  op.bytes = bytes >= 0 ? bytes : static_cast<double>((g.m * g.k + g.k * g.n + g.m * g.n) * g.batch * 2);
  return op;
}

double fill(double k) { return k / (k + 64.0); }  // pipeline-fill factor (compute_gemm.cpp)

}  // namespace

// NVIDIA, Matrix Multiplication Background User's Guide (2023): "Wave Quantization".
TEST_CASE("compute: a GEMM whose tiles fill whole waves runs at the max efficiency (x fill)", "[compute]") {
  const DeviceSpec d = round_gpu();
  // 10 x 10 tiles of 128 x 128 = 100 tiles = one full wave on 100 SMs.
  CHECK(gemm_efficiency(gemm(1280, 1280, 4096), d) == Approx(0.8 * fill(4096)));
  // 20 x 10 tiles = two full waves.
  CHECK(gemm_efficiency(gemm(2560, 1280, 4096), d) == Approx(0.8 * fill(4096)));
}

TEST_CASE("compute: one tile more than a wave costs a whole extra wave", "[compute]") {
  const DeviceSpec d = round_gpu();
  // 101 tiles (batch 101 of one tile each) -> 2 waves of which 101/200 are useful.
  CHECK(gemm_efficiency(gemm(128, 128, 4096, 101), d) == Approx(0.8 * fill(4096) * 101.0 / 200.0));
  // Time (compute-bound: negligible bytes): the 101-tile GEMM takes as long as a 200-tile one.
  const double t101 = gemm_model_us(gemm_op(gemm(128, 128, 4096, 101), 1.0), d);
  const double t200 = gemm_model_us(gemm_op(gemm(128, 128, 4096, 200), 1.0), d);
  CHECK(t101 == Approx(t200).epsilon(1e-9));
}

// Ibid., "Tile Quantization": a dimension one past a tile multiple pads a whole tile row.
TEST_CASE("compute: tile quantization pads the edge tiles", "[compute]") {
  const DeviceSpec d = round_gpu();
  // m = 1281 -> 11 tile rows x 10 tile columns = 110 tiles = 2 waves; useful 1281*1280 / (200*128*128).
  const double q = 1281.0 * 1280.0 / (200.0 * 128.0 * 128.0);
  CHECK(gemm_efficiency(gemm(1281, 1280, 4096), d) == Approx(0.8 * fill(4096) * q));
}

TEST_CASE("compute: the best of the main tile and its transpose is taken", "[compute]") {
  DeviceSpec d = round_gpu();
  d.gemm_tile_m = 256;
  d.gemm_tile_n = 128;
  // m = 128, n = 25600: 256x128 tiles -> 1 x 200 = 200 tiles, half of each tile empty (q = 0.5);
  // 128x256 tiles -> 1 x 100 = 100 tiles, full (q = 1).
  CHECK(gemm_efficiency(gemm(128, 25600, 4096), d) == Approx(0.8 * fill(4096)));
}

TEST_CASE("compute: small k pays the pipeline fill", "[compute]") {
  const DeviceSpec d = round_gpu();
  CHECK(gemm_efficiency(gemm(1280, 1280, 64), d) == Approx(0.8 * 0.5));
  CHECK(gemm_efficiency(gemm(1280, 1280, 64), d) < gemm_efficiency(gemm(1280, 1280, 8192), d));
}

TEST_CASE("compute: few tiles split k over the idle SMs", "[compute]") {
  const DeviceSpec d = round_gpu();
  // One 128x128 tile, k = 25600: split-K into min(100 / 1, 25600 / 256) = 100 slices of 256.
  const double e = gemm_efficiency(gemm(128, 128, 25600), d);
  CHECK(e == Approx(0.8 * 1.0 * fill(256)));
  // Without enough k to split, the lone tile uses one SM of 100.
  CHECK(gemm_efficiency(gemm(128, 128, 128), d) == Approx(0.8 * 0.01 * fill(128)));
}

// Roofline (Williams, Waterman, Patterson, CACM 2009): max(compute, memory) + launch.
TEST_CASE("compute: GEMM time is the roofline of FLOPs and bytes plus the launch", "[compute]") {
  const DeviceSpec d = round_gpu();
  // Compute-bound: 2*2560*1280*4096 FLOPs at 100 TFLOP/s x efficiency.
  const GemmAttrs big = gemm(2560, 1280, 4096);
  const double t = gemm_model_us(gemm_op(big), d);
  CHECK(t == Approx(2.0 * 2560 * 1280 * 4096 / (100e6 * gemm_efficiency(big, d)) + 1.0));
  // Memory-bound: a huge byte count dominates: bytes / (1000 GB/s = 1e6 B/us).
  CHECK(gemm_model_us(gemm_op(big, 1e10), d) == Approx(1e10 / 1e6 + 1.0));
}

TEST_CASE("compute: flash attention executes half the counted FLOPs under a causal mask", "[compute]") {
  const DeviceSpec d = round_gpu();
  Op op;
  op.kind = OpKind::attention_fwd;
  AttentionAttrs a;
  a.batch = 1;
  a.heads = 16;
  a.kv_heads = 16;
  a.sq = a.sk = 4096;
  a.head_dim = 128;
  a.causal = true;
  op.attrs = a;
  op.flops = 4.0 * 16 * 4096.0 * 4096.0 * 128;
  op.bytes = 1e6;
  const double causal = attention_model_us(op, d);
  CHECK(causal == Approx(0.5 * op.flops / (100e6 * 0.5) + 1.0));
  std::get<AttentionAttrs>(op.attrs).causal = false;
  CHECK(attention_model_us(op, d) - 1.0 == Approx(2 * (causal - 1.0)));
  op.kind = OpKind::attention_bwd;
  CHECK(attention_model_us(op, d) == Approx(op.flops / (100e6 * 0.4) + 1.0));
}

TEST_CASE("compute: memory-bound kernels stream their bytes at the sustained bandwidth", "[compute]") {
  DeviceSpec d = round_gpu();
  d.mem_efficiency = 0.8;
  Op op;
  op.kind = OpKind::layernorm_fwd;
  op.bytes = 8e8;
  op.flops = 1e6;
  CHECK(memory_bound_model_us(op, d) == Approx(8e8 / 0.8e6 + 1.0));
  // FLOP-heavy elementwise work is bound by the vector (fp32) peak instead.
  op.flops = 1e11;
  CHECK(memory_bound_model_us(op, d) == Approx(1e11 / 10e6 + 1.0));
  op.kind = OpKind::optimizer_step;
  op.flops = 0;
  CHECK(optimizer_model_us(op, d) == Approx(8e8 / 0.8e6 + 1.0));
}

TEST_CASE("compute: a CPU device has no waves: flat GEMM efficiency", "[compute]") {
  DeviceSpec d = round_gpu();
  d.kind = DeviceKind::cpu;
  d.sm_count = 1;
  d.gemm_tile_m = d.gemm_tile_n = 1;
  d.gemm_max_efficiency = 0.6;
  CHECK(gemm_efficiency(gemm(7, 13, 5), d) == Approx(0.6));
  CHECK(gemm_efficiency(gemm(4096, 4096, 4096), d) == Approx(0.6));
}

TEST_CASE("compute: every non-communication op kind has exactly one cost family", "[compute]") {
  Topology t;
  t.device = round_gpu();
  const ComputeModel m(t);  // throws on a missing or doubly registered kind
  CHECK(m.family(OpKind::gemm) == "gemm");
  CHECK(m.family(OpKind::attention_bwd) == "attention");
  CHECK(m.family(OpKind::softmax_fwd) == "memory_bound");
  CHECK(m.family(OpKind::optimizer_step) == "optimizer");
  CHECK(m.family(OpKind::collective).empty());
  Op comm;
  comm.kind = OpKind::collective;
  CHECK(m.duration_us(comm) == 0.0);
}

TEST_CASE("compute: calibration points override the model per shape", "[compute][calibration]") {
  Topology t;
  t.device = round_gpu();
  t.calibration.gemm.push_back(GemmPoint{1280, 1280, 4096, 1, MathMode::bf16, 500.0});
  t.calibration.kernels.push_back(KernelPoint{OpKind::layernorm_fwd, 1000000, 10.0});
  t.calibration.kernels.push_back(KernelPoint{OpKind::layernorm_fwd, 3000000, 30.0});
  const ComputeModel m(t);

  SECTION("an exact GEMM shape takes the measured time") {
    CHECK(m.duration_us(gemm_op(gemm(1280, 1280, 4096))) == 500.0);
  }
  SECTION("another shape scales the nearest point by the model's ratio") {
    const Op op = gemm_op(gemm(2560, 1280, 4096));
    const ProfileTable tab(t.calibration, t.device);
    const double ratio = tab.gemm_shape_model_us(gemm(2560, 1280, 4096)) / tab.gemm_shape_model_us(gemm(1280, 1280, 4096));
    CHECK(m.duration_us(op) == Approx(500.0 * ratio));
    CHECK(ratio > 1.5);
  }
  SECTION("another math mode falls back to the model") {
    GemmAttrs g = gemm(1280, 1280, 4096);
    g.math = MathMode::f32;
    const Op op = gemm_op(g);
    CHECK(m.duration_us(op) == Approx(m.model_us(op)));
  }
  SECTION("kernels: exact bytes, linear between points, scaled outside") {
    Op op;
    op.kind = OpKind::layernorm_fwd;
    op.bytes = 1000000;
    CHECK(m.duration_us(op) == 10.0);
    op.bytes = 2000000;
    CHECK(m.duration_us(op) == Approx(20.0));
    op.bytes = 6000000;
    const ProfileTable tab(t.calibration, t.device);
    CHECK(m.duration_us(op) == Approx(30.0 * tab.kernel_bytes_model_us(6e6) / tab.kernel_bytes_model_us(3e6)));
    op.kind = OpKind::gelu_fwd;  // no points for this kind: the model
    CHECK(m.duration_us(op) == Approx(m.model_us(op)));
  }
}

// exec/cuda/ops_gemm.cpp and fp8_quantize.cu: an FP8 linear GEMM first reads each bf16 operand
// for its amax, then again for its e4m3 copy, which it writes (5 bytes per operand element),
// in five launches; the GEMM itself runs at the FP8 peak. Attention GEMMs are not quantized.
TEST_CASE("compute: an FP8 linear GEMM pays its operands' quantization; other GEMMs do not", "[compute]") {
  DeviceSpec d = round_gpu();
  d.peak_tflops[math_index(MathMode::fp8)] = 200;
  GemmAttrs g = gemm(2560, 1280, 4096);
  g.role = GemmRole::linear_fwd;
  g.math = MathMode::fp8;
  const double flops = 2.0 * 2560 * 1280 * 4096;
  const double cast_us = (2560.0 * 4096 + 4096.0 * 1280) * 5.0 / 1e6 + 5 * 1.0;  // 1e6 B/us, 1 us launches
  const double t = gemm_model_us(gemm_op(g), d);
  CHECK(t == Approx(flops / (200e6 * gemm_efficiency(g, d)) + 1.0 + cast_us));
  // The same product in bf16 has no cast, at half the peak.
  GemmAttrs b = g;
  b.math = MathMode::bf16;
  CHECK(gemm_model_us(gemm_op(b), d) == Approx(flops / (100e6 * gemm_efficiency(b, d)) + 1.0));
  // Weight gradients and data gradients are linear too; attention's products are not.
  for (GemmRole r : {GemmRole::linear_dgrad, GemmRole::linear_wgrad}) {
    g.role = r;
    CHECK(gemm_model_us(gemm_op(g), d) == Approx(t));
  }
  g.role = GemmRole::attn_qk;
  CHECK(gemm_model_us(gemm_op(g), d) == Approx(t - cast_us));
}

// sim/compute/quantization.cpp: MXFP8 (OCP MX v1.0: e4m3, one e8m0 byte per 32) quantizes each
// operand in one pass, block scales from the block itself: 2 bytes read, 1 + 1/32 written, one
// launch per operand. NVFP4 (e2m1, one e4m3 byte per 16 and a tensor scale) keeps the amax
// pass: 2 read, then 2 read and 0.5 + 1/16 written, and the amax reset. Both at their own peaks.
TEST_CASE("compute: block-scaled MXFP8 and NVFP4 GEMMs at their peaks, with their quantization", "[compute]") {
  DeviceSpec d = round_gpu();
  d.peak_tflops[math_index(MathMode::fp8)] = 200;
  d.peak_tflops[math_index(MathMode::mxfp8)] = 200;
  d.peak_tflops[math_index(MathMode::nvfp4)] = 400;
  GemmAttrs g = gemm(2560, 1280, 4096);
  g.role = GemmRole::linear_fwd;
  const double flops = 2.0 * 2560 * 1280 * 4096, elems = 2560.0 * 4096 + 4096.0 * 1280;
  g.math = MathMode::mxfp8;
  const double mx_cast = elems * (3.0 + 1.0 / 32) / 1e6 + 2 * 1.0;
  const double mx = gemm_model_us(gemm_op(g), d);
  CHECK(mx == Approx(flops / (200e6 * gemm_efficiency(g, d)) + 1.0 + mx_cast));
  g.math = MathMode::nvfp4;
  const double nv_cast = elems * (2.0 + 2.5 + 1.0 / 16) / 1e6 + 5 * 1.0;
  const double nv = gemm_model_us(gemm_op(g), d);
  CHECK(nv == Approx(flops / (400e6 * gemm_efficiency(g, d)) + 1.0 + nv_cast));
  g.math = MathMode::fp8;
  const double fp8 = gemm_model_us(gemm_op(g), d);
  CHECK(mx < fp8);  // same peak, one pass instead of two
  CHECK(nv < mx);   // twice the peak
  g.role = GemmRole::attn_qk;  // attention is not quantized
  g.math = MathMode::nvfp4;
  CHECK(gemm_model_us(gemm_op(g), d) == Approx(nv - nv_cast));
}
