// paralab — time to train a token budget when failures interrupt the run: checkpoints, restarts
// and the work lost between them (docs/goodput.md). From the step's time and the scenario's
// [reliability] section, with Daly's model of the expected wall time and his optimum interval.
//
//   J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9),
//   1974: tau_Y = sqrt(2 delta M).
//   J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
//   FGCS 22(3), 2006: T_w(tau) = M e^{R/M} (e^{(tau + delta)/M} - 1) T_s / tau, optimum
//   tau_D = sqrt(2 delta M) [1 + (1/3) sqrt(delta / 2M) + (1/9) (delta / 2M)] - delta for
//   delta < 2M, else M.
// M: the job's mean time between failures; delta: a checkpoint's write time; R: a restart's
// time (restart_s plus reading the checkpoint); T_s: the failure-free solve time.
#pragma once

#include <cstdint>

#include "ir/scenario.hpp"

namespace paralab {

struct Goodput {
  double tokens = 0;
  double solve_s = 0;             // T_s: the budget at the step's throughput, no failures
  double wall_s = 0;              // T_w: expected, with checkpoints, failures and restarts
  double goodput = 0;             // T_s / T_w
  double mtbf_s = 0;              // M
  double failures = 0;            // expected interruptions: T_w / M
  double checkpoint_bytes = 0;    // model states saved: parameters x (weights + master + optimizer)
  double checkpoint_write_s = 0;  // delta
  double restart_s = 0;           // R
  double interval_s = 0;          // tau used (the scenario's, or Daly's optimum)
  double interval_young_s = 0, interval_daly_s = 0;
  bool interval_optimal = true;   // tau is Daly's optimum
};

// Bytes of one checkpoint of `s`'s model: every unique parameter with its weight in the storage
// type, its fp32 master copy (mixed precision) and its optimizer state (Adam: 2 x fp32; SGD: 1),
// Rajbhandari et al. 2020 (ZeRO), Sec. 3.1.
double checkpoint_bytes(const Scenario& s, int64_t parameters);

// Daly's expected wall time for solve time `solve_s` at interval `tau_s` (s).
double daly_wall_s(double solve_s, double tau_s, double delta_s, double restart_s, double mtbf_s);
double young_interval_s(double delta_s, double mtbf_s);
double daly_interval_s(double delta_s, double mtbf_s);

// The goodput of training `tokens` at `step_s` per step of `s` (whose model has `parameters`).
// Throws ConfigError (key reliability.*) when no failure rate is given.
Goodput goodput(const Scenario& s, double step_s, int64_t parameters, double tokens);

}  // namespace paralab
