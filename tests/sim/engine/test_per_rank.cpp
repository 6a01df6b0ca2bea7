// paralab — per-rank mode: classes of identical ranks, bit-identical results without variation,
// a straggler against the 1F1B closed form, and deterministic distributions over draws.
#include <catch2/catch.hpp>

#include <filesystem>
#include <numeric>

#include "engine_test_util.hpp"
#include "ir/topology_loader.hpp"
#include "sim/engine/rank_classes.hpp"
#include "sim/samples.hpp"

using namespace paralab;
using namespace paralab::sim;
using namespace paralab::sim::test;

namespace {

// Four equal pipeline stages of four wide layers on TP2 x PP4 x DP4 (four DGX A100 nodes), eight
// micro-batches per replica.
std::string tp_pp_dp() {
  return equal_layers_model("global_batch_size = 64\nmicro_batch_size = 2") +
         "[parallel]\ntensor = 2\npipeline = 4\ndata = 4\n[cluster]\ntopology = \"dgx-a100\"\nnodes = 4\n";
}

void require_same(const Simulation& a, const Simulation& b) {
  REQUIRE(a.result.step_time_s == b.result.step_time_s);
  REQUIRE(a.result.ops.size() == b.result.ops.size());
  for (size_t i = 0; i < a.result.ops.size(); ++i) {
    const OpTiming &x = a.result.ops[i], &y = b.result.ops[i];
    REQUIRE((x.rank == y.rank && x.op == y.op && x.start_us == y.start_us && x.end_us == y.end_us));
  }
  REQUIRE(a.result.peak_memory_gib == b.result.peak_memory_gib);
  REQUIRE(a.result.breakdown.compute_s == b.result.breakdown.compute_s);
  REQUIRE(a.result.breakdown.bubble_s == b.result.breakdown.bubble_s);
  REQUIRE(a.result.bubble_fraction == b.result.bubble_fraction);
}

}  // namespace

TEST_CASE("per-rank mode without variation is the representative mode, bit for bit", "[engine][per-rank]") {
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() / "scenarios")) {
    if (e.path().extension() != ".toml") continue;
    INFO(e.path().filename().string());
    const StepIR ir = build_step_ir(load_scenario(e.path()));
    SimulateOptions forced;
    forced.per_rank = true;
    const Simulation a = simulate(ir), b = simulate(ir, forced);
    CHECK_FALSE(a.per_rank);
    CHECK(b.per_rank);
    CHECK(b.simulated_ranks == ir.layout.pp());  // one class per stage
    require_same(a, b);
    ++checked;
  }
  CHECK(checked >= 10);
}

TEST_CASE("classes: a straggler splits off only the ranks it can reach", "[engine][per-rank]") {
  Scenario s = load_inline(tp_pp_dp());
  Straggler st;
  st.rank = 5;  // tp 1, dp 2, stage 0
  st.slowdown = 1.3;
  s.variation.stragglers.push_back(st);
  const StepIR ir = build_step_ir(s);
  const RankClasses c = rank_classes(ir, draw_hardware(ir, ir.scenario.variation, 0));
  int64_t total = 0;
  for (const RankClass& rc : c.classes) total += rc.ranks;
  CHECK(total == ir.layout.world());
  const RankClass& slow = c.classes[c.class_of[5]];
  CHECK(slow.ranks == 1);
  CHECK(slow.hardware.slowdown[static_cast<size_t>(OpKind::gemm)] == Approx(1.3));
  CHECK(slow.hardware.slowdown[static_cast<size_t>(OpKind::collective)] == 1.0);
  CHECK(c.class_of[4] != c.class_of[5]);  // its TP partner: same hardware, other group position
  CHECK(c.classes.size() > static_cast<size_t>(ir.layout.pp()));
  CHECK(c.classes.size() < static_cast<size_t>(ir.layout.world()));
  // Without the straggler: one class per stage.
  const RankClasses plain = rank_classes(ir, draw_hardware(ir, VariationConfig{}, 0));
  CHECK(plain.classes.size() == static_cast<size_t>(ir.layout.pp()));
  // A slowdown of exactly 1 changes no hardware and splits nothing.
  VariationConfig unit = ir.scenario.variation;
  unit.stragglers[0].slowdown = 1.0;
  CHECK(rank_classes(ir, draw_hardware(ir, unit, 0)).classes.size() == static_cast<size_t>(ir.layout.pp()));
}

// One straggler at 1.3x in the last stage of a TP x PP x DP layout with a free network: its
// tensor-parallel group runs at its pace (the partner waits at every TP collective), so the
// stage takes 1.3 T per micro-batch instead of T; under 1F1B the last stage runs its m forward
// and backward pairs back to back (no warm-up wait), so its pipeline is paced by it, and the
// other replicas wait for it at the gradient reduce: (p-1) F + m 1.3T + (p-1) B instead of
// (m+p-1) T (Narayanan et al. 2021, Sec. 2.2.1, with one slow stage), plus its 1.3x optimizer
// step: the step grows by 0.3 (m T + opt). (An earlier stage hides part of its slowdown in the
// wait of its warm-up, so the last stage is the one the closed form is exact for.)
TEST_CASE("closed form: one 1.3x straggler in the last stage costs 0.3 (m T + opt)", "[engine][per-rank][closed-form]") {
  Scenario s = load_inline(tp_pp_dp());
  free_network(s.topology);
  const StepIR base_ir = build_step_ir(s);
  const Simulation base = simulate(base_ir);
  const int64_t slow_rank = base_ir.layout.rank({1, 0, 2, 3}), stage = base_ir.layout.stage_of(slow_rank);
  REQUIRE(stage == base_ir.layout.pp() - 1);
  const int64_t rep = base_ir.layout.representative(stage);
  const StepGraph& g = base_ir.stages[static_cast<size_t>(stage)];
  double t_mb = 0, opt = 0;
  for (const OpTiming& t : base.result.ops) {
    if (t.rank != rep || g.op(t.op).stream != Stream::compute) continue;
    if (g.op(t.op).phase == Phase::optimizer) opt += t.end_us - t.start_us;
    else if (g.op(t.op).microbatch == 0) t_mb += t.end_us - t.start_us;
  }
  const auto m = static_cast<double>(s.num_microbatches());
  REQUIRE(m == 8);
  REQUIRE(t_mb > 10'000);

  Straggler st;
  st.rank = slow_rank;
  st.slowdown = 1.3;
  s.variation.stragglers.push_back(st);
  const StepIR ir = build_step_ir(s);
  const Simulation slow = simulate(ir);
  CHECK(slow.per_rank);
  const double grew_us = (slow.result.step_time_s - base.result.step_time_s) * 1e6;
  const double expected_us = 0.3 * (m * t_mb + opt);
  CHECK(grew_us == Approx(expected_us).epsilon(0.03));
  // The critical path runs through the straggler's compute: it waits for nobody, all wait for it.
  REQUIRE_FALSE(slow.critical_compute_us.empty());
  CHECK(slow.critical_compute_us.front().first == slow_rank);
  double on_path = 0;
  for (const auto& [rank, us] : slow.critical_compute_us) on_path += us;
  for (double us : slow.critical_comm_us) on_path += us;
  CHECK(on_path <= slow.result.step_time_s * 1e6 * (1 + 1e-9));
  CHECK(on_path > 0.9 * slow.result.step_time_s * 1e6);  // the path is the step, less idle gaps
}

TEST_CASE("samples: deterministic whatever the thread count, and spread by gpu_speed_cv", "[engine][per-rank]") {
  Scenario s = load_inline(tp_pp_dp(), {"variation.gpu_speed_cv=0.05", "variation.seed=7"});
  const StepIR ir = build_step_ir(s);
  const Distribution one = simulate_samples(ir, 6, 1), two = simulate_samples(ir, 6, 2);
  REQUIRE(one.runs.size() == 6);
  for (size_t i = 0; i < one.runs.size(); ++i) {
    CHECK(one.runs[i].step_time_s == two.runs[i].step_time_s);
    CHECK(one.runs[i].critical_rank == two.runs[i].critical_rank);
    CHECK(one.runs[i].simulated_ranks == ir.layout.world());  // every rank distinct
  }
  CHECK(one.p99_s == two.p99_s);
  CHECK(one.max_s > one.min_s);  // draws differ
  CHECK(one.p50_s <= one.p90_s);
  CHECK(one.p90_s <= one.p99_s);
  // The slowest GPU of a draw paces its groups: every draw is slower than identical GPUs.
  const double uniform = simulate(build_step_ir(load_inline(tp_pp_dp()))).result.step_time_s;
  CHECK(one.min_s > uniform);
  // Sample 0 of --samples is the draw simulate() makes.
  SimulateOptions o;
  o.record_ops = false;
  CHECK(simulate(ir, o).end_us * 1e-6 == one.runs[0].step_time_s);
}

TEST_CASE("percentiles are nearest-rank", "[engine][per-rank]") {
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);
  CHECK(percentile(v, 0.5) == 50);
  CHECK(percentile(v, 0.9) == 90);
  CHECK(percentile(v, 0.99) == 99);
  CHECK(percentile({3.0}, 0.99) == 3);
}

TEST_CASE("node groups compute at their own topology's speed", "[engine][per-rank]") {
  const std::string older = data_dir().string() + "/topologies/dgx-a100.toml";
  Scenario s = load_inline(tp_pp_dp(), {"cluster.topology=dgx-h100"});
  const StepIR fast = build_step_ir(s);
  NodeGroup g;
  g.first_node = 1;
  g.last_node = 1;
  g.topology = "dgx-a100";
  g.resolved = load_topology(older);
  s.variation.node_groups.push_back(g);
  const StepIR mixed = build_step_ir(s);
  const Simulation a = simulate(fast), b = simulate(mixed);
  CHECK(b.per_rank);
  CHECK(b.result.step_time_s > 1.2 * a.result.step_time_s);  // the A100 node paces the step
}

TEST_CASE("[variation] errors name the key, the value and what is allowed", "[engine][per-rank][config]") {
  const auto fails = [](const std::string& extra, const std::string& needle) {
    try {
      load_inline(tp_pp_dp() + extra);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.find(needle) != std::string::npos);
      return;
    }
    FAIL("accepted: " + extra);
  };
  fails("[[variation.straggler]]\nrank = 32\nslowdown = 2\n", "no such rank");
  fails("[[variation.straggler]]\nrank = 1\nnode = 0\nslowdown = 2\n", "exactly one of rank and node");
  fails("[[variation.straggler]]\nrank = 1\n", "variation.straggler.slowdown");
  fails("[[variation.straggler]]\nnode = 0\nslowdown = 2\nop_kinds = \"gemm,collective\"\n", "not a compute op kind");
  fails("[[variation.straggler]]\nnode = 0\nslowdown = 2\nspeed = 3\n", "unknown key");
  fails("[[variation.link]]\nnode = 0\n", "variation.link.bandwidth_fraction");
  fails("[[variation.link]]\nnode = 9\nbandwidth_fraction = 0.5\n", "no such node");
  fails("[[variation.link]]\nnode = 0\nbandwidth_fraction = 0\n", "no NIC left");
  fails("[[variation.link]]\nnode = 0\nnic = 8\nbandwidth_fraction = 0\n", "no such NIC");
  fails("[[variation.wobble]]\nnode = 0\n", "arrays of tables are not part of a scenario");
  fails("[[variation.node_group]]\nfirst_node = 1\nlast_node = 5\ntopology = \"dgx-a100\"\n", "not a range");
  fails("[[variation.node_group]]\nfirst_node = 0\nlast_node = 0\ntopology = \"cpu-host\"\n", "not GPUs");
  fails("[variation]\ngpu_speed_cv = 0.9\n", "variation.gpu_speed_cv");
  fails("[variation]\nseq_length_distribution = \"exponential\"\n", "variation.document_mean_tokens");
  fails("[variation]\nseq_length_distribution = \"uniform\"\ndocument_min_tokens = 9\ndocument_max_tokens = 4\n",
        "document_min_tokens <= document_max_tokens");
  fails("[variation]\nseq_length_distribution = \"zipf\"\n", "exponential");
}

// Pipeline transfers cross nodes in this layout (a node holds one stage): a node whose NICs
// keep a tenth of their bandwidth slows every transfer into and out of its stage.
TEST_CASE("a degraded NIC slows the transfers that cross it", "[engine][per-rank]") {
  const std::string big = tp_pp_dp() + "[[variation.link]]\nnode = 1\nbandwidth_fraction = ";
  Scenario plain_s = load_inline(tp_pp_dp(), {"model.seq_length=8192", "model.max_position_embeddings=8192"});
  const Simulation plain = simulate(build_step_ir(plain_s));
  const auto with = [&](const std::string& f) {
    const Scenario s = load_inline(big + f + "\n", {"model.seq_length=8192", "model.max_position_embeddings=8192"});
    return simulate(build_step_ir(s));
  };
  const Simulation slow = with("0.1"), same = with("1.0");
  CHECK(slow.per_rank);
  CHECK(slow.simulated_ranks == 4);  // node 1 is all of stage 1: its ranks stay alike
  CHECK(slow.result.step_time_s > plain.result.step_time_s);
  CHECK(same.simulated_ranks == 4);  // a fraction of 1 changes nothing
  CHECK(same.result.step_time_s == plain.result.step_time_s);
  CHECK(slow.network.link_bytes == plain.network.link_bytes);  // the same bytes, moved slower
  // A NIC that is down: its traffic crosses the node's switch to another NIC (more NVLink
  // bytes), and the step completes.
  const Scenario down_s = load_inline(tp_pp_dp() + "[[variation.link]]\nnode = 1\nnic = 0\nbandwidth_fraction = 0\n",
                                      {"model.seq_length=8192", "model.max_position_embeddings=8192"});
  const Simulation down = simulate(build_step_ir(down_s));
  CHECK(down.result.step_time_s >= plain.result.step_time_s);
  const auto intra = static_cast<size_t>(LinkClass::intra);
  CHECK(down.network.link_bytes[intra] > plain.network.link_bytes[intra]);
}

// Packed documents: causal attention's work is sum(length^2); exponential lengths of mean mu
// give E[l^2] / E[l] = 2 mu per token (renewal theory, the cut last document aside), so a
// sequence of S tokens does about 2 mu / S of one document's attention work.
TEST_CASE("packed sequences: attention work per micro-batch, per data-parallel replica", "[engine][per-rank]") {
  VariationConfig v;
  v.seq_length_distribution = SeqLengthDistribution::exponential;
  v.document_mean_tokens = 512;
  double mean = 0;
  for (uint64_t k = 0; k < 2000; ++k) mean += packed_attention_work(v, 8192, 1, k) / 2000;
  CHECK(mean == Approx(2.0 * 512 / 8192).epsilon(0.1));
  CHECK(packed_attention_work(v, 8192, 4, 7) == packed_attention_work(v, 8192, 4, 7));
  v.seq_length_distribution = SeqLengthDistribution::uniform;
  v.document_min_tokens = v.document_max_tokens = 2048;  // four documents of 2,048 exactly
  CHECK(packed_attention_work(v, 8192, 2, 3) == 0.25);

  // Equal documents everywhere: replicas stay alike, attention ops take a quarter as long.
  const std::string sets = "variation.seq_length_distribution=uniform";
  // (Communication holding no SMs: compute durations are the compute model's, unstretched.)
  const std::vector<std::string> no_sms = {"topology.collectives.intra_sms=0", "topology.collectives.inter_sms=0",
                                           "topology.collectives.p2p_sms=0"};
  std::vector<std::string> even_sets = no_sms;
  even_sets.insert(even_sets.end(), {sets, "variation.document_min_tokens=512", "variation.document_max_tokens=512"});
  const Scenario base_s = load_inline(tp_pp_dp(), no_sms);
  const Scenario even_s = load_inline(tp_pp_dp(), even_sets);
  const StepIR base_ir = build_step_ir(base_s), even_ir = build_step_ir(even_s);
  const Simulation base = simulate(base_ir), even = simulate(even_ir);
  CHECK(even.per_rank);
  CHECK(even.simulated_ranks == 4);
  CHECK(even.result.step_time_s < base.result.step_time_s);
  const StepGraph& g = base_ir.stages[0];
  int checked = 0;
  for (size_t i = 0; i < base.result.ops.size() && checked < 50; ++i) {
    const OpTiming& t = base.result.ops[i];
    if (t.rank != 0 || g.op(t.op).kind != OpKind::attention_fwd) continue;
    const OpTiming* e = timing_of(even.result, 0, t.op);
    REQUIRE(e);
    CHECK(e->end_us - e->start_us == Approx(0.25 * (t.end_us - t.start_us)).epsilon(1e-9));
    ++checked;
  }
  CHECK(checked > 0);
  // Exponential documents: each replica draws its own, so replicas differ.
  const Scenario exp_s = load_inline(tp_pp_dp(), {"variation.seq_length_distribution=exponential", "variation.document_mean_tokens=256"});
  const Simulation varied = simulate(build_step_ir(exp_s));
  CHECK(varied.simulated_ranks == 4 * 4);  // stages x replicas
}

// simulation.pace_tensor_groups: each TP group at its slowest member's speed, one class per
// group. Exact in step time for whole-rank slowdowns (gpu_speed_cv, stragglers of every op):
// between two tensor-parallel collectives each member's time scales by its own factor, so the
// group waits for the slowest at every one of them. The members' own DP and pipeline traffic
// start when the slowest's would: close, and never earlier (bench/results/per_rank.md).
TEST_CASE("paced tensor groups: 1/tensor of the classes, the step of every rank simulated", "[engine][per-rank]") {
  for (const char* seed : {"variation.seed=1", "variation.seed=7"}) {
    CAPTURE(seed);
    std::vector<std::string> sets = {seed, "variation.gpu_speed_cv=0.05"};
    Scenario exact_s = load_inline(tp_pp_dp(), sets);
    sets.push_back("simulation.pace_tensor_groups=true");
    Scenario paced_s = load_inline(tp_pp_dp(), sets);
    const Simulation exact = simulate(build_step_ir(exact_s));
    const Simulation paced = simulate(build_step_ir(paced_s));
    REQUIRE(exact.per_rank);
    CHECK(exact.simulated_ranks == 32);
    CHECK(paced.simulated_ranks == 16);  // TP2: one class per tensor-parallel group
    CHECK(paced.result.step_time_s == Approx(exact.result.step_time_s).epsilon(0.01));
    CHECK(paced.result.step_time_s >= exact.result.step_time_s * (1 - 1e-9));
  }
  // A straggler slowing every op of one rank: its whole TP group is paced by it.
  Scenario s = load_inline(tp_pp_dp());
  Straggler st;
  st.rank = 5;
  st.slowdown = 1.3;
  s.variation.stragglers.push_back(st);
  const Simulation exact = simulate(build_step_ir(s));
  s.simulation.pace_tensor_groups = true;
  const Simulation paced = simulate(build_step_ir(s));
  CHECK(paced.simulated_ranks < exact.simulated_ranks);
  CHECK(paced.result.step_time_s == Approx(exact.result.step_time_s).epsilon(0.01));
}
