// kernels/rng.hpp — the counter-based random stream of paralab's dropout masks.
//
// Generator: Philox4x32-10, Salmon, Moraes, Dror & Shaw 2011, "Parallel Random Numbers: As
// Easy as 1, 2, 3" (SC'11), Sec. 3: a 10-round bijection of a 128-bit counter under a
// 64-bit key, implemented here from the paper (multipliers 0xD2511F53 / 0xCD9E8D57, Weyl key
// increments 0x9E3779B9 / 0xBB67AE85); tested against Random123's known-answer vectors.
// It is a pure function, so CPU and GPU produce bit-identical streams.
//
// Dropout stream: element g (a 64-bit position, g = offset + element index) uses
//   word (g mod 4) of philox4x32_10(counter = {lo32(g/4), hi32(g/4), 0, 0},
//                                   key = {lo32(seed), hi32(seed)})
// and is DROPPED iff word < threshold, threshold = floor(p * 2^32) (p = 1 drops all).
// Keep probability is 1 - threshold/2^32, i.e. 1 - p to within 2^-32. The executor gives
// every dropout call of a step a disjoint [offset, offset + n) range (or a different seed).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/dtype.hpp"  // PARALAB_HD

namespace paralab::kernels {

struct Philox4 {
  uint32_t v[4];
};

PARALAB_HD uint32_t mulhi_u32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return uint32_t((uint64_t(a) * uint64_t(b)) >> 32);
#endif
}

// Philox4x32 with 10 rounds; ctr and key as in the paper (and Random123's KAT files).
PARALAB_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                 uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // key schedule: bump before every round but the first
      k0 += kW0;
      k1 += kW1;
    }
    const uint32_t hi0 = mulhi_u32(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = mulhi_u32(kM1, c2), lo1 = kM1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// The four random words of dropout counter block q (elements 4q .. 4q+3 of the stream).
PARALAB_HD Philox4 dropout_block(uint64_t seed, uint64_t q) {
  return philox4x32_10(uint32_t(q), uint32_t(q >> 32), 0u, 0u, uint32_t(seed),
                       uint32_t(seed >> 32));
}

// The random word of stream position g (convenience for tests and scalar code).
PARALAB_HD uint32_t dropout_word(uint64_t seed, uint64_t g) {
  return dropout_block(seed, g >> 2).v[g & 3u];
}

// Drop iff word < dropout_threshold(p). p in [0, 1]; computed in double on the host and
// passed to kernels as an integer, so every backend draws the same mask.
inline uint64_t dropout_threshold(float p) {
  if (!(p > 0.f)) return 0;
  if (p >= 1.f) return uint64_t(1) << 32;
  return uint64_t(std::floor(double(p) * 4294967296.0));
}

// Inverted-dropout scale of kept elements, 1/(1-p) (Srivastava et al. 2014, "Dropout",
// JMLR 15, applied at training time as in PyTorch); 0 when p = 1 (nothing is kept).
inline float dropout_scale(float p) { return p < 1.f ? float(1.0 / (1.0 - double(p))) : 0.f; }

}  // namespace paralab::kernels
