// paralab — the least-squares fits behind `paralab calibrate` (docs/calibration.md, "Fits").
//
// Every model here is linear in its unknowns, so each fit is a weighted linear least-squares
// problem solved with Eigen (column-pivoting Householder QR). Residuals are relative
// ((model - measured) / measured): samples spanning orders of magnitude (a 2 us kernel and a
// 20 ms GEMM) weigh alike, as a relative error is what `compare` reports. Physical
// coefficients (rates, latencies) are kept non-negative by the Lawson-Hanson active-set method
// (Lawson & Hanson, "Solving Least Squares Problems", 1974, ch. 23).
//
//   GEMM (per math mode)      t = c_call * batch + 2mnk*batch / R + c_pack (mk + kn) batch + c_store mn batch
//   streaming kernel          t = t0 + bytes / BW
//   collective / transfer     t = L + steps(kind, n) * alpha + wire(kind, n, N) / B      (alpha-beta, Hockney 1994)
//
// with steps and wire the ring algorithm's (Patarasuk & Yuan 2009; the simulator's closed
// forms in docs/network.md): all-reduce 2(n-1) steps and 2(n-1)/n N bytes per rank,
// all-gather and reduce-scatter (n-1) and (n-1)/n N, broadcast (n-1) and N, all-to-all 1 and
// (n-1)/n N, send/recv 1 and N.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/calibration.hpp"
#include "ir/dtype.hpp"
#include "ir/step_graph.hpp"

namespace paralab::calib {

struct LinearFit {
  std::vector<double> coef;    // one per feature
  std::vector<bool> clamped;   // held at 0 by the non-negativity constraint
  double rms_rel_error = 0;    // sqrt(mean(((X c - y) / y)^2))
  double max_rel_error = 0;
  int64_t samples = 0;
  [[nodiscard]] double predict(const std::vector<double>& x) const;
};

// Minimizes sum_i w_i ((x_i . c - y_i) / y_i)^2 over c (c >= 0 when `nonneg`; w_i = 1 when
// `w` is empty). Every row of `X` has the same length; every y_i > 0, w_i >= 0. Throws
// std::invalid_argument on bad input (no rows, ragged rows, y <= 0). Features that are zero in
// every row get coefficient 0. The reported errors are unweighted.
LinearFit relative_least_squares(const std::vector<std::vector<double>>& X, const std::vector<double>& y,
                                 bool nonneg = true, const std::vector<double>& w = {});

// ---- GEMMs -----------------------------------------------------------------------------------
// A GEMM's measured time is a sample of the fit as it is a point of the calibration.
using GemmSample = GemmPoint;

struct GemmFit {
  MathMode math = MathMode::f32;
  double call_us = 0;            // per (batched) matrix: dispatch, operand conversion setup
  double flop_per_us = 0;        // R, the rate of the multiply-add inner kernel
  double pack_us_per_elem = 0;   // per operand element (packing A and B panels, dtype conversion)
  double store_us_per_elem = 0;  // per output element (C read/write, epilogue)
  LinearFit fit;
  [[nodiscard]] double predict_us(int64_t m, int64_t n, int64_t k, int64_t batch) const;
  // Fraction of R the shape reaches: (2mnk batch / R) / predicted time.
  [[nodiscard]] double efficiency_vs_rate(int64_t m, int64_t n, int64_t k, int64_t batch) const;
};

// The samples of one math mode (others are ignored). Throws std::invalid_argument without any.
GemmFit fit_gemm(const std::vector<GemmSample>& samples, MathMode math);
std::vector<double> gemm_features(int64_t m, int64_t n, int64_t k, int64_t batch);

// ---- Streaming (memory-bound) kernels -------------------------------------------------------
struct StreamSample {
  std::string kind;  // op kind name ("layernorm_fwd", ...), or "" when fitting all together
  double bytes = 0;
  double time_us = 0;
};

struct StreamFit {
  double latency_us = 0;     // t0: dispatch + fixed cost
  double bytes_per_us = 0;   // BW (1 B/us = 1e-3 GB/s)
  LinearFit fit;
  [[nodiscard]] double predict_us(double bytes) const;
  [[nodiscard]] double gbps() const { return bytes_per_us * 1e-3; }
};

StreamFit fit_streaming(const std::vector<StreamSample>& samples);

// ---- Communication: alpha-beta on the ring closed forms ----------------------------------------
enum class CommPattern : uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv };
std::string_view to_string(CommPattern p);

// The pattern calibrate times a collective kind with.
CommPattern pattern_of(CollKind k);

struct CommSample {
  CommPattern pattern = CommPattern::all_reduce;
  int64_t group = 2;   // members
  double bytes = 0;    // per rank, as the IR counts them (docs/network.md, "API")
  double time_us = 0;
  double weight = 1;   // e.g. how often the calls of this size occur in the scenarios measured
};

// The ring algorithm's step count and bytes a rank puts on its link, and the bytes of input it
// combines (all-reduce, reduce-scatter: (n-1)/n of them, the reduce-scatter half of the ring,
// Patarasuk & Yuan, JPDC 69(2), 2009; sim/net's CollectiveSpec::reduce_gbps).
double comm_steps(CommPattern p, int64_t group);
double comm_wire_bytes(CommPattern p, int64_t group, double bytes);
double comm_reduced_bytes(CommPattern p, int64_t group, double bytes);

// t = L + steps x alpha + wire bytes / B + reduced bytes / R.
struct AlphaBetaFit {
  double launch_us = 0;            // L, once per call
  double step_us = 0;              // alpha, per algorithm step (link latency + software step)
  double bytes_per_us = 0;         // B, per rank's link
  double reduce_bytes_per_us = 0;  // R, the host's reduction; 0 = free (its coefficient fit to 0)
  LinearFit fit;
  [[nodiscard]] double predict_us(CommPattern p, int64_t group, double bytes) const;
  // The part of predict_us that moves bytes: wire bytes / B + reduced bytes / R (what a link's
  // efficiency and CollectiveSpec::reduce_gbps scale in the simulator).
  [[nodiscard]] double bytes_us(CommPattern p, int64_t group, double bytes) const;
  [[nodiscard]] double gbps() const { return bytes_per_us * 1e-3; }
  [[nodiscard]] double reduce_gbps() const { return reduce_bytes_per_us * 1e-3; }
};

// Weighted by CommSample::weight: calibrate weighs the sizes a scenario uses by how often it
// uses them, so the three parameters fit the calls that matter.
AlphaBetaFit fit_alpha_beta(const std::vector<CommSample>& samples);

}  // namespace paralab::calib
