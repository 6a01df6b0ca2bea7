// paralab exec/cpu — the caching host allocator (block_cache.hpp).
#include "exec/cpu/block_cache.hpp"

#include <cstdlib>
#include <new>

namespace paralab::exec::cpu {

size_t BlockCache::rounded(int64_t bytes) {
  const size_t n = static_cast<size_t>(bytes < 1 ? 1 : bytes);
  constexpr size_t kLine = 64, kPage = 4096, kPageFrom = 64 * 1024;
  return n >= kPageFrom ? (n + kPage - 1) / kPage * kPage : (n + kLine - 1) / kLine * kLine;
}

void* BlockCache::allocate(int64_t bytes) {
  const size_t n = rounded(bytes);
  {
    std::lock_guard lk(mu_);
    auto it = free_.find(n);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= static_cast<int64_t>(n);
      ++reused_;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, n);
  if (!p) throw std::bad_alloc();
  std::lock_guard lk(mu_);
  size_of_[p] = n;
  return p;
}

void BlockCache::deallocate(void* p) {
  if (!p) return;
  std::lock_guard lk(mu_);
  auto it = size_of_.find(p);
  if (it == size_of_.end()) {  // not ours: a programming error, but never leak or double-free
    std::free(p);
    return;
  }
  free_[it->second].push_back(p);
  cached_ += static_cast<int64_t>(it->second);
}

int64_t BlockCache::cached_bytes() const {
  std::lock_guard lk(mu_);
  return cached_;
}

int64_t BlockCache::reused() const {
  std::lock_guard lk(mu_);
  return reused_;
}

BlockCache::~BlockCache() {
  // The cached blocks only. A block still in use belongs to the runtime, as a malloc'ed one
  // would: after a failure with transfers in flight it keeps them on purpose
  // (exec/runtime.cpp), and freeing them here could hand an MPI transfer freed memory.
  for (auto& [n, blocks] : free_)
    for (void* p : blocks) std::free(p);
}

}  // namespace paralab::exec::cpu
