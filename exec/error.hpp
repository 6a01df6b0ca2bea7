// paralab exec — errors of the executor. Every failure names the rank it happened on and the
// cause; the command line prints it and makes every rank exit non-zero (docs/executor.md,
// "Failure handling"). Library code never exits: it throws these.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace paralab::exec {

class ExecError : public std::runtime_error {
 public:
  ExecError(int64_t rank, const std::string& cause)
      : std::runtime_error("rank " + std::to_string(rank) + ": " + cause), rank_(rank), cause_(cause) {}
  [[nodiscard]] int64_t rank() const { return rank_; }
  [[nodiscard]] const std::string& cause() const { return cause_; }

 private:
  int64_t rank_;
  std::string cause_;
};

// An op waited longer than the watchdog allows (a lost message, a peer that is stuck or a
// schedule that deadlocks). The message names the op, its stream and what it waits for.
class WatchdogError : public ExecError {
 public:
  using ExecError::ExecError;
};

// The run was abandoned because another stream of this rank failed first; the first error is
// the one reported.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

}  // namespace paralab::exec
