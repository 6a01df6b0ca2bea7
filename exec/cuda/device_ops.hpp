// paralab exec/cuda — the CUDA backend's own small kernels (device_ops.cu): what maps IR views
// onto the kernels/ launchers (strided copies with dtype conversion, head packing for the fused
// attention, statistics interleaving), seeded fills, the cross-entropy stages the IR splits
// differently from kernels/, learned positions, flags and scalars of the optimizer step, the
// ring-attention merge and fp8 quantization. Plain C++ (no CUDA headers): every launcher is
// asynchronous on `stream`, every pointer a device pointer; launch errors throw
// kernels::CudaError (PARALAB_CUDA_CHECK_LAUNCH).
#pragma once

#include <cstdint>

#include "exec/fill_math.hpp"
#include "kernels/common.hpp"

namespace paralab::exec::cuda::dev {

// Storage types the device ops understand (the IR's DType values, as int).
enum class T : int32_t { f32 = 0, bf16 = 1, f16 = 2, fp8 = 3, i32 = 4, u8 = 5 };

// dst[r*dst_ld + c] = (accumulate ? dst : 0) + src[r*src_ld + c], in fp32, one rounding into dst.
void copy2d(const void* src, T src_t, int64_t src_ld, void* dst, T dst_t, int64_t dst_ld, int64_t rows,
            int64_t cols, bool accumulate, cudaStream_t stream);

// Heads stored in rows (i*batch + b) of a [T, ld] matrix at columns col0 + h*hstride ..+d  <->
// a packed [batch, heads, seq, d] tensor. unpack with accumulate adds (fp32, one rounding).
void pack_heads(const void* src, T src_t, int64_t ld, int64_t col0, int64_t hstride, void* dst, T dst_t,
                int64_t batch, int64_t heads, int64_t seq, int64_t d, cudaStream_t stream);
void unpack_heads(const void* src, T src_t, void* dst, T dst_t, int64_t ld, int64_t col0, int64_t hstride,
                  int64_t batch, int64_t heads, int64_t seq, int64_t d, bool accumulate, cudaStream_t stream);

// exec/fill.hpp's values: kind 0 weights, 1 moment1, 2 moment2, 3 poison (NaN), 4 token ids.
void fill(void* p, T t, int64_t n, int kind, uint64_t key, int64_t global_offset, int64_t vocab,
          cudaStream_t stream);
void fill_constant(void* p, T t, int64_t n, float value, cudaStream_t stream);
// p[i] = fillmath::param_value(geo, (local0 + i) / geo.cols, (local0 + i) % geo.cols), i < n:
// exec/fill.hpp's parameter values, made on the device (a 1B-parameter model's took 22 s on the host).
void fill_params(void* p, T t, int64_t n, const fillmath::ParamGeo& geo, int64_t local0, cudaStream_t stream);

// C[r, c] += bias[c] (when cuBLASLt's bias epilogue cannot take the bias dtype).
void add_bias_rows(void* c, T ct, int64_t rows, int64_t cols, const void* bias, T bt, cudaStream_t stream);

// out[r, c] += pos[r / batch + pos0, c]   (learned absolute positions, this tensor rank's rows)
void add_positions(void* out, T ot, const void* pos, T pt, int64_t rows, int64_t cols, int64_t batch,
                   int64_t pos0, cudaStream_t stream);
// dpos[i + pos0, c] += sum_b dout[i*batch + b, c] for i < rows / batch (fp32, one rounding)
void position_grad(void* dpos, T pt, const void* dout, T ot, int64_t rows, int64_t cols, int64_t batch,
                   int64_t pos0, cudaStream_t stream);

// IR xent_sum: ex[r, v] = exp(logit - max[r]) (fp32), sums[r] = (sum of ex, target logit or 0).
void xent_sum(const void* logits, T t, const float* row_max, const int32_t* labels, int64_t vocab_start,
              float* ex, float* sums, int64_t rows, int64_t vocab, cudaStream_t stream);
// IR xent_bwd: d[r, v] = (ex / sum - onehot) * g * (*scale), scale a device pointer or null (1):
// the dynamic fp16 loss scale, read on the device.
void xent_bwd(const float* ex, const float* sums, const int32_t* labels, int64_t vocab_start, float g,
              const float* scale, void* d, T t, int64_t rows, int64_t vocab, cudaStream_t stream);

// *flag = max(*flag, float(*found)).
void flag_max(float* flag, const int32_t* found, cudaStream_t stream);
// Optimizer scalars without a host round trip: found_out = (found_flag && *found_flag > 0);
// divisor = S / min(1, clip / (norm + 1e-6)), norm = sqrt(*norm_sq) / S (S = *loss_scale or 1;
// no clipping when norm_sq is null), so g * 1 / divisor = g * clip_coef / S.
void optimizer_scalars(const float* found_flag, const float* norm_sq, const float* loss_scale, double clip,
                       int32_t* found_out, float* divisor, cudaStream_t stream);
// Loss scaling: state->found_inf = *flag > 0 (LossScaleState layout of kernels/loss_scale.hpp).
void scaler_found(void* state, const float* flag, cudaStream_t stream);
// *acc += sum of x (double accumulator; one block, deterministic).
void accumulate_sum(double* acc, const float* x, int64_t n, cudaStream_t stream);

// Ring attention: prev = w0 prev + w1 out, lse = log(exp(lse) + exp(lse_blk)), per row of d.
void merge_attention(float* prev, const float* out, float* lse, const float* lse_blk, int64_t rows, int64_t d,
                     cudaStream_t stream);

// FP8 (e4m3, per-tensor current scaling): *amax = max |x| of an [rows, cols] (ld) matrix
// (amax must be zeroed first), then q = e4m3(x * 448 / amax), stored transposed ([cols, rows])
// when `transpose`, and *scale_inv = amax / 448 (the dequantization scale cuBLASLt takes).
void amax(const void* x, T t, int64_t rows, int64_t cols, int64_t ld, float* amax, cudaStream_t stream);
void quantize_e4m3(const void* x, T t, int64_t rows, int64_t cols, int64_t ld, bool transpose, const float* amax,
                   uint8_t* q, float* scale_inv, cudaStream_t stream);

}  // namespace paralab::exec::cuda::dev
