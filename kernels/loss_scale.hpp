// kernels/loss_scale.hpp — dynamic loss scaling for fp16 mixed precision: overflow check,
// unscale, and the scale update state machine.
//
// Sources: Micikevicius et al. 2018, "Mixed Precision Training" (ICLR), Sec. 3.2 (loss
// scaling; skip the update on overflow); the dynamic algorithm exactly as in paralab's seed
// notes (shared/seeds/000, "Dynamic Scaling Algorithm"; also PyTorch's GradScaler):
//   init scale 2^16, growth_interval 2000, growth_factor 2.0, backoff_factor 0.5
//   found inf/NaN: scale *= backoff_factor, growth_tracker = 0, the step is skipped
//   otherwise:     growth_tracker += 1; if growth_tracker >= growth_interval:
//                  scale *= growth_factor, growth_tracker = 0
// One optimizer step with loss scaling, in the executor's order:
//   1. loss * scale before backward (the loss kernel's dloss_scale)
//   2. check_overflow (or unscale with found_inf) over every gradient buffer: ORs into
//      state.found_inf; then all-reduce MAX of found_inf over the data/model-parallel ranks
//   3. optimizer with loss_scale = &state.scale and found_inf = &state.found_inf (it unscales
//      in its grad multiplier and skips itself when found_inf != 0)
//   4. update_scale: applies the rule above and clears found_inf for the next step
// On CUDA the state lives in device memory and update_scale is a one-thread kernel, so the
// whole sequence runs without a host synchronization.
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

// Plain 20-byte struct: host memory for the CPU twins, device memory for CUDA.
struct LossScaleState {
  float scale = 65536.f;         // S, the current loss scale (2^16 initially)
  int32_t growth_tracker = 0;    // clean steps since the last scale change
  int32_t found_inf = 0;         // set (to 1) by check_overflow/unscale; cleared by update_scale
  int32_t last_step_skipped = 0; // 1 if the step just consumed by update_scale was skipped
  int32_t skipped_steps = 0;     // total skipped steps (for reports)
};

struct LossScaleConfig {
  float growth_factor = 2.f;
  float backoff_factor = 0.5f;
  int32_t growth_interval = 2000;
};

struct CheckOverflowArgs {
  const void* buf = nullptr;    // [n] dtype
  int64_t n = 0;
  Dtype dtype = Dtype::f32;
  int32_t* found_inf = nullptr; // set to 1 if any element is Inf or NaN; never cleared here
};

struct UnscaleArgs {
  void* buf = nullptr;          // [n] dtype, multiplied by 1/(*scale) in place
  int64_t n = 0;
  Dtype dtype = Dtype::f32;
  const float* scale = nullptr; // S (device scalar on CUDA), e.g. &state->scale
  int32_t* found_inf = nullptr; // optional: fused overflow check of the scaled values
};

void check_overflow_check(const CheckOverflowArgs& a);
void unscale_check(const UnscaleArgs& a);
void loss_scale_config_check(const LossScaleConfig& c);

void check_overflow_cpu(const CheckOverflowArgs& a);
void unscale_cpu(const UnscaleArgs& a);
// Applies the state machine to *state (host memory); returns true if the step was skipped.
bool update_scale_cpu(LossScaleState* state, const LossScaleConfig& cfg = {});

void check_overflow_cuda(const CheckOverflowArgs& a, cudaStream_t stream);
void unscale_cuda(const UnscaleArgs& a, cudaStream_t stream);
// state points to device memory; one-thread kernel, no host synchronization.
void update_scale_cuda(LossScaleState* state, const LossScaleConfig& cfg, cudaStream_t stream);

}  // namespace paralab::kernels
