// paralab exec/cuda — how an IR GEMM (docs/ir.md, "GEMMs") becomes cuBLAS calls. Pure planning,
// no CUDA: the CPU tests run the same plan through a host interpreter of cuBLAS's semantics and
// compare it with the CPU backend's GEMMs on random matrices.
//
// cuBLAS is column-major. A row-major matrix X (r x c, row stride ld) read column-major is
// X^T (c x r, same ld), so the IR's row-major C[M,N] = op(A)[M,K] op(B)[K,N] is issued as the
// column-major C^T[N,M] = op(B)^T op(A)^T: cuBLAS's A is the IR's B (transa = trans_b), cuBLAS's
// B is the IR's A (transb = trans_a), m = N, n = M, k = K, and every leading dimension is the
// row stride of the IR view.
//
// Attention GEMMs (unfused path) work on per-head matrices inside the qkv / ctx buffers (rows =
// (position, batch entry), docs/ir.md) and on [b a/t, s, s] score planes. For a fixed batch
// entry b_idx and a fixed head-within-group j, the heads g * (a/g) + j of all groups g sit at a
// constant stride in every operand (d columns per group in qkv, a/g * d columns in ctx, a/g
// planes in the scores), so each (b_idx, j) is one strided-batched GEMM over the groups: b * a/g
// calls per op (b calls for plain multi-head attention). GQA's dV and dK sum over the heads of a
// group: those calls accumulate (beta = 1 after the first) into an fp32 scratch laid out like the
// V (or K) columns of d_qkv, which is then copied into d_qkv with one rounding (as the CPU
// backend rounds once); with one head per group they write d_qkv directly.
//
// Linear bias: cuBLASLt's BIAS epilogue (one value per column-major row = per IR column).
// Bias gradient (linear_wgrad with bias): a second GEMM dbias[1,N] (+)= ones[1,K] op(B)[K,N] in
// fp32, i.e. the column sums of dY, with the weight gradient's beta: added to the main gradient
// when the GEMM accumulates (beta = 1), written otherwise (beta = 0; the CPU backend likewise).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/model_shape.hpp"
#include "ir/step_graph.hpp"

namespace paralab::exec::cuda {

// Which buffer an operand of a cuBLAS call is.
enum class Operand : uint8_t { read0, read1, read2, write0, write1, scratch, ones };

// One column-major strided-batched GEMM, cuBLAS conventions:
//   for i in [0, batch): C_i = op(A_i) op(B_i) + beta C_i   (+ bias[row] if bias)
//   X_i = X + x_off + i * stride_x (elements of the operand's dtype); op(A_i) is m x k.
struct BlasCall {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  Operand a = Operand::read0, b = Operand::read1, c = Operand::write0;
  int64_t a_off = 0, lda = 0, stride_a = 0;
  int64_t b_off = 0, ldb = 0, stride_b = 0;
  int64_t c_off = 0, ldc = 0, stride_c = 0;
  int64_t batch = 1;
  float beta = 0.0f;
  bool bias = false;  // + read2[row] (BIAS epilogue)
};

struct GemmPlan {
  std::vector<BlasCall> calls;
  // GQA dV/dK: the calls write Operand::scratch, fp32 [T, scratch_cols]; afterwards it is
  // copied (one rounding) into write0 at column scatter_col of rows with stride scatter_ld.
  int64_t scratch_elems = 0, scratch_cols = 0;
  int64_t scatter_rows = 0, scatter_col = 0, scatter_ld = 0;
  // Operand::ones: a vector of `ones` ones in the dtype of the call's other input.
  int64_t ones = 0;
};

// Plans the op (a gemm). Throws InternalError on shapes the IR does not produce.
GemmPlan plan_gemm(const Op& op, const ModelShape& m);

// Host interpreter of a plan's exact cuBLAS semantics, fp32 everywhere (the test oracle):
// `ops[Operand]` are fp32 host arrays (read0.., write0, scratch, ones), C computed in place.
void run_plan_on_host(const GemmPlan& plan, const std::vector<float*>& ops);

// FP8 GEMMs (cuBLASLt on Hopper/Ada) need cuBLAS's A transposed and B not ("TN"): which
// operands must be copied transposed when they are quantized.
struct Fp8Layout {
  bool transpose_a = false, transpose_b = false;
};
Fp8Layout fp8_layout(const BlasCall& c);

std::string describe(const BlasCall& c);

}  // namespace paralab::exec::cuda
