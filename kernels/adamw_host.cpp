// kernels/adamw_host.cpp — the AdamW step on the host's cores, for optimizer offload: the CPU
// twin's arithmetic (adamw.hpp) over contiguous slices of [0, n), one per thread. Elements are
// independent, so the result is bit-identical to adamw_step_cpu for any thread count
// (ZeRO-Offload's CPU-Adam parallelizes the same way: Ren et al. 2021, Sec. 5.1).
#include <algorithm>
#include <thread>
#include <vector>

#include "kernels/adamw.hpp"

namespace paralab::kernels {

namespace detail {
void adamw_range(const AdamWArgs& a, int64_t begin, int64_t end);  // adamw_cpu.cpp
}

void adamw_step_host(const AdamWArgs& a, int threads) {
  adamw_check(a);
  if (threads < 1) detail::fail_arg("adamw_step_host", "threads", std::to_string(threads), "must be >= 1");
  if (a.found_inf && *a.found_inf != 0) return;  // overflow this step: skip the update
  // Slices of at least 64 Ki elements (~1.8 MB streamed): a thread costs ~10-50 us to start.
  constexpr int64_t kMinSlice = int64_t{1} << 16;
  const int64_t parts = std::clamp<int64_t>(a.n / kMinSlice, 1, threads);
  if (parts == 1) {
    detail::adamw_range(a, 0, a.n);
    return;
  }
  const int64_t per = (a.n + parts - 1) / parts;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(parts - 1));
  for (int64_t p = 1; p < parts; ++p)
    pool.emplace_back([&a, p, per] { detail::adamw_range(a, p * per, std::min(a.n, (p + 1) * per)); });
  detail::adamw_range(a, 0, std::min(a.n, per));
  for (std::thread& t : pool) t.join();
}

}  // namespace paralab::kernels
