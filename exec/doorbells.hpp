// paralab exec — doorbells: a host's ranks wake each other's sleeping communication pollers.
//
// The MPI transport's wait busy-polls a pending call for 0.5 ms and then sleeps between tests
// (exec/mpi/mpi_transport.cpp, wait_all), because a poller past that window would take a core
// from its own rank's compute thread for as long as the peer is late. A sleeper, though, only
// sees its peer arrive at its next test, and every round of the transfer after it waits for
// that sleeper's next test again, so a call's time would depend on which member came first.
//
// A doorbell is a word in memory the host's processes share, one per (rank of the host, group
// slot). A member entering a call of a group rings the bells of the group's other members on
// the host; a poller past its spin window sleeps on its own bell (a futex, at most the sleep it
// would have taken anyway), so a ring wakes it at once, and it then polls as a member that had
// just arrived. Peers on other hosts ring nothing: their members sleep and test as before.
//
// Group slots: a communicator's slot is the index of its creation (MPI_Comm_split is collective
// over the world, so every rank counts alike) modulo kGroupSlots. Two groups that share a slot
// only wake each other's pollers for nothing; every wake-up tests its requests again.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace paralab::exec {

class Doorbells {
 public:
  static constexpr int kMaxLocalRanks = 256;
  static constexpr int kGroupSlots = 8;

  // One bell: a ring counter a sleeper waits on, and how many sleep on it now (so a ring makes
  // the system call only when someone sleeps). 64 bytes each, so that a ring touches no other
  // bell's line when the memory is line-aligned; padded, not alignas(64): MPI guarantees a
  // shared window no more than 8-byte alignment (Open MPI's was 8 past a line: UBSan).
  struct Bell {
    std::atomic<uint32_t> rung;
    std::atomic<uint32_t> sleepers;
    char pad[56];
  };
  static_assert(sizeof(Bell) == 64 && alignof(Bell) == 4, "a bell is 64 bytes of 4-byte words");
  static_assert(std::atomic<uint32_t>::is_always_lock_free, "futexes need plain 32-bit words");

  static constexpr size_t kSharedBytes = sizeof(Bell) * kMaxLocalRanks * kGroupSlots;

  // `shared`: kSharedBytes of zeroed memory mapped by every process of the host; `local_ranks`
  // 1 to kMaxLocalRanks. Throws std::invalid_argument otherwise.
  Doorbells(void* shared, int local_ranks);

  // The bell of host rank `local_rank` (0-based) for group slot `slot` (any int: taken modulo
  // kGroupSlots).
  [[nodiscard]] Bell& bell(int local_rank, int slot) const;

  // Wakes whoever sleeps on `b` now, and makes a sleeper about to sleep on it return at once.
  static void ring(Bell& b);
  // The ring count to hand to sleep(): read it before the test that found nothing done.
  [[nodiscard]] static uint32_t heard(const Bell& b) { return b.rung.load(); }
  // Sleeps on `b` until it is rung after `heard` was read, at most timeout_us. True when it
  // was rung (a peer arrived), false when the time ran out.
  static bool sleep(Bell& b, uint32_t heard, int64_t timeout_us);

 private:
  Bell* bells_;
  int local_ranks_;
};

// Whether a host's ranks ring doorbells: on (the default) or off (pollers sleep on a timer
// alone; for comparisons). The command line reads it once,
// from PARALAB_DOORBELLS (on | off), and hands it to the transport (make_mpi_transport).
struct DoorbellMode {
  bool on = true;

  // `value` as PARALAB_DOORBELLS gives it (null or empty: on). Throws ConfigError naming the
  // variable, the value and what is allowed.
  static DoorbellMode parse(const char* value);
  // parse(PARALAB_DOORBELLS): for a command line's edge, once (the only place that names it).
  static DoorbellMode from_environment();
};

// What one member's communicator rings and sleeps on: its own bell, and the bells of the
// group's other members on its host. Empty (mine null) without doorbells.
struct GroupBells {
  Doorbells::Bell* mine = nullptr;
  std::vector<Doorbells::Bell*> peers;

  void ring_peers() const {
    for (Doorbells::Bell* p : peers) Doorbells::ring(*p);
  }
};

}  // namespace paralab::exec
