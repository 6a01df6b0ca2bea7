// paralab exec — one clock for all ranks: the offset of a rank's step clock against rank 0's.
//
// Every rank starts its step clock when it leaves a world barrier. On a quiet machine the ranks
// leave within microseconds of each other, but on a loaded host (more ranks than cores) a rank
// may be descheduled for milliseconds between the barrier and reading its clock, and across
// nodes nothing ties the clocks together. Op times of different ranks (a send and its receive,
// the members of a collective, the step's first start and last end) are compared only after
// each rank's times are moved onto rank 0's clock by the offset estimated here.
#pragma once

#include <vector>

namespace paralab::exec {

// This rank's clock minus rank 0's at the same instant (µs), and a bound on the estimate's
// error (µs): rank 0's reading of an event this rank timed at t is t - offset_us, within
// ±error_us.
struct ClockOffset {
  double offset_us = 0;
  double error_us = 0;
};

// One ping-pong between rank 0 and a peer, in the clocks that read them: rank 0's clock when
// it sent (sent_us), the peer's clock when it answered (peer_us), rank 0's clock when the
// answer arrived (back_us).
struct ClockSample {
  double sent_us = 0;
  double peer_us = 0;
  double back_us = 0;
};

// Cristian's estimate (F. Cristian, "Probabilistic clock synchronization", Distributed
// Computing 3(3), 1989): the peer read its clock somewhere within [sent, back] of rank 0's, so
// offset = peer - (sent + back) / 2 with |error| <= (back - sent) / 2. Of several samples the
// one with the shortest round trip bounds the error best (a descheduled peer or a slow wake-up
// only lengthens a round trip). Throws InternalError on no samples or a negative round trip.
[[nodiscard]] ClockOffset cristian_offset(const std::vector<ClockSample>& samples);

// Round trips per peer: enough that one of them meets both sides running on a host with more
// ranks than cores (docs/executor.md, "Clocks").
inline constexpr int kClockSyncRounds = 24;

}  // namespace paralab::exec
