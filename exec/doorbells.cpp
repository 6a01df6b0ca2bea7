// paralab exec — doorbells over futexes in host-shared memory (exec/doorbells.hpp says why).
#include "exec/doorbells.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "exec/futex.hpp"
#include "ir/error.hpp"

namespace paralab::exec {

DoorbellMode DoorbellMode::parse(const char* value) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "on") return {true};
  if (v == "off") return {false};
  throw ConfigError(SourceLoc{"environment", 0, 0}, "PARALAB_DOORBELLS", v, "not a doorbell mode", "on or off");
}

DoorbellMode DoorbellMode::from_environment() { return parse(std::getenv("PARALAB_DOORBELLS")); }

Doorbells::Doorbells(void* shared, int local_ranks) : bells_(static_cast<Bell*>(shared)), local_ranks_(local_ranks) {
  if (!shared) throw std::invalid_argument("Doorbells: no shared memory");
  if (local_ranks < 1 || local_ranks > kMaxLocalRanks)
    throw std::invalid_argument("Doorbells: " + std::to_string(local_ranks) + " ranks on a host, allowed 1-" +
                                std::to_string(kMaxLocalRanks));
}

Doorbells::Bell& Doorbells::bell(int local_rank, int slot) const {
  if (local_rank < 0 || local_rank >= local_ranks_)
    throw std::out_of_range("Doorbells: host rank " + std::to_string(local_rank) + " of " + std::to_string(local_ranks_));
  const int s = ((slot % kGroupSlots) + kGroupSlots) % kGroupSlots;
  return bells_[static_cast<size_t>(local_rank) * kGroupSlots + static_cast<size_t>(s)];
}

// The ring and the sleep are the two sides of a store-load pattern (both sequentially
// consistent, C++20 [atomics.order]): the ringer bumps `rung` and then reads `sleepers`, the
// sleeper bumps `sleepers` and then the kernel reads `rung` against `heard`. At least one of
// them sees the other's write: either the ringer sees a sleeper and wakes it, or the futex
// finds `rung` moved and returns at once.
void Doorbells::ring(Bell& b) {
  b.rung.fetch_add(1);
  if (b.sleepers.load() > 0) futex_wake(&b.rung);
}

bool Doorbells::sleep(Bell& b, uint32_t heard, int64_t timeout_us) {
  b.sleepers.fetch_add(1);
  futex_wait(&b.rung, heard, timeout_us * 1000);
  b.sleepers.fetch_sub(1);
  return b.rung.load() != heard;
}

}  // namespace paralab::exec
