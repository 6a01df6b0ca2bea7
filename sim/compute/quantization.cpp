// paralab — the low-precision formats' table and quantization costs (quantization.hpp).
#include "sim/compute/quantization.hpp"

#include <array>

#include "sim/compute/compute_model.hpp"

namespace paralab::sim {

namespace {

// fp8: e4m3 with one fp32 scale per tensor from a current amax (Transformer Engine's
//   "current scaling" recipe, as exec/cuda/fp8_quantize.cu runs it). The output counted at one
//   byte per element is the model's convention for FP8 GEMMs, whose time is compute-bound at
//   every shape of a training step.
// mxfp8: e4m3 elements, one e8m0 scale (1 byte) per 32 along the reduction dimension (OCP
//   Microscaling Formats (MX) Specification v1.0, 2023, Sec. 5); the block's scale comes from
//   the block itself, so no tensor-wide pass (Transformer Engine, "MXFP8" recipe on Blackwell).
// nvfp4: e2m1 elements (half a byte), one e4m3 scale per 16 and one fp32 scale per tensor
//   (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference", 2025;
//   NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149, 2025, Sec. 2),
//   hence an amax pass as for fp8. Its training recipe's random Hadamard transforms and
//   stochastic rounding of gradients are not modeled.
constexpr std::array<QuantFormat, 3> kFormats = {{
    {MathMode::fp8, 1.0, 0, 0.0, true, 1.0},
    {MathMode::mxfp8, 1.0, 32, 1.0, false, 2.0},
    {MathMode::nvfp4, 0.5, 16, 1.0, true, 2.0},
}};

}  // namespace

const QuantFormat* quant_format(MathMode m) {
  for (const QuantFormat& f : kFormats)
    if (f.math == m) return &f;
  return nullptr;
}

double operand_bytes(const QuantFormat& f) {
  return f.element_bytes + (f.block > 0 ? f.scale_bytes / static_cast<double>(f.block) : 0.0);
}

double quantize_us(const QuantFormat& f, double elements, const DeviceSpec& dev) {
  const double amax = f.tensor_amax ? streaming_us(2.0 * elements, 0.0, dev) : 0.0;
  return amax + streaming_us((2.0 + operand_bytes(f)) * elements, 0.0, dev);
}

double amax_reset_us(const QuantFormat& f, const DeviceSpec& dev) {
  return f.tensor_amax ? streaming_us(0.0, 0.0, dev) : 0.0;
}

}  // namespace paralab::sim
