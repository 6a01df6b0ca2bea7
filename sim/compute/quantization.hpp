// paralab — the low-precision GEMM formats the compute model knows: how many bytes an element
// and its scales take, and what quantizing a bf16 operand into the format costs before the
// matmul (docs/simulator.md, "Low precision"). One row per format (quantization.cpp); a new
// format is a row, not a branch.
#pragma once

#include <cstdint>

#include "ir/dtype.hpp"
#include "ir/topology.hpp"

namespace paralab::sim {

struct QuantFormat {
  MathMode math = MathMode::fp8;
  double element_bytes = 1;   // stored bytes per element
  int64_t block = 0;          // elements sharing one scale (0: one scale per tensor)
  double scale_bytes = 0;     // bytes per block scale
  bool tensor_amax = true;    // a per-tensor amax pass precedes the copy (current scaling)
  double output_bytes = 1;    // bytes per output element in the GEMM's traffic
};

// The format of a quantized math mode; nullptr for the others (fp32, tf32, bf16, fp16).
const QuantFormat* quant_format(MathMode m);

// Stored bytes per element of an operand in `f`, scales included.
double operand_bytes(const QuantFormat& f);

// Time to quantize one bf16 operand of `elements` elements into `f` on `dev` (us): the amax pass
// when the format has a per-tensor scale (2 bytes read per element), then the scaled copy (2
// read, the element and its share of a block scale written). The zeroing of the amax slots is
// once per GEMM: amax_reset_us.
double quantize_us(const QuantFormat& f, double elements, const DeviceSpec& dev);
double amax_reset_us(const QuantFormat& f, const DeviceSpec& dev);

}  // namespace paralab::sim
