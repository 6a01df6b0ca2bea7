// paralab — which processors a rank's compute shares, and with what (semantics in core_share.hpp).
#include "sim/engine/core_share.hpp"

#include <algorithm>

namespace paralab::sim {

CoreShare::CoreShare(const StepIR& ir) {
  const Topology& topo = ir.scenario.topology;
  const Layout& L = ir.layout;
  const CollectiveSpec& c = topo.collectives;
  const bool comm_holds = c.intra_sms > 0 || c.inter_sms > 0 || c.p2p_sms > 0;
  sms_ = std::max<int64_t>(1, topo.device.sm_count);
  if (topo.device.kind != DeviceKind::cpu) {
    mode_ = comm_holds ? Mode::sms : Mode::none;
    return;
  }
  // A rank is node * devices_per_node + local device (ir/layout.hpp).
  const int64_t dpn = std::max<int64_t>(1, L.devices_per_node());
  const int64_t most = std::min(dpn, L.world());
  // Ranks that need more cores than the node has share them (mpirun(1), "Mapping, Ranking,
  // and Binding": an oversubscribed job is not bound).
  if (topo.node.cores > 0 && most * sms_ > topo.node.cores) {
    mode_ = Mode::node_cores;
    cores_ = topo.node.cores;
    nodes_ = (L.world() + dpn - 1) / dpn;
    const auto stages = static_cast<size_t>(L.pp());
    node_of_stage_.resize(stages);
    ranks_on_node_.assign(stages, 0);
    for (size_t s = 0; s < stages; ++s) node_of_stage_[s] = L.node_of(L.representative(static_cast<int64_t>(s)));
    for (int64_t r = 0; r < L.world(); ++r) {
      const auto s = static_cast<size_t>(L.stage_of(r));
      if (L.node_of(r) == node_of_stage_[s]) ++ranks_on_node_[s];
    }
    return;
  }
  mode_ = comm_holds ? Mode::rank_cores : Mode::none;
}

// rank_cores: a communication thread moving data is one more runnable thread on the rank's
// cores, and the scheduler shares them fairly: compute runs at cores / (cores + busy
// communication threads), the "ideal, precise multi-tasking CPU" of Linux's fair scheduler
// (Documentation/scheduler/sched-design-CFS.rst; EEVDF keeps its fair share,
// sched-eevdf.rst).
double CoreShare::rate(int64_t held) const {
  held = std::max<int64_t>(0, held);
  switch (mode_) {
    case Mode::sms: return static_cast<double>(std::max<int64_t>(1, sms_ - held)) / static_cast<double>(sms_);
    case Mode::rank_cores: return static_cast<double>(sms_) / static_cast<double>(sms_ + held);
    case Mode::none:
    case Mode::node_cores: return 1.0;
  }
  return 1.0;
}

}  // namespace paralab::sim
