// paralab — GEMM cost: roofline of the math peak (at a shape-dependent efficiency) against the
// HBM traffic, plus the launch overhead and, for quantized linear layers (fp8, mxfp8, nvfp4),
// the quantization of both operands (docs/simulator.md, "GEMMs").
//
// A GPU GEMM kernel tiles C into tile_m x tile_n output tiles, one thread block each, and runs
// them in waves of sm_count blocks (one resident main-loop block per SM for the large cuBLAS
// tiles). The wave that is only partly full, and the padding of the edge tiles, are executed
// but useless: the fraction of the executed tile slots that holds useful work is
//     q = m n batch / (ceil(tiles / SMs) * SMs * tile_m * tile_n)
// (tile and wave quantization, NVIDIA "Matrix Multiplication Background User's Guide", 2023,
// sections "Tile Quantization" and "Wave Quantization"). cuBLAS chooses among several kernels
// per shape; we take the best of the topology's main tile, its transpose and the square tile of
// the smaller side. When a GEMM has fewer tiles than SMs, cuBLAS splits the k dimension
// (split-K) so that more SMs work: up to floor(SMs / tiles) slices, each at least
// kMinSplitK deep, whose fp32 partial results are written and summed (extra HBM traffic).
// Each tile first fills its software pipeline: cuBLAS's Ampere/Hopper kernels load k in slices
// of 32 with 3 stages (kernel names "..._32x3_..."), so about (stages - 1) * 32 = 64 of k pass
// before the tensor cores run at rate: factor k_tile / (k_tile + 64).
#include <algorithm>
#include <cmath>

#include "sim/compute/compute_model.hpp"
#include "sim/compute/quantization.hpp"

namespace paralab::sim {

namespace {

constexpr double kPipelineFillK = 64.0;   // (3 stages - 1) x 32-deep k slices
constexpr int64_t kMinSplitK = 256;       // split-K slices no shallower than this

struct GemmPlan {
  double efficiency = 0;  // of the math peak
  int64_t splits = 1;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

GemmPlan plan(const GemmAttrs& g, const DeviceSpec& dev) {
  GemmPlan best;
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return best;
  if (dev.kind == DeviceKind::cpu) {
    // A CPU core has no waves to quantize; blocked GEMMs reach a flat fraction of peak.
    best.efficiency = dev.gemm_max_efficiency;
    return best;
  }
  const int64_t sms = std::max<int64_t>(1, dev.sm_count);
  const int64_t tm0 = std::max<int64_t>(1, dev.gemm_tile_m), tn0 = std::max<int64_t>(1, dev.gemm_tile_n);
  const int64_t small = std::min(tm0, tn0);
  const int64_t cand[3][2] = {{tm0, tn0}, {tn0, tm0}, {small, small}};
  for (const auto& c : cand) {
    const int64_t tm = c[0], tn = c[1];
    const int64_t tiles = ceil_div(g.m, tm) * ceil_div(g.n, tn) * g.batch;
    int64_t splits = 1;
    if (tiles < sms) splits = std::clamp<int64_t>(sms / tiles, 1, std::max<int64_t>(1, g.k / kMinSplitK));
    const int64_t waves = ceil_div(tiles * splits, sms);
    const double q = static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.batch) *
                     static_cast<double>(splits) /
                     (static_cast<double>(waves) * static_cast<double>(sms) * static_cast<double>(tm) *
                      static_cast<double>(tn));
    const double k_tile = static_cast<double>(g.k) / static_cast<double>(splits);
    const double fill = k_tile / (k_tile + kPipelineFillK);
    const double eff = dev.gemm_max_efficiency * q * fill;
    if (eff > best.efficiency) best = {eff, splits};
  }
  return best;
}

double element_bytes(MathMode m) {
  if (const QuantFormat* f = quant_format(m)) return operand_bytes(*f);
  switch (m) {
    case MathMode::f32:
    case MathMode::tf32: return 4;
    default: return 2;
  }
}

// Quantized linear GEMMs (fp8, mxfp8, nvfp4) quantize both operands before the matmul, serial
// on the GEMM's stream (exec/cuda/fp8_quantize.cu for fp8; sim/compute/quantization.hpp).
// Attention GEMMs run in bf16 (ModelShape::attention_math), unquantized.
double cast_us(const GemmAttrs& g, const DeviceSpec& dev) {
  const QuantFormat* f = quant_format(g.math);
  if (!f || !is_linear(g.role)) return 0.0;
  const double b = static_cast<double>(g.batch);
  double t = amax_reset_us(*f, dev);
  for (const double elems : {static_cast<double>(g.m) * static_cast<double>(g.k) * b,
                             static_cast<double>(g.k) * static_cast<double>(g.n) * b})
    t += quantize_us(*f, elems, dev);
  return t;
}

}  // namespace

double gemm_efficiency(const GemmAttrs& g, const DeviceSpec& dev) { return plan(g, dev).efficiency; }

// Also used by the calibration table (shape-only model: operand bytes from the shape).
double gemm_shape_us(const GemmAttrs& g, double op_bytes, const DeviceSpec& dev) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return dev.launch_overhead_us;
  const GemmPlan p = plan(g, dev);
  const double m = static_cast<double>(g.m), n = static_cast<double>(g.n), k = static_cast<double>(g.k),
               b = static_cast<double>(g.batch);
  const double flops = 2.0 * m * n * k * b;
  const double t_compute = flops / (peak_flop_per_us(dev, g.math) * p.efficiency);
  const QuantFormat* qf = quant_format(g.math);
  const double in_b = element_bytes(g.math), out_b = qf ? qf->output_bytes : in_b;
  const double model_bytes = in_b == out_b ? (m * k + k * n + m * n) * b * in_b : ((m * k + k * n) * in_b + m * n * out_b) * b;
  double bytes = op_bytes > 0 ? op_bytes : model_bytes;
  if (p.splits > 1) bytes += 2.0 * static_cast<double>(p.splits) * m * n * b * 4.0;  // fp32 partials out and in
  const double t_memory = bytes / mem_bytes_per_us(dev);
  return std::max(t_compute, t_memory) + dev.launch_overhead_us + cast_us(g, dev);
}

double gemm_model_us(const Op& op, const DeviceSpec& dev) {
  const GemmAttrs* g = op.gemm();
  if (!g) return dev.launch_overhead_us;
  return gemm_shape_us(*g, op.bytes, dev);
}

}  // namespace paralab::sim
