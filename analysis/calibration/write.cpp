// paralab — the calibrated topology as the file the simulator loads as is, every value
// commented with where it came from (docs/calibration.md, "The file").
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "analysis/calibrate.hpp"
#include "analysis/calibration_device_fit.hpp"
#include "analysis/run_noise.hpp"
#include "exec/comm.hpp"
#include "ir/enum_names.hpp"
#include "ir/topology_loader.hpp"

namespace paralab::calib {

using detail::DeviceFit;
using detail::PeakSource;
using detail::describes_host;
using detail::device_fit;

namespace {

// A TOML float: always with a '.' or an exponent.
std::string fnum(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
std::string fint(int64_t v) { return std::to_string(v); }
std::string fstr(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string topology_toml(const CalibrationResult& r) {
  const Topology t = calibrated_topology(r);
  const DeviceSpec& d = t.device;
  const HostInfo& h = r.host;
  // The in-situ split slowed the bytes part (intra_efficiency and reduce_gbps carry it).
  const bool slowed = r.have_in_situ_comm() && r.comm_in_situ_bytes_slowdown > 0;
  std::string o;
  char buf[512];
  auto line = [&](const std::string& s) { o += s + "\n"; };
  auto kv = [&](const std::string& k, const std::string& v, const std::string& comment = "") {
    std::string s = k + " = " + v;
    if (!comment.empty()) {
      if (s.size() < 34) s.resize(34, ' ');
      s += " # " + comment;
    }
    line(s);
  };
  const bool cpu = describes_host(r);
  line("# " + t.name + ": written by `paralab calibrate --backend " + r.backend + "` (docs/calibration.md).");
  line("# Measured " + r.started_utc + " on " + h.hostname + " (" + h.cpu_model + ", " + std::to_string(h.cores) +
       " logical CPUs, " + h.cpu_flags_summary + ") by " + std::to_string(r.ranks) +
       " ranks at once (each rank saw the contention of " + std::to_string(r.ranks) + " busy ranks), paralab " +
       r.paralab_version + ".");
  std::snprintf(buf, sizeof buf, "# %d timed passes per job after a warm-up pass; medians. Wall time %.1f s. Load average %s -> %s.",
                r.reps, r.wall_s, h.loadavg_start.c_str(), h.loadavg_end.c_str());
  line(buf);
  if (!r.scenarios.empty()) {
    std::string names;
    for (const auto& n : r.scenarios) names += (names.empty() ? "" : ", ") + n;
    line("# Every compute op of these scenarios was measured exactly (replayed with the executor's code): " + names + ".");
  }
  if (!t.calibration.executions.empty())
    line("# In situ: the scenarios executed and their steps are the [[calibration.execution]] entries below.");
  if (r.compute_cpu_time)
    line("# " + std::to_string(r.ranks) + " ranks > " + std::to_string(h.cores) +
         " cores: replayed compute ops timed by thread CPU time, executed ones by their execution under core turns (the "
         "simulator shares node.cores among the ranks' threads).");
  line("# Based on topology '" + r.base.name + "' (" + r.base.file.string() + "); fitted values replace its own.");
  line("# Units: _gbps = GB/s per direction, _us = microseconds, _tflops = 1e12 FLOP/s.");
  kv("name", fstr(t.name));
  kv("description", fstr(t.description));
  line("");
  line("[device]");
  kv("kind", fstr(std::string(to_string(d.kind))));
  kv("name", fstr(d.name));
  const exec::DeviceIdentity* gpu_id = r.gpu ? &*r.gpu : nullptr;
  std::string gpu_note;  // what the driver reported, for the GPU's own figures
  if (gpu_id) {
    std::snprintf(buf, sizeof buf, "this GPU (sm_%d, %.0f MHz)", gpu_id->compute_capability(), gpu_id->sm_clock_mhz);
    gpu_note = buf;
  }
  kv("sm_count", fint(d.sm_count), cpu ? "one core per rank" : gpu_id ? gpu_note : "from the base topology");
  const DeviceFit f = device_fit(r);
  std::string gemm_note;
  if (auto it = r.gemm.find(MathMode::f32); it != r.gemm.end()) {
    std::snprintf(buf, sizeof buf, "fitted fp32 GEMM rate %.4g TFLOP/s / peak", it->second.flop_per_us * 1e-6);
    gemm_note = buf;
  }
  if (cpu) {
    std::snprintf(buf, sizeof buf, "%.0f MHz x 2 FMA units x %s lanes x 2 FLOP (/proc/cpuinfo)%s", h.cpu_mhz,
                  h.cpu_flags_summary.rfind("avx512", 0) == 0 ? "16" : h.cpu_flags_summary.rfind("avx2", 0) == 0 ? "8" : "4",
                  f.raised ? ", raised to the measured rate / 0.99" : "");
    kv("peak_fp32_tflops", fnum(d.peak(MathMode::f32)), buf);
    kv("peak_tf32_tflops", fnum(d.peak(MathMode::tf32)), "no TF32 on CPUs: computed in fp32");
    kv("peak_bf16_tflops", fnum(d.peak(MathMode::bf16)),
       r.gemm.count(MathMode::bf16) ? "fp32 peak x measured bf16/fp32 GEMM rate (conversion cost)" : "as fp32 (not measured)");
    kv("peak_fp16_tflops", fnum(d.peak(MathMode::f16)),
       r.gemm.count(MathMode::f16) ? "fp32 peak x measured f16/fp32 GEMM rate" : "as bf16 (converted alike)");
    kv("peak_fp8_tflops", fnum(0), "not supported on the CPU backend");
    kv("memory_gib", fnum(d.memory_gib), "MemTotal / ranks");
  } else {
    std::string why;
    switch (f.source) {
      case PeakSource::device:
        std::snprintf(buf, sizeof buf, "%lld SMs x %.0f MHz x sm_%d's FLOP/clock (exec/device_identity.cpp)",
                      (long long)gpu_id->sm_count, gpu_id->sm_clock_mhz, gpu_id->compute_capability());
        why = buf;
        break;
      case PeakSource::measured: why = "measured GEMM rate / efficiency (architecture not in exec/device_identity.cpp)"; break;
      default: why = "from the base topology";
    }
    if (f.source == PeakSource::base && gpu_id && gpu_id->name != r.base.device.name)
      why += " ('" + r.base.device.name + "', measured on " + gpu_id->name + ")";
    kv("peak_fp32_tflops", fnum(d.peak(MathMode::f32)), f.raised ? "raised to the measured fp32 GEMM rate / 0.99" : why);
    kv("peak_tf32_tflops", fnum(d.peak(MathMode::tf32)), why);
    kv("peak_bf16_tflops", fnum(d.peak(MathMode::bf16)), why);
    kv("peak_fp16_tflops", fnum(d.peak(MathMode::f16)), why);
    kv("peak_fp8_tflops", fnum(d.peak(MathMode::fp8)), why);
    kv("memory_gib", fnum(d.memory_gib), gpu_id && gpu_id->memory_gib > 0 ? "this GPU's memory (totalGlobalMem)" : "from the base topology");
  }
  kv("mem_bw_gbps", fnum(d.mem_bw_gbps),
     r.copy_gbps > 0                     ? "measured: 64 MiB memcpy, every rank at once (read + write)"
     : gpu_id && gpu_id->mem_bw_gbps > 0 ? "this GPU's theoretical: 2 x memory clock x bus width"
                                         : "from the base topology");
  kv("l2_mib", fnum(d.l2_mib), cpu ? "/sys/devices/system/cpu/cpu0/cache/index2" : gpu_id && gpu_id->l2_mib > 0 ? "this GPU's" : "from the base topology");
  if (r.stream.fit.samples > 0) {
    std::snprintf(buf, sizeof buf, "fitted intercept of t = t0 + bytes/BW over %lld kernel shapes (rms error %.0f%%)",
                  (long long)r.stream.fit.samples, 100 * r.stream.fit.rms_rel_error);
    kv("launch_overhead_us", fnum(d.launch_overhead_us), buf);
  } else {
    kv("launch_overhead_us", fnum(d.launch_overhead_us), "from the base topology");
  }
  // Gaps netted of the core pool's turns (in_situ.hpp): the dispatch gap is their mean (fit_all).
  const bool netted = r.in_situ.turns > 1.0;
  if (!r.in_situ.dispatch_us.empty()) {
    const std::vector<double>& g = r.in_situ.dispatch_us;
    std::snprintf(buf, sizeof buf, "in situ: %s gap after a compute op%s, %zu gaps of %d executed steps (%s %.3g us)",
                  netted ? "mean" : "median", netted ? " less the core pool's turns" : "", g.size(), r.in_situ.executions,
                  netted ? "median" : "mean", netted ? quantile(g, 0.5) : trimmed_mean(g, 0.0));
    kv("dispatch_us", fnum(d.dispatch_us), buf);
  } else {
    kv("dispatch_us", fnum(d.dispatch_us), "from the base topology");
  }
  // A hand-off (a trimmed mean of gaps measured in situ), or the base topology's value.
  const auto handoff = [&](const char* key, double value, const std::vector<double>& gaps, const char* before) {
    if (gaps.empty()) return kv(key, fnum(value), "from the base topology");
    std::snprintf(buf, sizeof buf, "in situ: mean gap before %s, %zu gaps (median %.3g us)", before, gaps.size(),
                  quantile(gaps, 0.5));
    kv(key, fnum(value), buf);
  };
  handoff("stream_handoff_us", d.stream_handoff_us, r.in_situ.handoff_us, "a communication op after a dependency on another stream");
  handoff("compute_handoff_us", d.compute_handoff_us, r.in_situ.compute_handoff_us,
          netted ? "a compute op after a call it waited for, less the core pool's turns" : "a compute op after a call it waited for");
  if (!r.in_situ.handoff_us.empty())
    kv("handoff_on_core_us", fnum(d.handoff_on_core_us),
       "in situ: the median gap before a communication op (at most the mean): its worker on the rank's core");
  else
    kv("handoff_on_core_us", fnum(d.handoff_on_core_us), "from the base topology");
  if (r.compute_tail_samples > 0) {
    std::snprintf(buf, sizeof buf,
                  "in situ: a step's compute ops' summed time / their keys' medians summed, minus 1; median of %zu "
                  "executions (%zu ops)",
                  r.compute_tail_executions, r.compute_tail_samples);
    kv("compute_tail", fnum(d.compute_tail), buf);
  } else {
    kv("compute_tail", fnum(d.compute_tail), r.compute_cpu_time ? "the ranks share the cores: the simulator's core pool has their waits"
                                                                 : "from the base topology");
  }
  kv("gemm_max_efficiency", fnum(d.gemm_max_efficiency), gemm_note.empty() ? "from the base topology" : gemm_note);
  kv("gemm_tile_m", fint(d.gemm_tile_m), cpu ? "no wave quantization on a CPU core" : "from the base topology");
  kv("gemm_tile_n", fint(d.gemm_tile_n));
  if (r.stream.fit.samples > 0 && d.mem_bw_gbps > 0) {
    std::snprintf(buf, sizeof buf, "fitted kernel bandwidth %.3g GB/s / mem_bw_gbps", r.stream.gbps());
    kv("mem_efficiency", fnum(d.mem_efficiency), buf);
  } else {
    kv("mem_efficiency", fnum(d.mem_efficiency), "from the base topology");
  }
  kv("flash_fwd_efficiency", fnum(d.flash_fwd_efficiency),
     r.flash_fwd_efficiency > 0 ? "fitted: executed FLOPs / (peak of its math x (t - t0)) over the attention_fwd points" : "from the base topology");
  kv("flash_bwd_efficiency", fnum(d.flash_bwd_efficiency),
     r.flash_bwd_efficiency > 0 ? "fitted likewise over the attention_bwd points" : "from the base topology");
  line("");
  line("[node]");
  kv("devices_per_node", fint(t.node.devices_per_node), "at least the ranks measured");
  kv("intra", fstr(std::string(to_string(t.node.intra))));
  if (r.have_comm_fit) {
    std::snprintf(buf, sizeof buf, "fitted B of t = L + steps x alpha + wire bytes / B + reduced bytes / R over %lld calls (rms error %.0f%%)",
                  (long long)r.comm_fit.fit.samples, 100 * r.comm_fit.fit.rms_rel_error);
    kv("intra_bw_gbps", fnum(t.node.intra_link.bw_gbps), buf);
    kv("intra_lat_us", fnum(t.node.intra_link.lat_us), "fitted alpha: per ring step (link latency + MPI progress)");
    if (slowed) {
      std::snprintf(buf, sizeof buf,
                    "in situ: 1 / (1 + %.3g); the executed calls moved their bytes that much slower than the sweep's warm buffers "
                    "(weighted least absolute deviations with the per-call cost)",
                    r.comm_in_situ_bytes_slowdown);
      kv("intra_efficiency", fnum(t.node.intra_link.efficiency), buf);
    } else {
      kv("intra_efficiency", fnum(t.node.intra_link.efficiency),
         r.have_in_situ_comm() ? "in situ: the executed calls moved their bytes as fast as the sweep's (slow-down fitted 0)"
                               : "the fitted bandwidth is already what collectives reach");
    }
  } else {
    kv("intra_bw_gbps", fnum(t.node.intra_link.bw_gbps), "from the base topology (not measured: one rank)");
    kv("intra_lat_us", fnum(t.node.intra_link.lat_us), "from the base topology");
    kv("intra_efficiency", fnum(t.node.intra_link.efficiency), "from the base topology");
  }
  if (t.node.pcie.bw_gbps > 0) {
    kv("pcie_bw_gbps", fnum(t.node.pcie.bw_gbps), "from the base topology");
    kv("pcie_lat_us", fnum(t.node.pcie.lat_us));
    kv("pcie_efficiency", fnum(t.node.pcie.efficiency));
  }
  kv("nics_per_node", fint(t.node.nics_per_node), "from the base topology");
  if (cpu) kv("cores", fint(t.node.cores), "CPUs the ranks share (the union of their affinities)");
  if (t.node.nics_per_node > 0) {
    kv("nic_bw_gbps", fnum(t.node.nic.bw_gbps));
    kv("nic_lat_us", fnum(t.node.nic.lat_us));
    kv("nic_efficiency", fnum(t.node.nic.efficiency));
  }
  line("");
  line("[network]");
  kv("kind", fstr(std::string(to_string(t.network.kind))), "from the base topology");
  if (t.network.kind != NetworkKind::none) {
    kv("levels", fint(t.network.levels));
    kv("radix", fint(t.network.radix));
    kv("oversubscription", fnum(t.network.oversubscription));
    kv("link_bw_gbps", fnum(t.network.switch_link.bw_gbps));
    kv("switch_lat_us", fnum(t.network.switch_link.lat_us));
    kv("link_efficiency", fnum(t.network.switch_link.efficiency));
  }
  line("");
  line("[collectives]");
  if (r.have_comm_fit) {
    if (r.have_in_situ_comm()) {
      const size_t transfers = r.in_situ_awake_transfers, contended = r.in_situ_awake_contended;
      const size_t collectives = r.in_situ_awake_calls - transfers - (r.contended_extra_own ? contended : 0);
      // How a per-call cost was measured: the fit's L plus what the in-situ split gave `n`
      // executed calls of one kind ("collective", "transfer", or "call" for both).
      auto in_situ_note = [&](double extra_us, const std::string& kind, size_t n) {
        std::snprintf(buf, sizeof buf, "fitted L %.3g us + %.3g us per %s in situ (weighted median over %zu executed %ss, each its executions' median, beyond the fit with its bytes part / intra_efficiency%s)",
                      r.comm_fit.launch_us, extra_us, kind.c_str(), n, kind.c_str(),
                      r.in_situ_asleep_calls ? ", seen while polling" : "");
        return std::string(buf);
      };
      kv("launch_lat_us", fnum(t.collectives.launch_lat_us),
         r.p2p_extra_own || r.p2p_sweep_only ? in_situ_note(r.comm_in_situ_extra_us, "collective", collectives)
                         : in_situ_note(r.comm_in_situ_extra_us, "call", r.in_situ_awake_calls));
      if (r.p2p_extra_own) {
        kv("p2p_launch_lat_us", fnum(*t.collectives.p2p_launch_lat_us), in_situ_note(r.p2p_in_situ_extra_us, "transfer", transfers));
      } else if (r.p2p_sweep_only) {
        std::snprintf(buf, sizeof buf, "fitted L alone: %zu transfers executed, too few for a cost of their own (20), and the %zu collectives' is not theirs",
                      transfers, collectives);
        kv("p2p_launch_lat_us", fnum(*t.collectives.p2p_launch_lat_us), buf);
      } else {
        std::snprintf(buf, sizeof buf, "# p2p_launch_lat_us: as launch_lat_us (%zu transfers and %zu collectives executed; 20 of each tell them apart)",
                      transfers, collectives);
        line(buf);
      }
      if (r.call_tail_executions > 0) {
        std::snprintf(buf, sizeof buf, "in situ: per execution, its calls' mean time beyond their predicted time, the median over %zu executions (the per-call costs are weighted medians; the step pays the mean), waited after each call",
                      r.call_tail_executions);
        kv("call_tail_us", fnum(t.collectives.call_tail_us), buf);
      }
      if (r.contended_extra_own) {
        std::snprintf(buf, sizeof buf, "in situ: %.3g us per contended collective (weighted median over %zu executed calls whose last member arrived while another group's poller on the node spun) less launch's %.3g us",
                      r.contended_in_situ_extra_us, contended, r.comm_in_situ_extra_us);
        kv("contended_lat_us", fnum(t.collectives.contended_lat_us), buf);
      } else {
        std::snprintf(buf, sizeof buf, "# contended_lat_us: 0 (%zu executed collectives arrived while another group's poller on the node spun, %zu did not; 20 of each tell them apart)",
                      contended, r.in_situ_awake_calls - transfers - contended);
        line(buf);
      }
    } else {
      kv("launch_lat_us", fnum(t.collectives.launch_lat_us), "fitted L: once per call");
    }
    kv("step_lat_us", fnum(0.0), "folded into intra_lat_us (only their sum is identifiable on one node)");
    kv("reduce_gbps", fnum(t.collectives.reduce_gbps),
       t.collectives.reduce_gbps > 0 ? (slowed
                                            ? "fitted R x intra_efficiency (in situ): (n-1)/n x bytes combined per all-reduce / reduce-scatter"
                                            : "fitted R: (n-1)/n x bytes combined per all-reduce / reduce-scatter")
                                     : "fitted R: reductions cost nothing beyond the transfers here");
  } else {
    kv("launch_lat_us", fnum(t.collectives.launch_lat_us), "from the base topology");
    if (t.collectives.p2p_launch_lat_us) kv("p2p_launch_lat_us", fnum(*t.collectives.p2p_launch_lat_us), "from the base topology");
    kv("step_lat_us", fnum(t.collectives.step_lat_us), "from the base topology");
    kv("reduce_gbps", fnum(t.collectives.reduce_gbps), "from the base topology");
    if (t.collectives.contended_lat_us > 0) kv("contended_lat_us", fnum(t.collectives.contended_lat_us), "from the base topology");
    if (t.collectives.call_tail_us > 0) kv("call_tail_us", fnum(t.collectives.call_tail_us), "from the base topology");
  }
  kv("tree_max_bytes", fnum(t.collectives.tree_max_bytes));
  kv("intra_sms", fint(t.collectives.intra_sms), cpu ? "threads a communication op keeps busy on the rank's cores (base topology)" : "from the base topology");
  kv("inter_sms", fint(t.collectives.inter_sms));
  kv("p2p_sms", fint(t.collectives.p2p_sms));
  // A mean taken in situ (fit_all), or the base topology's value when no execution gave samples.
  const auto in_situ_mean = [&](const char* key, double value, const std::vector<double>& samples, const char* what) {
    if (samples.empty()) return kv(key, fnum(value), "from the base topology");
    std::snprintf(buf, sizeof buf, "in situ: mean %s, %zu samples (median %.3g us)", what, samples.size(), quantile(samples, 0.5));
    kv(key, fnum(value), buf);
  };
  {
    const std::vector<double> waits = arrival_waits(r.in_situ.arrivals);
    if (r.sync_drift() > 0) kv("sync_skew_us", fnum(0.0), "the wait for a collective's last member is sync_drift's");
    else if (waits.empty()) kv("sync_skew_us", fnum(t.collectives.sync_skew_us), "from the base topology");
    else {
      std::snprintf(buf, sizeof buf,
                    "in situ: the median over %zu executions of each one's mean wait for a collective's last member, "
                    "%zu samples (pooled mean %.3g us, median %.3g us)",
                    r.sync_skew_executions, waits.size(), trimmed_mean(waits, kInSituTrim), quantile(waits, 0.5));
      kv("sync_skew_us", fnum(t.collectives.sync_skew_us), buf);
    }
    // Where choose_arrival_model compared the two (arrival_model.hpp), what decided.
    char step[200] = "";
    if (!std::isnan(r.in_sample_drift_pct))
      std::snprintf(step, sizeof step,
                    "; the executions it was fitted on predicted %.2f %% off with it, %.2f %% with a constant skew",
                    r.in_sample_drift_pct, r.in_sample_skew_pct);
    std::snprintf(buf, sizeof buf,
                  "in situ: summed waits for a collective's last member / summed time since compute last waited for a call "
                  "(%.3g), %zu members, %s: its spread below tells the calls with a member asleep for %.0f %% of them, "
                  "no drift for %.0f %% (members weighed by 1 / call time)%s",
                  r.drift.rate, waits.size(), r.sync_drift() > 0 ? "used" : "not used", 100 * r.drift.right, 100 * r.drift.right_awake,
                  step);
    kv("sync_drift", fnum(t.collectives.sync_drift), waits.empty() ? "from the base topology" : buf);
    if (r.drift.spread > 0)
      std::snprintf(buf, sizeof buf,
                    "in situ: the members' spread per us since compute last waited that tells best which calls had a member "
                    "asleep (%.3g: from %.3g ms since), %s; twice sync_drift tells %.0f %%",
                    r.drift.spread, 1e-3 * exec::kPollSpinUs / r.drift.spread, r.spread_drift() > 0 ? "used" : "not used",
                    100 * r.drift.right_twice);
    else
      std::snprintf(buf, sizeof buf,
                    "in situ: no spread per us since compute last waited tells which calls had a member asleep better than "
                    "none asleep; twice sync_drift tells %.0f %%",
                    100 * r.drift.right_twice);
    kv("spread_drift", fnum(t.collectives.spread_drift), waits.empty() ? "from the base topology" : buf);
  }
  {
    const std::vector<double> acks = awake_acks(r.in_situ.acks, r.poll_spin_us(), CalibrationResult::kMinAwakeAcks);
    std::snprintf(buf, sizeof buf, "from a receive's end to its send's end where the sender's poller still spun (of %zu transfers)",
                  r.in_situ.acks.size());
    const std::string what = acks.size() < r.in_situ.acks.size() ? std::string(buf) : "from a receive's end to its send's end";
    in_situ_mean("p2p_ack_us", t.collectives.p2p_ack_us, acks, what.c_str());
  }
  if (cpu) kv("poll_spin_us", fnum(t.collectives.poll_spin_us), "the executor's MPI wait busy-polls this long, then sleeps");
  if (cpu)
    kv("poll_yield_us", fnum(t.collectives.poll_yield_us),
       "under core turns the poller hands its turn to a waiting thread every 32 tests: at once, next to ops of 10-1000 us");
  if (cpu) {
    std::snprintf(buf, sizeof buf,
                  "in situ: weighted median beyond the fit of %zu members of calls ending after a poller's spin window, less launch's in-situ part (all calls: %.3g us)",
                  r.in_situ_asleep_calls, r.comm_in_situ_extra_all_us);
    kv("wake_us", fnum(t.collectives.wake_us),
       r.in_situ_asleep_calls > 0 ? buf
       : r.have_in_situ_comm()    ? "too few executed calls ended after their spin window to measure it"
                                  : "from the base topology");
  }
  line("");

  // How well the fits describe the points (for people reading the file).
  line("# ---- Fits (docs/calibration.md) ----");
  for (const auto& [m, g] : r.gemm) {
    std::snprintf(buf, sizeof buf,
                  "# GEMM %s: t = %.3g us x batch + 2mnk batch / (%.4g GFLOP/s) + %.3g ns x (mk + kn) batch + %.3g ns x mn batch; "
                  "%lld shapes, rms error %.1f%%, max %.1f%%",
                  std::string(enum_to_string(m)).c_str(), g.call_us, g.flop_per_us * 1e-3, g.pack_us_per_elem * 1e3,
                  g.store_us_per_elem * 1e3, (long long)g.fit.samples, 100 * g.fit.rms_rel_error, 100 * g.fit.max_rel_error);
    line(buf);
  }
  for (const auto& [k, s] : r.stream_by_kind) {
    std::snprintf(buf, sizeof buf, "# %-16s t = %.3g us + bytes / %.4g GB/s  (%lld sizes, rms error %.1f%%)", k.c_str(),
                  s.latency_us, s.gbps(), (long long)s.fit.samples, 100 * s.fit.rms_rel_error);
    line(buf);
  }
  if (r.have_comm_fit) {
    std::snprintf(buf, sizeof buf, "# communication: L = %.3g us, alpha = %.3g us per step, B = %.4g GB/s; measured vs fitted:",
                  r.comm_fit.launch_us, r.comm_fit.step_us, r.comm_fit.gbps());
    line(buf);
    for (const CommPoint& p : r.comm) {
      std::snprintf(buf, sizeof buf, "#   %-14s %-4s n=%lld %10lld B  %10.1f us  fit %10.1f us%s", std::string(to_string(p.pattern)).c_str(),
                    std::string(enum_to_string(p.dtype)).c_str(), (long long)p.group, (long long)p.bytes, p.median_us(),
                    r.comm_fit.predict_us(p.pattern, p.group, static_cast<double>(p.bytes)),
                    p.weight > 0 ? ("  (scenario: " + std::to_string(static_cast<long long>(p.weight)) + " calls)").c_str() : "");
      line(buf);
    }
  }
  line("");
  line("[calibration]");
  kv("source", fstr(t.calibration.source));
  line("");
  // What validate holds its own executions against (the machine's drift since calibrating).
  for (const ExecutionPoint& e : t.calibration.executions) {
    line("[[calibration.execution]]  # executed in situ: what `validate` compares its executions' steps with");
    kv("scenario", fstr(e.scenario));
    kv("digest", fstr(e.digest));
    kv("executions", fint(e.executions));
    kv("launches", fint(e.launches));
    kv("step_median_s", fnum(e.step_median_s));
    kv("step_fast_s", fnum(e.step_fast_s), "the fastest half's median: the in-situ figures are the executions centred on it");
    kv("step_min_s", fnum(e.step_min_s));
    kv("step_max_s", fnum(e.step_max_s));
    line("");
  }
  // The dispatch gap by the node's computing ranks (where they share its cores).
  for (size_t i = 0; i < t.calibration.dispatch.size(); ++i) {
    const DispatchPoint& p = t.calibration.dispatch[i];
    const std::vector<double>& g = r.in_situ.dispatch_by_busy_us.at(p.busy_ranks);
    std::snprintf(buf, sizeof buf,
                  "[[calibration.dispatch]]  # in situ: mean gap after a compute op while %lld of the node's ranks computed, "
                  "%zu gaps (median %.3g us)\nbusy_ranks = %lld\ndispatch_us = %s\n\n",
                  (long long)p.busy_ranks, g.size(), quantile(g, 0.5), (long long)p.busy_ranks, fnum(p.dispatch_us).c_str());
    o += buf;
  }
  // The collectives' per-call cost by kind, group and phase (fit_all, CalibrationResult::call_costs).
  for (size_t i = 0; i < t.calibration.calls.size() && i < r.call_costs.size(); ++i) {
    const CallPoint& p = t.calibration.calls[i];
    const CalibrationResult::CallCost& k = r.call_costs[i];
    std::snprintf(buf, sizeof buf,
                  "[[calibration.call]]  # in situ: %zu executed calls (weighted median %.3g us beyond the fit and the "
                  "bytes' slow-down; other collectives %.3g us)\ncollective = \"%s\"\ngroup = \"%s\"\nphase = \"%s\"\n"
                  "launch_lat_us = %s\n",
                  k.calls, k.extra_us, r.comm_in_situ_extra_us, std::string(enum_to_string(p.collective)).c_str(),
                  std::string(enum_to_string(p.group)).c_str(), std::string(enum_to_string(p.phase)).c_str(),
                  fnum(p.launch_lat_us).c_str());
    o += buf;
    if (k.beside_extra_us) {
      std::snprintf(buf, sizeof buf,
                    "beside_lat_us = %s            # %zu of them ran while their rank computed: weighted median %.3g us "
                    "beyond the fit and the bytes' slow-down (launch_lat_us: the other %zu)\n",
                    fnum(p.beside_lat_us).c_str(), k.beside_calls, *k.beside_extra_us, k.calls - k.beside_calls);
      o += buf;
    }
    std::snprintf(buf, sizeof buf,
                  "executed_us = %s            # those calls' median time as executed (validate compares its runs' "
                  "with it)\n\n",
                  fnum(p.executed_us).c_str());
    o += buf;
  }
  // Points: medians over every rank and pass; the comment gives the spread and the origin.
  for (const OpSamples& s : r.compute) {
    const double med = s.median_us();
    if (med <= 0) continue;
    const std::string where = s.origin + ", " + std::to_string(s.us.size()) + " runs";
    if (s.key.kind == OpKind::gemm) {
      const double eff = 2.0 * static_cast<double>(s.key.m) * static_cast<double>(s.key.n) * static_cast<double>(s.key.k) *
                         static_cast<double>(s.key.batch) / (med * 1e6 * std::max(1e-12, d.peak(s.key.math)));
      std::snprintf(buf, sizeof buf,
                    "[[calibration.gemm]]  # %s, p25-p75 %.4g-%.4g us, %.1f%% of peak\nm = %lld\nn = %lld\nk = %lld\nbatch = %lld\nmath = \"%s\"\ntime_us = %s\n",
                    where.c_str(), s.quantile_us(0.25), s.quantile_us(0.75), 100 * eff, (long long)s.key.m, (long long)s.key.n,
                    (long long)s.key.k, (long long)s.key.batch, std::string(enum_to_string(s.key.math)).c_str(), fnum(med).c_str());
    } else {
      if (s.key.bytes <= 0) continue;
      std::snprintf(buf, sizeof buf, "[[calibration.kernel]]  # %s, p25-p75 %.4g-%.4g us\nkind = \"%s\"\nbytes = %lld\ntime_us = %s\n",
                    where.c_str(), s.quantile_us(0.25), s.quantile_us(0.75), std::string(enum_to_string(s.key.kind)).c_str(),
                    (long long)s.key.bytes, fnum(med).c_str());
    }
    o += buf;
  }
  return o;
}


}  // namespace paralab::calib
