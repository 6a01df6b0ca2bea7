// paralab exec/cpu — shared helpers of the CPU backend's ops: typed access to IR views in
// their storage dtype (f32, bf16, f16; int32 ids; uint8 masks) with fp32 compute, a per-stream
// scratch arena, and the context an op runs in (rank plan, model shape, loss-scale state).
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

#include "exec/backend.hpp"
#include "ir/model_shape.hpp"
#include "kernels/dtype.hpp"
#include "kernels/loss_scale.hpp"

namespace paralab::exec::cpu {

inline float load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return kernels::bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::f16: return kernels::f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::i32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case DType::u8:
    case DType::fp8: return static_cast<float>(static_cast<const uint8_t*>(p)[i]);
  }
  return 0;
}

inline void store(void* p, DType t, int64_t i, float x) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = x; break;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = kernels::f32_to_bf16_bits(x); break;
    case DType::f16: static_cast<uint16_t*>(p)[i] = kernels::f32_to_f16_bits(x); break;
    case DType::i32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(x); break;
    case DType::u8:
    case DType::fp8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(x); break;
  }
}

// n contiguous elements to/from fp32.
void load_f32(const void* p, DType t, int64_t n, float* out);
void store_f32(void* p, DType t, int64_t n, const float* in);
// dst[i] (+)= src[i] in dst's dtype, computing in fp32.
void add_into(void* dst, DType t, int64_t n, const float* src, bool accumulate);
// dst[i] += src[i], both n elements of dtype t, computing in fp32 (what load_f32 then add_into
// give, bit for bit, without the fp32 copy: a ZeRO gradient shard's accumulation).
void accumulate_into(void* dst, const void* src, DType t, int64_t n);

// Reusable fp32 buffers of one stream (each stream has one worker, so no locking). Pointers
// from get() stay valid until the same slot is asked for with a larger size. (Plain vectors:
// no Eigen type crosses this header, so translation units built with different vector flags
// never free each other's Eigen allocations.)
class Scratch {
 public:
  float* get(int slot, int64_t n) {
    if (static_cast<size_t>(slot) >= bufs_.size()) bufs_.resize(static_cast<size_t>(slot) + 1);
    auto& b = bufs_[static_cast<size_t>(slot)];
    if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
    return b.data();
  }

 private:
  std::deque<std::vector<float>> bufs_;
};

struct CpuContext {
  const RankPlan& plan;
  const ModelShape& shape;
  const Scenario& scenario;
  Scratch& scratch;
  kernels::LossScaleState& scaler;
};

// Op implementations (one file each).
void run_gemm(const OpCall& call, CpuContext& ctx);
void run_attention(const OpCall& call, CpuContext& ctx);
void run_kernel(const OpCall& call, CpuContext& ctx);
void run_comm(const OpCall& call, CpuContext& ctx, GroupComm& comm);

}  // namespace paralab::exec::cpu
