// paralab — element types of tensors and the numeric precision of a training step.
#pragma once

#include <cstdint>
#include <string_view>

namespace paralab {

// Storage type of a tensor element.
enum class DType : uint8_t { f32, bf16, f16, fp8, i32, u8 };

// Arithmetic a GEMM runs in (selects the device peak it is costed against).
// mxfp8: e4m3 elements with one e8m0 scale per 32 (OCP Microscaling Formats v1.0, 2023);
// nvfp4: e2m1 elements with one e4m3 scale per 16 and a per-tensor fp32 scale (NVIDIA, "Introducing
// NVFP4", 2025). Both are Blackwell tensor-core modes (sim/compute/quantization.hpp).
enum class MathMode : uint8_t { f32, tf32, bf16, f16, fp8, mxfp8, nvfp4 };

// `training.precision`: what the step computes in. Mixed modes keep fp32 master weights.
enum class Precision : uint8_t { fp32, tf32, fp16, bf16, fp8, mxfp8, nvfp4 };

constexpr int64_t bytes_of(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::i32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::fp8: return 1;
    case DType::u8: return 1;
  }
  return 0;
}

std::string_view to_string(DType t);
std::string_view to_string(MathMode m);
std::string_view to_string(Precision p);

// Activation/weight storage type for a precision (fp8, mxfp8 and nvfp4 store bf16 and quantize
// per GEMM, as NVIDIA Transformer Engine does).
constexpr DType activation_dtype(Precision p) {
  switch (p) {
    case Precision::fp32:
    case Precision::tf32: return DType::f32;
    case Precision::fp16: return DType::f16;
    case Precision::bf16:
    case Precision::fp8:
    case Precision::mxfp8:
    case Precision::nvfp4: return DType::bf16;
  }
  return DType::f32;
}

constexpr MathMode gemm_math(Precision p) {
  switch (p) {
    case Precision::fp32: return MathMode::f32;
    case Precision::tf32: return MathMode::tf32;
    case Precision::fp16: return MathMode::f16;
    case Precision::bf16: return MathMode::bf16;
    case Precision::fp8: return MathMode::fp8;
    case Precision::mxfp8: return MathMode::mxfp8;
    case Precision::nvfp4: return MathMode::nvfp4;
  }
  return MathMode::f32;
}

// Mixed precision keeps an fp32 master copy of the weights in the optimizer state.
constexpr bool is_mixed(Precision p) {
  return p != Precision::fp32 && p != Precision::tf32;
}

// The linear layers' GEMMs quantize their operands (fp8, mxfp8, nvfp4); attention stays bf16.
constexpr bool is_quantized(MathMode m) { return m == MathMode::fp8 || m == MathMode::mxfp8 || m == MathMode::nvfp4; }

}  // namespace paralab
