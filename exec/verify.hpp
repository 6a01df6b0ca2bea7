// paralab exec — `--verify`: evidence that a run computed what the IR says.
//  * every collective kind on every communicator of the job, on rank-dependent integer-valued
//    data (exact in fp32 and bf16), compared with the exact expected values;
//  * the collective sequence of each communicator is the same on all its members (otherwise
//    the step would deadlock or mismatch);
//  * a sample of ops (the first of each kind/role/name, then every k-th) against naive
//    double-precision references written from docs/ir.md, independent of the backend's code;
//  * NaN poisoning of every buffer that should be written before it is read, and after the
//    step no NaN/Inf in any resident buffer; data-parallel replicas hold equal weights where
//    the strategy keeps them equal.
// Deadlock freedom of the pipeline schedules is shown by the watchdog (exec/runtime.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/backend.hpp"
#include "exec/runtime.hpp"

namespace paralab::exec {

struct VerifyReport {
  struct Category {
    int64_t passed = 0, total = 0;
    double max_error = 0;  // largest normalized error seen (references) or 0 (exact checks)
  };
  std::map<std::string, Category> categories;
  std::vector<std::string> failures;  // first few messages, each naming the rank

  void add(const std::string& category, bool ok, double error, const std::string& failure_message);
  void merge(const VerifyReport& other);
  [[nodiscard]] int64_t total() const;
  [[nodiscard]] int64_t failed() const;
  [[nodiscard]] nlohmann::json to_json() const;
  static VerifyReport from_json(const nlohmann::json& j);
};

// Sequence of collectives on each communicator equal on all members; throws ExecError if not.
void check_collective_sequences(const RankPlan& plan, const std::vector<GroupComm*>& comms);

// Self-check of every collective kind and of point-to-point transfers on each communicator.
void check_collectives(Backend& backend, const RankPlan& plan, const std::vector<GroupComm*>& comms,
                       double watchdog_s, VerifyReport& report);

// Spot-checks sampled ops against references (thread-safe; used as the runtime's observer).
class OpChecker final : public OpObserver {
 public:
  OpChecker(const RankPlan& plan, Backend& backend, int64_t every = 25);
  bool wants(const Op& op) override;
  void before(const OpCall& call) override;
  void after(const OpCall& call) override;
  [[nodiscard]] VerifyReport report() const;

 private:
  struct Snapshot {
    std::vector<std::vector<double>> reads, writes;
  };
  const RankPlan& plan_;
  Backend& backend_;
  std::vector<char> sampled_;
  mutable std::mutex mu_;
  std::map<OpId, Snapshot> snaps_;
  VerifyReport report_;
};

// After a step: resident buffers finite; data-parallel replicas equal where they should be.
void check_after_step(const Runtime& rt, Backend& backend, const RankPlan& plan,
                      const std::vector<GroupComm*>& comms, VerifyReport& report);

}  // namespace paralab::exec
