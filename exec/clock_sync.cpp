// paralab exec — Cristian's clock-offset estimate (see clock_sync.hpp).
#include "exec/clock_sync.hpp"

#include <string>

#include "ir/error.hpp"

namespace paralab::exec {

ClockOffset cristian_offset(const std::vector<ClockSample>& samples) {
  if (samples.empty()) throw InternalError("cristian_offset: no clock samples");
  const ClockSample* best = nullptr;
  for (const ClockSample& s : samples) {
    const double rtt = s.back_us - s.sent_us;
    if (!(rtt >= 0))
      throw InternalError("cristian_offset: a round trip ends before it starts (" + std::to_string(s.sent_us) +
                          " -> " + std::to_string(s.back_us) + " us)");
    if (!best || rtt < best->back_us - best->sent_us) best = &s;
  }
  const double mid = 0.5 * (best->sent_us + best->back_us);
  return ClockOffset{best->peer_us - mid, 0.5 * (best->back_us - best->sent_us)};
}

}  // namespace paralab::exec
