// paralab exec/cpu — a caching host allocator: freed blocks are kept by size and handed out
// again, so that after a training step's first pass every allocation of the next is served
// without the C library or the kernel.
//
// Why: a step allocates and frees the same buffers every step (activations, gradients in
// flight, scratch), many above glibc's mmap threshold (128 KiB at first). Served by malloc each
// one is a fresh mmap whose pages fault in on first touch (the kernel zeroes them), and its
// free unmaps them again: measured steps then pay page faults inside ops and system time
// between them, by an amount that depends on the process's allocation history (glibc's dynamic
// thresholds), so a step measured in a fresh `execute` differed from the same step measured
// after a calibration's sweep. GPU frameworks do the same for device memory (PyTorch's caching
// allocator); this is its host twin. Blocks are 64-byte aligned (AVX-512 loads), sizes rounded
// to 64 B, or to 4 KiB pages from 64 KiB up, so that near sizes share blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace paralab::exec::cpu {

class BlockCache {
 public:
  BlockCache() = default;
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // A block of at least `bytes` (>= 1), 64-byte aligned. Throws std::bad_alloc. Thread-safe.
  void* allocate(int64_t bytes);
  // Returns a block from allocate() to the cache. Thread-safe.
  void deallocate(void* p);

  [[nodiscard]] int64_t cached_bytes() const;  // held in the cache, not in use
  [[nodiscard]] int64_t reused() const;        // allocations served from the cache

  [[nodiscard]] static size_t rounded(int64_t bytes);

 private:
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // rounded size -> free blocks
  std::unordered_map<void*, size_t> size_of_;  // every block we own
  int64_t cached_ = 0, reused_ = 0;
};

}  // namespace paralab::exec::cpu
