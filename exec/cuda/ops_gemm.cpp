// paralab exec/cuda — GEMMs on cuBLASLt: the calls of gemm_plan.hpp with the IR's dtypes and
// fp32 accumulation (CUBLAS_COMPUTE_32F; _FAST_TF32 for tf32 training), the BIAS epilogue, the
// bias gradient against a ones vector, GQA sums through an fp32 scratch, and FP8 (e4m3,
// per-tensor current scaling with cuBLASLt's A/B scale pointers) on GPUs that have it.
#include <algorithm>
#include <array>
#include <string>

#include "exec/cuda/cuda_ops.hpp"
#include "ir/error.hpp"

namespace paralab::exec::cuda {

namespace {

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    case DType::fp8: return CUDA_R_8F_E4M3;
    default: break;
  }
  throw InternalError("gemm: dtype " + std::string(to_string(t)) + " has no cuBLAS type");
}

int64_t elem_bytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF:
    case CUDA_R_16F: return 2;
    default: return 1;
  }
}

}  // namespace

LtGemm::LtGemm(cudaStream_t stream, size_t workspace_bytes) : stream_(stream), ws_bytes_(workspace_bytes) {
  PARALAB_CUBLAS(cublasLtCreate(&handle_));
  if (ws_bytes_ > 0) PARALAB_CU(cudaMalloc(&ws_, ws_bytes_));
}

LtGemm::~LtGemm() {
  for (auto& [k, e] : cache_) {
    if (e.a) cublasLtMatrixLayoutDestroy(e.a);
    if (e.b) cublasLtMatrixLayoutDestroy(e.b);
    if (e.c) cublasLtMatrixLayoutDestroy(e.c);
    if (e.desc) cublasLtMatmulDescDestroy(e.desc);
  }
  if (ws_) cudaFree(ws_);
  if (handle_) cublasLtDestroy(handle_);
}

bool LtGemm::run(const LtCall& c) {
  const bool fp8 = c.a_t == CUDA_R_8F_E4M3;
  const uint32_t al_a = alignment(c.a, c.stride_a * elem_bytes(c.a_t), c.batch);
  const uint32_t al_b = alignment(c.b, c.stride_b * elem_bytes(c.b_t), c.batch);
  const uint32_t al_c = alignment(c.c, c.stride_c * elem_bytes(c.c_t), c.batch);
  const uint32_t al_bias = c.bias ? alignment(c.bias) : 0;
  const Key key{c.trans_a, c.trans_b, c.m, c.n, c.k, c.lda, c.ldb, c.ldc, c.batch, c.stride_a, c.stride_b, c.stride_c,
                static_cast<int>(c.a_t), static_cast<int>(c.c_t), static_cast<int>(c.compute),
                static_cast<int>(al_a), static_cast<int>(al_b), static_cast<int>(al_c), static_cast<int>(al_bias),
                c.beta != 0.0f ? 1 : 0};
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    Entry e;
    PARALAB_CUBLAS(cublasLtMatmulDescCreate(&e.desc, c.compute, CUDA_R_32F));
    const cublasOperation_t ta = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (c.bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      const int32_t bt = static_cast<int32_t>(c.c_t);
      PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
      PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
      PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias, sizeof c.bias));
    }
    if (fp8) {
      PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &c.a_scale, sizeof c.a_scale));
      PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &c.b_scale, sizeof c.b_scale));
    }
    PARALAB_CUBLAS(cublasLtMatrixLayoutCreate(&e.a, c.a_t, static_cast<uint64_t>(c.trans_a ? c.k : c.m),
                                              static_cast<uint64_t>(c.trans_a ? c.m : c.k), c.lda));
    PARALAB_CUBLAS(cublasLtMatrixLayoutCreate(&e.b, c.b_t, static_cast<uint64_t>(c.trans_b ? c.n : c.k),
                                              static_cast<uint64_t>(c.trans_b ? c.k : c.n), c.ldb));
    PARALAB_CUBLAS(cublasLtMatrixLayoutCreate(&e.c, c.c_t, static_cast<uint64_t>(c.m), static_cast<uint64_t>(c.n), c.ldc));
    if (c.batch > 1) {
      const int32_t bc = static_cast<int32_t>(c.batch);
      for (auto [layout, stride] : {std::pair{e.a, c.stride_a}, std::pair{e.b, c.stride_b}, std::pair{e.c, c.stride_c}}) {
        PARALAB_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        PARALAB_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                        sizeof stride));
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    PARALAB_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    // FP8: up to 8 candidates, tried in order if the call refuses one (see below).
    std::array<cublasLtMatmulHeuristicResult_t, 8> results{};
    const int wanted = fp8 ? static_cast<int>(results.size()) : 1;
    int found = 0;
    try {
      const uint64_t ws = ws_bytes_;
      PARALAB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
      PARALAB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
      PARALAB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
      PARALAB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
      PARALAB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
      const cublasStatus_t st =
          cublasLtMatmulAlgoGetHeuristic(handle_, e.desc, e.a, e.b, e.c, e.c, pref, wanted, results.data(), &found);
      if (st != CUBLAS_STATUS_SUCCESS && !(fp8 && st == CUBLAS_STATUS_NOT_SUPPORTED))
        throw_cublas(st, "cublasLtMatmulAlgoGetHeuristic(...)", __FILE__, __LINE__);
    } catch (...) {
      cublasLtMatmulPreferenceDestroy(pref);
      throw;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    for (int i = 0; i < found; ++i)
      if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) e.algos.push_back(results[static_cast<size_t>(i)].algo);
    e.ok = !e.algos.empty();
    if (!e.ok && fp8) {
      ++fp8_no_algo_;
      fp8_refused_shapes_.insert(fp8_shape(c));
    }
    it = cache_.emplace(key, e).first;
  }
  Entry& e = it->second;
  if (!e.ok) {
    if (fp8) return false;
    throw CallError("cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__,
                    "no cuBLASLt algorithm for m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" +
                        std::to_string(c.k) + " batch=" + std::to_string(c.batch) + " types " +
                        std::to_string(static_cast<int>(c.a_t)) + "/" + std::to_string(static_cast<int>(c.c_t)),
                    0);
  }
  if (c.bias) PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias, sizeof c.bias));
  if (fp8) {
    PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &c.a_scale, sizeof c.a_scale));
    PARALAB_CUBLAS(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &c.b_scale, sizeof c.b_scale));
  }
  const float alpha = 1.0f;
  // An FP8 call that does not accumulate reads no C: C is passed as nullptr, as XLA does since
  // CUDA 13.0's cuBLASLt refuses FP8 calls whose C and D are one pointer with two descriptors
  // (openxla/xla PR 34912); D is the output in place either way.
  const void* c_in = fp8 && c.beta == 0.0f ? nullptr : c.c;
  cublasStatus_t st =
      cublasLtMatmul(handle_, e.desc, &alpha, c.a, e.a, c.b, e.b, &c.beta, c_in, e.c, c.c, e.c, &e.algos[0], ws_, ws_bytes_, stream_);
  // The heuristic can offer an FP8 algorithm the call then refuses (nothing is enqueued): the
  // next candidate is tried, and a shape
  // none of them runs is remembered as one without FP8, so the caller falls back at once.
  while (fp8 && st == CUBLAS_STATUS_NOT_SUPPORTED) {
    e.algos.erase(e.algos.begin());
    if (e.algos.empty()) {
      e.ok = false;
      ++fp8_refused_;
      fp8_refused_shapes_.insert(fp8_shape(c));
      return false;
    }
    st = cublasLtMatmul(handle_, e.desc, &alpha, c.a, e.a, c.b, e.b, &c.beta, c_in, e.c, c.c, e.c, &e.algos[0], ws_,
                        ws_bytes_, stream_);
  }
  if (st != CUBLAS_STATUS_SUCCESS)
    throw_cublas(st, "cublasLtMatmul(handle_, e.desc, &alpha, c.a, e.a, c.b, e.b, &c.beta, c.c, ..., &e.algos[0], ...)",
                 __FILE__, __LINE__);
  return true;
}

void run_gemm(const OpCall& call, CudaOpContext& ctx) {
  const Op& op = call.op;
  const GemmAttrs& g = *op.gemm();
  const OpPlan& o = call.plan;
  const GemmPlan& plan = ctx.gemm_plans->at(op.id);
  const cudaStream_t s = ctx.stream();

  auto dtype_of = [&](Operand x) -> DType {
    switch (x) {
      case Operand::read0: return o.reads.at(0).dtype;
      case Operand::read1: return o.reads.at(1).dtype;
      case Operand::read2: return o.reads.at(2).dtype;
      case Operand::write0: return o.writes.at(0).dtype;
      case Operand::write1: return o.writes.at(1).dtype;
      case Operand::scratch: return DType::f32;
      case Operand::ones: return DType::f32;  // replaced below by the other input's type
    }
    return DType::f32;
  };
  std::unique_ptr<Scratch> scratch;
  if (plan.scratch_elems > 0) scratch = std::make_unique<Scratch>(plan.scratch_elems * 4, s);
  auto ptr_of = [&](Operand x) -> void* {
    switch (x) {
      case Operand::read0: return call.reads[0];
      case Operand::read1: return call.reads[1];
      case Operand::read2: return call.reads[2];
      case Operand::write0: return call.writes[0];
      case Operand::write1: return call.writes[1];
      case Operand::scratch: return scratch->get();
      case Operand::ones: return nullptr;
    }
    return nullptr;
  };

  const bool linear = is_linear(g.role);
  for (const BlasCall& bc : plan.calls) {
    DType at = dtype_of(bc.a), bt = dtype_of(bc.b);
    if (bc.a == Operand::ones) at = bt;
    if (bc.b == Operand::ones) bt = at;
    if (at != bt)
      throw InternalError("gemm " + op_label(op) + ": inputs in " + std::string(to_string(at)) + " and " +
                          std::string(to_string(bt)) + " (cuBLASLt needs one input type)");
    const DType ct = dtype_of(bc.c);
    std::unique_ptr<Scratch> ones;
    auto input = [&](Operand x, int64_t n_ones) -> void* {
      if (x != Operand::ones) return ptr_of(x);
      ones = std::make_unique<Scratch>(n_ones * bytes_of(at), s);
      dev::fill_constant(ones->get(), dt(at), n_ones, 1.0f, s);
      return ones->get();
    };
    const auto bytes = [](DType t, int64_t elems) { return elems * bytes_of(t); };
    LtCall lc;
    lc.trans_a = bc.trans_a, lc.trans_b = bc.trans_b;
    lc.m = bc.m, lc.n = bc.n, lc.k = bc.k, lc.lda = bc.lda, lc.ldb = bc.ldb, lc.ldc = bc.ldc, lc.batch = bc.batch;
    lc.stride_a = bc.stride_a, lc.stride_b = bc.stride_b, lc.stride_c = bc.stride_c;
    lc.a = static_cast<char*>(input(bc.a, plan.ones)) + bytes(at, bc.a_off);
    lc.b = static_cast<char*>(input(bc.b, plan.ones)) + bytes(bt, bc.b_off);
    lc.c = static_cast<char*>(ptr_of(bc.c)) + bytes(ct, bc.c_off);
    lc.a_t = lt_type(at), lc.b_t = lt_type(bt), lc.c_t = lt_type(ct);
    lc.compute = g.math == MathMode::tf32 && at == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    lc.beta = bc.beta;
    bool bias_kernel = false;
    if (bc.bias) {
      if (o.reads.at(2).dtype == ct) lc.bias = call.reads[2];
      else bias_kernel = true;  // the epilogue takes the bias in the output's type only
    }

    // FP8 (Transformer Engine's recipe for linear layers): e4m3 copies of both inputs in the
    // "TN" layout cuBLASLt requires, scaled by 448 / amax, with the inverse scales as A/B scale
    // pointers; outputs and accumulation stay in the IR's types. Attention GEMMs stay in bf16.
    bool done = false;
    // A shape whose FP8 call was refused before (with the bias epilogue and without) goes to bf16
    // at once, without quantizing its operands for nothing.
    auto refused = [&] {
      LtCall probe = lc;
      probe.a_t = probe.b_t = CUDA_R_8F_E4M3;
      if (!ctx.res.lt->fp8_refused(probe)) return false;
      probe.bias = nullptr;
      return ctx.res.lt->fp8_refused(probe);
    };
    // The bias gradient's sum (a ones operand) is never FP8; cuBLASLt's FP8 needs multiples of 16.
    const bool want_fp8 = g.math == MathMode::fp8 && linear && ctx.fp8 && bc.a != Operand::ones && bc.b != Operand::ones;
    const bool fp8_shape = bc.m % 16 == 0 && bc.n % 16 == 0 && bc.k % 16 == 0 && bc.batch == 1;
    if (want_fp8 && fp8_shape && !refused()) {
      float* amax = ScalarSlots::at<float>(ctx.res.scalars, ScalarSlots::kFp8Amax);  // [0] A, [1] B
      float* inv_a = ScalarSlots::at<float>(ctx.res.scalars, ScalarSlots::kFp8ScaleInvA);
      float* inv_b = ScalarSlots::at<float>(ctx.res.scalars, ScalarSlots::kFp8ScaleInvB);
      PARALAB_CU(cudaMemsetAsync(amax, 0, 2 * sizeof(float), s));
      Scratch qa(bc.m * bc.k, s), qb(bc.k * bc.n, s);
      const Fp8Layout lay = fp8_layout(bc);
      // cuBLAS A as stored is (trans_a ? k x m : m x k) column-major = its transpose row-major.
      const int64_t ar = bc.trans_a ? bc.m : bc.k, ac = bc.trans_a ? bc.k : bc.m;
      const int64_t br = bc.trans_b ? bc.k : bc.n, bcn = bc.trans_b ? bc.n : bc.k;
      dev::amax(lc.a, dt(at), ar, ac, bc.lda, amax + 0, s);
      dev::amax(lc.b, dt(bt), br, bcn, bc.ldb, amax + 1, s);
      dev::quantize_e4m3(lc.a, dt(at), ar, ac, bc.lda, lay.transpose_a, amax + 0, static_cast<uint8_t*>(qa.get()), inv_a, s);
      dev::quantize_e4m3(lc.b, dt(bt), br, bcn, bc.ldb, lay.transpose_b, amax + 1, static_cast<uint8_t*>(qb.get()), inv_b, s);
      LtCall q = lc;
      q.trans_a = true, q.trans_b = false;
      q.lda = bc.k, q.ldb = bc.k;
      q.a = qa.get(), q.b = qb.get();
      q.a_t = q.b_t = CUDA_R_8F_E4M3;
      q.compute = CUBLAS_COMPUTE_32F;
      q.a_scale = inv_a, q.b_scale = inv_b;
      done = ctx.res.lt->run(q);
      if (!done && q.bias) {
        // Without the BIAS epilogue (its own cache entry), the bias then added by our kernel.
        q.bias = nullptr;
        done = ctx.res.lt->run(q);
        if (done) {
          bias_kernel = true;
          if (ctx.fp8_bias_kernels) ctx.fp8_bias_kernels->fetch_add(1);
        }
      }
      if (!done && ctx.fp8_fallbacks) ctx.fp8_fallbacks->fetch_add(1);
    } else if (want_fp8 && ctx.fp8_fallbacks) {
      ctx.fp8_fallbacks->fetch_add(1);  // a shape FP8 cannot take, or one refused before: bf16
    }
    if (!done) ctx.res.lt->run(lc);
    if (bias_kernel)  // IR C is [call.n rows, call.m cols], rows contiguous (linear: ldc = cols)
      dev::add_bias_rows(lc.c, dt(ct), bc.n, bc.m, call.reads[2], dt(o.reads[2].dtype), s);
  }
  if (plan.scratch_elems > 0)  // GQA: the fp32 sums over a group's heads into d_qkv, one rounding
    dev::copy2d(scratch->get(), dev::T::f32, plan.scratch_cols, static_cast<char*>(call.writes[0]) + plan.scatter_col *
                bytes_of(o.writes[0].dtype), dt(o.writes[0].dtype), plan.scatter_ld, plan.scatter_rows, plan.scratch_cols,
                false, s);
}

}  // namespace paralab::exec::cuda
