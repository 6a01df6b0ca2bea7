// paralab exec/cpu — the CPU backend's memory-bound ops (docs/ir.md, "Memory-bound kernels"):
// the typed loads, stores and accumulation every family shares, and the kernel table built from
// the families (kernel_families.hpp: norm_ops.cpp, pointwise_ops.cpp, token_ops.cpp,
// optimizer_ops.cpp). The kernels' arguments, the IR's conventions, are exec/kernel_args.hpp's,
// shared with the CUDA backend.
#include "exec/cpu/kernel_families.hpp"

namespace paralab::exec::cpu {

void load_f32(const void* p, DType t, int64_t n, float* out) {
  switch (t) {
    case DType::f32: std::memcpy(out, p, static_cast<size_t>(n) * 4); return;
    case DType::bf16: {
      const auto* h = static_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) out[i] = kernels::bf16_bits_to_f32(h[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = load(p, t, i);
  }
}

void store_f32(void* p, DType t, int64_t n, const float* in) {
  switch (t) {
    case DType::f32: std::memcpy(p, in, static_cast<size_t>(n) * 4); return;
    case DType::bf16: {
      auto* h = static_cast<uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) h[i] = kernels::f32_to_bf16_bits(in[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) store(p, t, i, in[i]);
  }
}

void add_into(void* dst, DType t, int64_t n, const float* src, bool accumulate) {
  if (t == DType::f32) {
    auto* d = static_cast<float*>(dst);
    if (accumulate)
      for (int64_t i = 0; i < n; ++i) d[i] += src[i];
    else
      std::memcpy(d, src, static_cast<size_t>(n) * 4);
    return;
  }
  if (t == DType::bf16) {  // the dtype's own loop: the generic one switches on the dtype per element
    auto* h = static_cast<uint16_t*>(dst);
    if (accumulate)
      for (int64_t i = 0; i < n; ++i) h[i] = kernels::f32_to_bf16_bits(kernels::bf16_bits_to_f32(h[i]) + src[i]);
    else
      for (int64_t i = 0; i < n; ++i) h[i] = kernels::f32_to_bf16_bits(src[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) store(dst, t, i, (accumulate ? load(dst, t, i) : 0.0f) + src[i]);
}

void accumulate_into(void* dst, const void* src, DType t, int64_t n) {
  switch (t) {
    case DType::f32:
      add_into(dst, t, n, static_cast<const float*>(src), true);
      return;
    case DType::bf16: {
      auto* d = static_cast<uint16_t*>(dst);
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i)
        d[i] = kernels::f32_to_bf16_bits(kernels::bf16_bits_to_f32(d[i]) + kernels::bf16_bits_to_f32(s[i]));
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) store(dst, t, i, load(dst, t, i) + load(src, t, i));
  }
}

const CpuKernelTable& kernel_table() {
  static const CpuKernelTable table("CPU", {add_norm_ops, add_pointwise_ops, add_token_ops, add_optimizer_ops});
  return table;
}

void run_kernel(const OpCall& call, CpuContext& ctx) { kernel_table().run(call, ctx); }

}  // namespace paralab::exec::cpu
