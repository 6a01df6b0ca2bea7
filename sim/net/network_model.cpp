// paralab — the network model: calls -> cached patterns -> flows on the max-min solver.
#include "sim/net/network_model.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>

#include "ir/error.hpp"
#include "sim/net/collective.hpp"
#include "sim/net/flow_solver.hpp"
#include "sim/net/invariants.hpp"
#include "sim/net/pattern.hpp"
#include "sim/net/routing.hpp"

namespace paralab::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A call shape: everything a pattern depends on except the byte count and the algorithm.
struct ShapeView {
  CollKind kind;
  GroupKind group;
  bool sym;
  std::span<const int64_t> members;
};
struct ShapeKey {
  CollKind kind;
  GroupKind group;
  bool sym;
  std::vector<int64_t> members;
};
struct ShapeHash {
  using is_transparent = void;
  static size_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
  }
  size_t operator()(const ShapeView& k) const {
    uint64_t h = mix(static_cast<uint64_t>(k.kind) * 31 + static_cast<uint64_t>(k.group),
                     k.sym ? 1 : 0);
    for (int64_t m : k.members) h = mix(h, static_cast<uint64_t>(m));
    return h;
  }
  size_t operator()(const ShapeKey& k) const {
    return (*this)(ShapeView{k.kind, k.group, k.sym, k.members});
  }
};
struct ShapeEq {
  using is_transparent = void;
  static ShapeView view(const ShapeKey& k) { return {k.kind, k.group, k.sym, k.members}; }
  static ShapeView view(const ShapeView& k) { return k; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    const ShapeView x = view(a), y = view(b);
    return x.kind == y.kind && x.group == y.group && x.sym == y.sym &&
           std::equal(x.members.begin(), x.members.end(), y.members.begin(), y.members.end());
  }
};

struct Shape {
  ShapeKey key;
  int64_t nodes = 0;                 // distinct nodes among the members
  std::vector<int32_t> pattern;      // per registry entry; -1 = not built yet
  std::vector<std::vector<int64_t>> copies;  // [0] = representative; filled on first build
};

struct Active {
  uint64_t handle = 0;
  const Pattern* pat = nullptr;
  double bytes = 0;
  uint32_t phase = 0;       // the phase whose flows run (or whose latency is being paid)
  uint32_t flows_left = 0;
};

struct Timer {
  double t_us;
  uint64_t seq;
  uint32_t slot;
  bool operator>(const Timer& o) const { return t_us != o.t_us ? t_us > o.t_us : seq > o.seq; }
};

}  // namespace

Topology network_view(const Topology& topo, const Layout& layout) {
  Topology t = topo;
  const int64_t host = topo.node.devices_per_node, node = layout.devices_per_node();
  if (node > host && node % host == 0) t.node.nics_per_node = topo.node.nics_per_node * (node / host);
  t.node.devices_per_node = node;
  t.node.nvlink_domain_gpus = 0;
  return t;
}

namespace {

int64_t nodes_for(const Topology& topo, const Layout& layout) {
  if (layout.devices_per_node() != topo.node.devices_per_node)
    throw InternalError("NetworkModel: layout has " + std::to_string(layout.devices_per_node()) +
                        " devices per node, topology '" + topo.name + "' has " +
                        std::to_string(topo.node.devices_per_node));
  return (layout.world() + layout.devices_per_node() - 1) / layout.devices_per_node();
}

// What a call pays once before its first phase, in us: the launch latency (a transfer's own:
// CollectiveSpec::p2p_launch_us), and on a host that reduces in software
// (CollectiveSpec::reduce_gbps) the reduction arithmetic: every rank combines (n-1)/n of the
// buffer it was given (the reduce-scatter half of a ring all-reduce, Patarasuk & Yuan, JPDC
// 69(2), 2009; recursive halving and trees combine no less), serially with its copies on a CPU
// host.
double call_overhead_us(const CollectiveSpec& c, const CommRequest& req) {
  if (req.kind == CollKind::p2p) return c.p2p_launch_us();
  const double n = static_cast<double>(req.members.size());
  const double launch_us = c.launch_lat_us;
  if (c.reduce_gbps <= 0 || n < 2 || (req.kind != CollKind::all_reduce && req.kind != CollKind::reduce_scatter))
    return launch_us;
  return launch_us +
         (n - 1) / n * static_cast<double>(std::max<int64_t>(req.bytes, 0)) / (c.reduce_gbps * 1e3);  // 1 GB/s = 1e3 B/us
}

// The global NICs a [[variation.link]] entry names.
std::vector<int64_t> nics_of(const TopologyGraph& g, const LinkVariation& l) {
  if (l.node < 0 || l.node >= g.nodes() || g.nics_per_node() == 0 || l.nic >= g.nics_per_node())
    throw InternalError("NetworkModel: no such NIC to degrade (node " + std::to_string(l.node) + ")");
  std::vector<int64_t> out;
  for (int64_t n = 0; n < g.nics_per_node(); ++n)
    if (l.nic < 0 || l.nic == n) out.push_back(l.node * g.nics_per_node() + n);
  return out;
}

std::vector<double> capacities(const TopologyGraph& g, const std::vector<LinkVariation>& links) {
  std::vector<double> cap;
  cap.reserve(g.links().size());
  for (const Link& l : g.links()) cap.push_back(l.bw_gbps * 1e3);  // 1 GB/s = 1e3 bytes/us
  for (const LinkVariation& l : links)
    for (int64_t gnic : nics_of(g, l)) {
      cap[g.nic_to_leaf(gnic)] *= l.bandwidth_fraction;
      cap[g.leaf_to_nic(gnic)] *= l.bandwidth_fraction;
    }
  return cap;
}

Router router_for(const TopologyGraph& g, const std::vector<LinkVariation>& links) {
  Router r(g);
  for (const LinkVariation& l : links)
    if (l.bandwidth_fraction == 0)
      for (int64_t gnic : nics_of(g, l)) r.set_down(gnic);
  return r;
}

}  // namespace

struct NetworkModel::Impl {
  Impl(const Topology& t, const Layout& l, CollectiveAlgo f, const std::vector<LinkVariation>& nics)
      : topo(t),
        layout(l),
        forced(f),
        graph(t, nodes_for(t, l)),
        router(router_for(graph, nics)),
        cap(capacities(graph, nics)),
        solver(cap),
        compiler(router, cap) {}

  Topology topo;
  Layout layout;
  CollectiveAlgo forced;
  TopologyGraph graph;
  Router router;
  std::vector<double> cap;
  FlowSolver solver;
  PatternCompiler compiler;

  std::unordered_map<ShapeKey, uint32_t, ShapeHash, ShapeEq> shape_index;  // lookups only
  std::vector<Shape> shapes;
  std::vector<std::unique_ptr<Pattern>> patterns;  // stable: flows point into them

  std::vector<Active> actives;
  std::vector<uint32_t> free_actives;
  size_t live = 0;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers;
  uint64_t timer_seq = 0;
  std::vector<const FlowTemplate*> flow_tmpl;  // by solver flow id
  std::vector<uint64_t> pending;                // finished while start() moved time forward
  std::vector<FinishedFlow> fin;
  uint64_t next_handle = 1;
  double now = 0;
  CommStats st;

  Shape& shape_of(const CommRequest& req);
  void build_copies(Shape& s);
  const Pattern& pattern(Shape& s, size_t entry);
  size_t choose(Shape& s, const CommRequest& req);
  void run_until(double t, std::vector<uint64_t>& out);
  void fire(uint32_t slot, std::vector<uint64_t>& out);
  void phase_done(uint32_t slot, std::vector<uint64_t>& out);
  void on_finished(std::vector<uint64_t>& out);
};

Shape& NetworkModel::Impl::shape_of(const CommRequest& req) {
  const ShapeView view{req.kind, req.group, req.symmetric_copies, req.members};
  auto it = shape_index.find(view);
  if (it != shape_index.end()) return shapes[it->second];
  if (req.members.empty()) throw InternalError("NetworkModel: a call needs members");
  for (int64_t r : req.members)
    if (r < 0 || r >= layout.world())
      throw InternalError("NetworkModel: rank " + std::to_string(r) + " outside the layout");
  Shape s;
  s.key = ShapeKey{req.kind, req.group, req.symmetric_copies, req.members};
  std::vector<int64_t> nodes;
  for (int64_t r : req.members) nodes.push_back(layout.node_of(r));
  std::sort(nodes.begin(), nodes.end());
  s.nodes = std::unique(nodes.begin(), nodes.end()) - nodes.begin();
  s.pattern.assign(algorithm_registry().size(), -1);
  shapes.push_back(std::move(s));
  shape_index.emplace(shapes.back().key, static_cast<uint32_t>(shapes.size() - 1));
  return shapes.back();
}

void NetworkModel::Impl::build_copies(Shape& s) {
  // Which instances the layout repeats (docs/network.md, "Symmetric copies"); [0] = this one.
  const std::vector<int64_t>& rep = s.key.members;
  s.copies = {rep};
  if (!s.key.sym) return;
  const GroupKind g = s.key.group;
  if (g == GroupKind::tp || g == GroupKind::cp || g == GroupKind::dp) {
    // Every group of this kind in the stage, member i mapped by its position in the group.
    std::vector<int64_t> idx;
    for (int64_t r : rep) {
      idx.push_back(layout.index_in_group(g, r));
      if (layout.member_at(g, rep[0], idx.back()) != r) return;  // not one group: no copies
    }
    for (const auto& grp : layout.groups_in_stage(g, layout.stage_of(rep[0]))) {
      if (grp[idx[0]] == rep[0]) continue;
      std::vector<int64_t> copy;
      for (int64_t i : idx) copy.push_back(grp[i]);
      s.copies.push_back(std::move(copy));
    }
  } else if (g == GroupKind::pp || g == GroupKind::embd || g == GroupKind::mp) {
    // Groups spanning stages repeat over the coordinates they do not span: every (tp, cp, dp)
    // translate for pp and embd (stage-to-stage transfers, tied-embedding gradients), every
    // (cp, dp) translate for mp (which already spans tp). Translating along a coordinate the
    // group spans would only permute it (a double count), so those stay fixed.
    const Coord c0 = layout.coord(rep[0]);
    const int64_t nt = g == GroupKind::mp ? 1 : layout.tp();
    for (int64_t d = 0; d < layout.dp(); ++d)
      for (int64_t c = 0; c < layout.cp(); ++c)
        for (int64_t t = 0; t < nt; ++t) {
          const int64_t dt = g == GroupKind::mp ? 0 : t - c0.tp;
          if (dt == 0 && c == c0.cp && d == c0.dp) continue;
          std::vector<int64_t> copy;
          for (int64_t r : rep) {
            Coord x = layout.coord(r);
            x.tp = (x.tp + dt + layout.tp()) % layout.tp();
            x.cp = (x.cp - c0.cp + c + layout.cp()) % layout.cp();
            x.dp = (x.dp - c0.dp + d + layout.dp()) % layout.dp();
            copy.push_back(layout.rank(x));
          }
          s.copies.push_back(std::move(copy));
        }
  }
  // world: the one instance.
}

const Pattern& NetworkModel::Impl::pattern(Shape& s, size_t entry) {
  if (s.pattern[entry] < 0) {
    if (s.copies.empty()) build_copies(s);
    const AlgoEntry& e = algorithm_registry()[entry];
    BuildContext ctx(s.key.members, graph, router, topo.collectives.step_lat_us);
    const LogicalPattern logical = e.build(ctx);
    patterns.push_back(std::make_unique<Pattern>(compiler.compile(logical, e.id, s.copies)));
    s.pattern[entry] = static_cast<int32_t>(patterns.size() - 1);
    ++st.patterns;
  }
  return *patterns[static_cast<size_t>(s.pattern[entry])];
}

size_t NetworkModel::Impl::choose(Shape& s, const CommRequest& req) {
  const CollectiveAlgo algo = req.algo != CollectiveAlgo::automatic ? req.algo : forced;
  if (algo != CollectiveAlgo::automatic) return find_algorithm(req.kind, algo);
  const size_t ring = find_algorithm(req.kind, CollectiveAlgo::ring);
  if (s.nodes <= 1) return ring;  // NCCL: rings inside a node
  const size_t tree = find_algorithm(req.kind, CollectiveAlgo::tree);
  if (tree == ring) return ring;  // only all-reduce has a tree
  const double bytes = static_cast<double>(req.bytes);
  if (topo.collectives.tree_max_bytes > 0) return bytes <= topo.collectives.tree_max_bytes ? tree : ring;
  // NCCL's tuner: the smaller of latency + bytes / bandwidth per algorithm, here from the
  // patterns compiled on this topology (docs/network.md, "Automatic choice").
  const double t_ring = pattern(s, ring).isolated_us(bytes);
  const double t_tree = pattern(s, tree).isolated_us(bytes);
  return t_tree < t_ring ? tree : ring;
}

void NetworkModel::Impl::fire(uint32_t slot, std::vector<uint64_t>& out) {
  Active& a = actives[slot];
  if (a.phase >= a.pat->phases.size()) {
    phase_done(slot, out);
    return;
  }
  for (const FlowTemplate& ft : a.pat->phases[a.phase].flows) {
    const uint32_t id = solver.add(ft.loads, a.bytes * ft.frac, slot);
    if (id >= flow_tmpl.size()) flow_tmpl.resize(id + 1, nullptr);
    flow_tmpl[id] = &ft;
    ++a.flows_left;
    ++st.flows;
  }
  if (a.flows_left == 0) phase_done(slot, out);
}

void NetworkModel::Impl::phase_done(uint32_t slot, std::vector<uint64_t>& out) {
  Active& a = actives[slot];
  if (a.phase < a.pat->phases.size()) ++a.phase;
  if (a.phase >= a.pat->phases.size()) {
    out.push_back(a.handle);
    ++st.finished;
    --live;
    a.pat = nullptr;
    free_actives.push_back(slot);
    return;
  }
  timers.push(Timer{solver.now_us() + a.pat->phases[a.phase].latency_us, timer_seq++, slot});
}

void NetworkModel::Impl::on_finished(std::vector<uint64_t>& out) {
  for (const FinishedFlow& f : fin) {
    const FlowTemplate* ft = flow_tmpl[f.id];
    for (int c = 0; c < kLinkClasses; ++c) st.link_bytes[c] += f.bytes * ft->class_weight[c];
    const auto slot = static_cast<uint32_t>(f.tag);
    if (--actives[slot].flows_left == 0) phase_done(slot, out);
  }
  fin.clear();
}

void NetworkModel::Impl::run_until(double t, std::vector<uint64_t>& out) {
  for (;;) {
    const double tf = solver.next_completion_us();
    const double tt = timers.empty() ? kInf : timers.top().t_us;
    if (std::min(tf, tt) > t + time_tie_eps(t)) break;
    if (tt <= tf) {  // a phase's latency has elapsed: its flows start
      const Timer tm = timers.top();
      timers.pop();
      solver.advance(tt, fin);
      on_finished(out);
      fire(tm.slot, out);
    } else {
      solver.advance(tf, fin);
      on_finished(out);
    }
  }
  solver.advance(t, fin);
  on_finished(out);
  now = std::max(now, solver.now_us());
}

NetworkModel::NetworkModel(const Topology& topo, const Layout& layout, CollectiveAlgo forced,
                           const std::vector<LinkVariation>& links)
    : impl_(std::make_unique<Impl>(topo, layout, forced, links)) {}

NetworkModel::~NetworkModel() = default;

uint64_t NetworkModel::start(const CommRequest& req, double now_us) {
  Impl& m = *impl_;
  // Events within rounding of a time may have moved the clock a hair past it; more is a bug.
  if (now_us + 2 * time_tie_eps(m.now) < m.now)
    throw InternalError("NetworkModel::start: time went backwards (" + std::to_string(now_us) +
                        " us < " + std::to_string(m.now) + " us)");
  if (now_us > m.now) m.run_until(now_us, m.pending);
  Shape& s = m.shape_of(req);
  const size_t entry = m.choose(s, req);
  const Pattern& pat = m.pattern(s, entry);
  uint32_t slot;
  if (!m.free_actives.empty()) {
    slot = m.free_actives.back();
    m.free_actives.pop_back();
  } else {
    slot = static_cast<uint32_t>(m.actives.size());
    m.actives.emplace_back();
  }
  Active& a = m.actives[slot];
  a = Active{m.next_handle++, &pat, static_cast<double>(std::max<int64_t>(req.bytes, 0)), 0, 0};
  ++m.live;
  ++m.st.calls;
  ++m.st.calls_by_algo[static_cast<size_t>(pat.algo)];
  // The call's launch latency and reduction arithmetic, then phase 0's latency, before the
  // first flows start.
  const double lat0 = pat.phases.empty() ? 0.0 : pat.phases[0].latency_us;
  m.timers.push(Timer{m.now + call_overhead_us(m.topo.collectives, req) + lat0, m.timer_seq++, slot});
  return a.handle;
}

double NetworkModel::next_completion_us() const {
  Impl& m = *impl_;
  if (!m.pending.empty()) return m.now;
  const double tt = m.timers.empty() ? kInf : m.timers.top().t_us;
  return std::min(tt, m.solver.next_completion_us());
}

void NetworkModel::advance(double t_us, std::vector<uint64_t>& finished) {
  Impl& m = *impl_;
  finished.insert(finished.end(), m.pending.begin(), m.pending.end());
  m.pending.clear();
  m.run_until(std::max(t_us, m.now), finished);
}

CommStats NetworkModel::stats() const {
  CommStats s = impl_->st;
  const SolverStats& ss = impl_->solver.stats();
  s.settles = ss.settles;
  s.resolves = ss.resolves;
  s.solver_work = ss.load_visits;
  s.routes = impl_->router.cached_routes();
  return s;
}

double NetworkModel::now_us() const { return impl_->now; }
size_t NetworkModel::active_calls() const { return impl_->live; }
const TopologyGraph& NetworkModel::graph() const { return impl_->graph; }

void NetworkModel::set_check_invariants(bool on) { impl_->solver.set_check_invariants(on); }

void NetworkModel::check_drained() const {
  const Impl& m = *impl_;
  const SolverStats& ss = m.solver.stats();
  check_network_drained(m.st.calls, m.st.finished, ss.flows_added, ss.flows_finished,
                        m.solver.active_flows());
  if (!m.pending.empty() || !m.timers.empty() || m.live != 0)
    invariant_violated("bytes delivered", std::to_string(m.live) + " calls still in the network at the end of the step");
}

std::string_view NetworkModel::algorithm(const CommRequest& req) {
  Shape& s = impl_->shape_of(req);
  return to_string(algorithm_registry()[impl_->choose(s, req)].id);
}

double NetworkModel::isolated_time_us(const CommRequest& req) {
  Shape& s = impl_->shape_of(req);
  const Pattern& p = impl_->pattern(s, impl_->choose(s, req));
  return call_overhead_us(impl_->topo.collectives, req) + p.isolated_us(static_cast<double>(req.bytes));
}

}  // namespace paralab::sim
