// paralab — the calibration's fits (fit_all): the least-squares fits of the model's
// parameters (GEMM rate and packing by shape, streaming kernels, alpha-beta per link) and what
// the in-situ execution sets (gaps, arrival skew or drift, per-call overhead, wake time,
// acknowledgement, compute tail); docs/calibration.md, "Fits" and "In-situ execution".
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/calibrate.hpp"
#include "analysis/calibration_device_fit.hpp"
#include "analysis/lad_fit.hpp"
#include "exec/comm.hpp"
#include "ir/enum_names.hpp"

namespace paralab::calib {

// ---- Fits ------------------------------------------------------------------------------------------

void fit_all(CalibrationResult& r) {
  std::vector<GemmSample> gs;
  std::set<MathMode> maths;
  std::vector<StreamSample> ss;
  std::map<std::string, std::vector<StreamSample>> by_kind;
  for (const OpSamples& s : r.compute) {
    const double t = s.median_us();
    if (t <= 0) continue;
    if (s.key.kind == OpKind::gemm) {
      gs.push_back({s.key.m, s.key.n, s.key.k, s.key.batch, s.key.math, t});
      maths.insert(s.key.math);
    } else if (!is_comm(s.key.kind) && !is_matmul(s.key.kind) && s.bytes > 0) {  // memory-bound kernels
      const std::string kind(enum_to_string(s.key.kind));
      ss.push_back({"", s.bytes, t});
      by_kind[kind].push_back({kind, s.bytes, t});
    }
  }
  r.gemm.clear();
  for (MathMode m : maths) r.gemm[m] = fit_gemm(gs, m);
  if (!ss.empty()) r.stream = fit_streaming(ss);
  r.stream_by_kind.clear();
  for (const auto& [k, v] : by_kind) r.stream_by_kind[k] = fit_streaming(v);

  // Fused attention: t - t_launch = executed FLOPs / (P(math) * efficiency), P the described
  // device's peak of the attention's math (the simulator's, sim/compute/compute_attention.cpp):
  // regressed on x = executed FLOPs / P(math), the slope is 1 / efficiency. On a CPU the bf16/f16
  // "peaks" are their measured GEMM rates over the efficiency (detail::device_fit).
  const detail::DeviceFit dev = detail::device_fit(r);
  for (OpKind kind : {OpKind::attention_fwd, OpKind::attention_bwd}) {
    std::vector<std::vector<double>> X;
    std::vector<double> y;
    for (const OpSamples& s : r.compute) {
      if (s.key.kind != kind) continue;
      const double t = s.median_us() - std::max(0.0, r.stream.latency_us);
      const double peak_flop_per_us = dev.at(s.key.math) * 1e6;
      if (t > 0 && s.exec_flops > 0 && peak_flop_per_us > 0) {
        X.push_back({s.exec_flops / peak_flop_per_us});
        y.push_back(t);
      }
    }
    if (X.empty()) continue;
    const LinearFit f = relative_least_squares(X, y, true);
    const double eff = f.coef[0] > 0 ? 1.0 / f.coef[0] : 0.0;
    (kind == OpKind::attention_fwd ? r.flash_fwd_efficiency : r.flash_bwd_efficiency) = std::clamp(eff, 1e-4, 1.0);
  }

  // The scenarios' calls weigh by how often they occur; the sweep together weighs a tenth of
  // them (it keeps the fit sane beyond the scenarios' sizes), or everything alike without
  // scenarios.
  double scenario_weight = 0;
  int64_t sweep_points = 0;
  for (const CommPoint& p : r.comm) {
    scenario_weight += p.weight;
    sweep_points += p.weight <= 0;
  }
  const double sweep_weight = scenario_weight > 0 && sweep_points > 0 ? 0.1 * scenario_weight / static_cast<double>(sweep_points) : 1.0;
  std::vector<CommSample> cs;
  for (const CommPoint& p : r.comm)
    if (p.median_us() > 0)
      cs.push_back({p.pattern, p.group, static_cast<double>(p.bytes), p.median_us(), p.weight > 0 ? p.weight : sweep_weight});
  r.have_comm_fit = !cs.empty();
  if (r.have_comm_fit) r.comm_fit = fit_alpha_beta(cs);

  // In situ (in_situ.hpp). The hand-off and the arrival skew are means (what they add to a
  // step is their sum), trimmed by 0.5 % each side so that a single descheduling of
  // milliseconds during the calibration's few steps does not set them. The dispatch gap and
  // the calls' time beyond the alpha-beta fit are medians: the dispatch gap's tail is the
  // rank's own communication thread polling on its core (a rank is bound to one core), which
  // the per-call communication time already counts; the median call is also what the per-op
  // comparison scores. Where a stage's ranks outnumber the cores (in_situ.hpp, `turns` > 1) the
  // dispatch gap is a mean too: the simulator's pool waits one turn per op for them, in
  // lockstep, and the gap's tail beyond that (the turn queue: other ranks' pollers, the
  // turn's hand-off) is in no other parameter and every step pays (cpu-tp2-dp2-zero3: net
  // median 32 us, mean 42 us). Where the stages share the cores but each fits them (cpu-pp4,
  // cpu-tp2-pp2-gpipe) the pool's queue between stages has that tail: the mean put their
  // predictions 9-18 % above their calibrations' executions, the median 2-11 %
  // (bench/results/validate_cpu.md, "thirty-second session"). The samples are net of the
  // pool's turns and may be negative; the means are not.
  constexpr double kTrim = kInSituTrim;
  r.dispatch_us = r.in_situ.turns > 1.0 ? std::max(0.0, trimmed_mean(r.in_situ.dispatch_us, kTrim))
                                        : quantile(r.in_situ.dispatch_us, 0.5);
  // By the node's computing ranks (calibrate.hpp, dispatch_by_busy): a mean, as what a step
  // adds up is their sum, and the simulator's pollers give their cores to waiting compute
  // (CollectiveSpec::poll_yield_us), so no pool queue between stages adds a tail of its own.
  r.dispatch_by_busy.clear();
  if (r.ranks > r.host.cores && r.host.cores > 0) {
    for (const auto& [busy, gaps] : r.in_situ.dispatch_by_busy_us)
      if (gaps.size() >= CalibrationResult::kMinDispatchGaps)
        r.dispatch_by_busy.push_back({busy, std::max(0.0, trimmed_mean(gaps, kTrim))});
    if (r.dispatch_by_busy.size() < 2) r.dispatch_by_busy.clear();
  }
  r.stream_handoff_us = trimmed_mean(r.in_situ.handoff_us, kTrim);
  r.compute_handoff_us = std::max(0.0, trimmed_mean(r.in_situ.compute_handoff_us, kTrim));
  // The wake-up's own cost: the typical hand-off. Its tail (quickstart: median 17.5 us, mean
  // 149 us) is a woken worker waiting for a core its compute thread keeps (DeviceSpec).
  r.handoff_on_core_us = r.in_situ.handoff_us.empty() ? 0.0 : std::min(quantile(r.in_situ.handoff_us, 0.5), r.stream_handoff_us);
  // The arrival skew is the median execution's mean wait, not the pooled mean: as compute_tail
  // below, what the median-step run pays (median_execution_wait, in_situ.hpp).
  r.sync_skew_us = median_execution_wait(r.in_situ.arrivals, kTrim, &r.sync_skew_executions);
  // On a CPU host a poller sleeps after spinning exec::kPollSpinUs; the drift is used when it
  // says which calls had a member asleep clearly better than no drift does (DriftFit::use; it
  // then carries the whole mean wait). On cpu-tp2-dp2-zero3 (4 ranks time-sharing 2 cores) it
  // did not (75 % of the members right against 81 %), on quickstart it did (70 % against 41 %):
  // bench/results/validate_cpu.md, "eighth session". Members weigh 1 / their call's time
  // (DriftFit): quickstart's op MAPE was 22-26 % with the drift and 10-11 % without
  // ("eleventh session"), as a 150 us call put to sleep is off by more than a 350 us one left awake.
  // The whole step has the last word: choose_arrival_model (arrival_model.hpp) fits again
  // without it (drift_allowed false) when the constant predicts the executions better.
  const double spin_us = r.poll_spin_us();
  r.drift = fit_drift(r.in_situ.arrivals, spin_us, kTrim);
  if (r.drift_used()) r.sync_skew_us = 0;
  r.p2p_ack_us = trimmed_mean(awake_acks(r.in_situ.acks, spin_us, CalibrationResult::kMinAwakeAcks), kTrim);
  // The step's own compute times (in situ, the keys' points are their medians): what a step's
  // compute took beyond its ops' medians, as a fraction, in the median execution (validate
  // compares one run, its fastest half's median; a rare descheduling of milliseconds in one execution is not
  // what a typical step pays). A step adds up its ops' times, the per-op comparison scores
  // medians: on cpu-1rank-fp16 the per-op medians summed 4.8 % under the median run's compute
  // (bench/results/validate_cpu.md, "eleventh session").
  {
    std::map<OpKey, double> median;
    for (const OpSamples& s : r.compute)
      if (s.origin.rfind("execution", 0) == 0 && !s.us.empty()) median[s.key] = s.median_us();
    std::vector<double> ratios;
    r.compute_tail_samples = 0;
    if (!r.compute_cpu_time && !median.empty())
      for (const auto& exec : r.in_situ.compute_by_execution) {
        double sum = 0, medians = 0;
        for (const auto& [key, ks] : exec) {
          const auto it = median.find(key);
          if (it == median.end()) continue;
          sum += ks.us;
          medians += static_cast<double>(ks.n) * it->second;
          r.compute_tail_samples += static_cast<size_t>(ks.n);
        }
        if (medians > 0) ratios.push_back(sum / medians - 1.0);
      }
    r.compute_tail = ratios.empty() ? 0.0 : std::clamp(quantile(ratios, 0.5), 0.0, 1.0);
    r.compute_tail_executions = ratios.size();
  }
  if (r.have_in_situ_comm()) {
    // On a CPU host a call that ends after a poller stopped spinning (the wait of its first
    // participant for the last, plus the call's fitted time, beyond the spin window) ends when
    // that poller next wakes and moves its part of the data, for every member: those calls
    // set wake_us, the others the per-call extras (bench/results/validate_cpu.md, "eighth
    // session": quickstart's calls whose last member came 0.5 ms after the first took a median
    // 222 us more than the others, on both members). A wake time needs enough calls of both
    // kinds to be a median.
    constexpr size_t kMinWakeCalls = 20;  // also the least of each kind for the transfers' own extra
    // The per-call cost's classes (offsets of the split below).
    constexpr size_t kCollective = 0, kTransfer = 1, kContended = 2, kClasses = 3;
    // One point per executed call and kind (awake, asleep): the median of its executions, as
    // the per-op comparison takes an op's runs; a sample without a call (CommSample::op < 0)
    // is a call of its own. On 4 ranks sharing 2 cores one call's executions split between
    // a few us and 100+ us (waiting for a core): pooled, the 1 / time weights would follow
    // the fast ones; per call, the median decides, as it does for the measured reference.
    struct Call {
      std::vector<double> extra_us;
      double fit_us = 0, bytes_us = 0;
      size_t cls = 0;  // kCollective, kTransfer or kContended
      std::optional<CallClass> call_class;
      bool beside = false;  // its rank computed during it (CommSample::beside_compute)
    };
    // A collective contended: another group's or stage's poller on its node still spun when
    // its last member arrived (CommSample::contended_since_us); its executions so found are a
    // call of their own, as the simulator decides it per call; so are those beside compute.
    std::map<std::tuple<bool, bool, bool, int64_t, int64_t>, Call> calls;  // (asleep, contended, beside, rank, op)
    for (size_t i = 0; i < r.in_situ.comm.size(); ++i) {
      const CommSample& c = r.in_situ.comm[i];
      const double fit_us = r.comm_fit.predict_us(c.pattern, c.group, c.bytes);
      const bool slept = spin_us > 0 && (r.drift_used() ? c.spread_us : c.waited_us) + fit_us > spin_us;
      const bool transfer = c.pattern == CommPattern::send_recv;
      const bool contended = !transfer && spin_us > 0 && c.contended_since_us >= 0 && c.contended_since_us < spin_us;
      Call& k = calls[{slept, contended, c.beside_compute, c.op < 0 ? -1 - static_cast<int64_t>(i) : c.rank, c.op}];
      k.extra_us.push_back(c.time_us - fit_us);
      k.fit_us = fit_us;
      k.bytes_us = r.comm_fit.bytes_us(c.pattern, c.group, c.bytes);
      k.cls = transfer ? kTransfer : contended ? kContended : kCollective;
      k.call_class = c.call_class;
      k.beside = c.beside_compute;
    }
    // Per call: y its time beyond the fit, x the fit's bytes part of it (AlphaBetaFit::bytes_us),
    // w 1 / its time (the per-op comparison scores relative errors), its class.
    // Each point's collective class (CommSample::call_class), alongside.
    std::vector<LadPoint> awake, asleep;
    std::vector<std::optional<CallClass>> awake_class, asleep_class;
    std::vector<bool> awake_beside, asleep_beside;
    std::vector<double> awake_time, asleep_time;  // each call's median time (us), alongside
    for (auto& [id, k] : calls) {
      const double extra = quantile(std::move(k.extra_us), 0.5);
      // Timed below 1 us a call weighs as 1 us (compare scores no op under the timer's resolution).
      (std::get<0>(id) ? asleep : awake).push_back({extra, k.bytes_us, 1.0 / std::max(1.0, k.fit_us + extra), k.cls});
      (std::get<0>(id) ? asleep_class : awake_class).push_back(k.call_class);
      (std::get<0>(id) ? asleep_beside : awake_beside).push_back(k.beside);
      (std::get<0>(id) ? asleep_time : awake_time).push_back(k.fit_us + extra);
    }
    const bool split = awake.size() >= kMinWakeCalls && asleep.size() >= kMinWakeCalls;
    std::vector<LadPoint> all = awake;
    all.insert(all.end(), asleep.begin(), asleep.end());
    if (!split) {
      awake = all;
      awake_class.insert(awake_class.end(), asleep_class.begin(), asleep_class.end());
      awake_beside.insert(awake_beside.end(), asleep_beside.begin(), asleep_beside.end());
      awake_time.insert(awake_time.end(), asleep_time.begin(), asleep_time.end());
      asleep.clear();
      asleep_class.clear();
      asleep_beside.clear();
      asleep_time.clear();
    }
    r.in_situ_awake_calls = awake.size();
    r.in_situ_asleep_calls = asleep.size();
    size_t transfers = 0, contended = 0;
    for (const LadPoint& p : awake) {
      transfers += p.cls == kTransfer;
      contended += p.cls == kContended;
    }
    r.in_situ_awake_transfers = transfers;
    r.in_situ_awake_contended = contended;
    // Transfers and collectives get their own per-call cost when enough of each were seen: on
    // a host whose ranks share cores a collective's ring needs every member's thread to run, a
    // transfer only its receiver's (cpu-tp2-pp2-gpipe: 103 against 1.8 us;
    // bench/results/validate_cpu.md, "seventeenth session").
    r.p2p_extra_own = awake.size() - transfers >= kMinWakeCalls && transfers >= kMinWakeCalls;
    // Too few transfers for a cost of their own beside enough collectives: the collectives'
    // cost is not theirs, so they take the sweep's fit alone. Since a call is one op on one
    // rank, cpu-tp2-pp2-gpipe has 12-16 awake transfers against 300+ collectives; with the
    // collectives' 9.5 us its receives' class MAPE was 111 %, with the fit alone 80 %, its op
    // MAPE 0.31-0.58 points lower in each of N42-N50 (bench/results/validate_cpu.md,
    // "fifty-third session"). They stay a class of their own in the split below (their offset
    // unused), so the collectives' cost and the bytes' slow-down are the collectives'.
    r.p2p_sweep_only = !r.p2p_extra_own && transfers > 0 && awake.size() - transfers >= kMinWakeCalls;
    // Contended collectives likewise get their own (CollectiveSpec::contended_lat_us): on
    // cpu-tp2-dp2-zero3 the 32 KB TP all-gathers took a median 80 us from their last arrival
    // with a DP call's poller spinning, 44 us without (bench/results/validate_cpu.md,
    // "thirty-seventh session").
    r.contended_extra_own = contended >= kMinWakeCalls && awake.size() - transfers - contended >= kMinWakeCalls;
    // The awake calls' time beyond the fit = a per-call cost (per kind) + c x the fit's bytes
    // part, by weighted least absolute deviations (lad_fit.hpp): the executed step's buffers
    // are not the sweep's, warm in cache and reused call after call, and its calls moved their
    // bytes slower (quickstart's 1 MB all-gathers took 97 us beyond the fit's 41 us, its 2 KB
    // all-reduces 21-37 us beyond 1 us; a constant per call predicted both at 118 us:
    // bench/results/validate_cpu.md, "twenty-first session"). The slope is the in-situ slow-down
    // of the bytes part (the topology's intra_efficiency = 1 / (1 + c)); with one size of
    // call it stays 0 and the per-call cost says it all. A per-call cost is not negative: a
    // call costs no less than the sweep's fit says.
    constexpr double kMaxSlowdown = 20.0;
    // The class whose per-call cost a call takes: contended calls and transfers without enough
    // of their kind take the collectives' (one per-call cost for them all), but transfers on
    // the sweep's L keep a class of their own, whose offset is not used.
    auto fitted_class = [&r](size_t cls) {
      return (cls == kContended && !r.contended_extra_own) || (cls == kTransfer && !r.p2p_extra_own && !r.p2p_sweep_only) ? kCollective : cls;
    };
    std::vector<LadPoint> pts = awake;
    for (LadPoint& p : pts) p.cls = fitted_class(p.cls);
    const OffsetSlopeFit split_fit = fit_offsets_slope(pts, kClasses, kMaxSlowdown, 0.0);
    r.comm_in_situ_bytes_slowdown = split_fit.slope;
    const double c = split_fit.slope;
    // The weighted median of the calls' extras beyond the bytes' slow-down.
    auto extras = [c](const std::vector<LadPoint>& of) {
      std::vector<std::pair<double, double>> out;
      for (const LadPoint& p : of) out.push_back({p.y - c * p.x, p.w});
      return weighted_median(std::move(out));
    };
    r.comm_in_situ_extra_all_us = std::max(0.0, extras(all));
    const double pooled = std::max(0.0, extras(awake));
    r.comm_in_situ_extra_us = std::max(0.0, split_fit.offset[0]);
    r.p2p_in_situ_extra_us = r.p2p_extra_own    ? std::max(0.0, split_fit.offset[kTransfer])
                             : r.p2p_sweep_only ? 0.0
                                                : r.comm_in_situ_extra_us;
    r.contended_in_situ_extra_us = r.contended_extra_own ? std::max(0.0, split_fit.offset[kContended]) : r.comm_in_situ_extra_us;

    // Per class of collective (kind, group kind, phase), its own per-call cost where at least
    // kMinWakeCalls awake calls of it were seen, not contended (a contended call keeps its
    // class's, whatever its kind): with the slope fixed, each class's LAD offset is the
    // weighted median of its calls' extras beyond it, as the split's offsets are. On a CPU host
    // what a call costs follows what came before it: quickstart's backward reduce-scatters come
    // after a GEMM of milliseconds, their forward all-gathers after a layer norm; per (kind,
    // phase) costs took its op MAPE from 14.0-19.2 % to 8.8-12.1 % in-sample ("thirty-ninth
    // session"), and fitted here from the calibration's executions 1.5-2.4 points lower than
    // one cost for all against the same references (bench/results/validate_cpu.md, "fortieth
    // session").
    r.call_costs.clear();
    {
      // Also each class's calls' median time as executed, which validate compares its own runs'
      // calls with (the host's communication can change speed between the two: comm_speeds.hpp).
      // Per class, its calls beside compute and the others apart (their extras, weights).
      using Extras = std::vector<std::pair<double, double>>;
      std::map<CallClass, std::array<Extras, 2>> by_class;
      std::map<CallClass, std::vector<double>> times;
      for (size_t i = 0; i < pts.size(); ++i)
        if (pts[i].cls == kCollective && awake_class[i]) {
          by_class[*awake_class[i]][awake_beside[i] ? 1 : 0].push_back({pts[i].y - c * pts[i].x, pts[i].w});
          times[*awake_class[i]].push_back(awake_time[i]);
        }
      for (auto& [cls, v] : by_class) {
        Extras& plain = v[0];
        Extras& beside = v[1];
        const size_t n = plain.size() + beside.size();
        if (n < kMinWakeCalls) continue;
        CalibrationResult::CallCost k;
        k.cls = cls;
        k.calls = n;
        k.executed_us = quantile(times[cls], 0.5);
        // Beside compute (CallPoint::beside_lat_us): a cost of its own where the job's ranks
        // outnumber the cores, enough calls of both kinds were seen and it is the higher (a core
        // shared with compute only adds time); else one cost for the class's calls, as before.
        // cpu-tp2-dp2-zero3's backward TP all-gathers: 112 against 46 us from their last arrival
        // ("fifty-second session"). Where each rank has its own cores the simulator already
        // gives a woken call's thread the rank's core and stops compute for it (CoreShare's
        // rank_cores): a cost beside compute there counted the same contention twice
        // (quickstart: op MAPE 5.5 -> 5.9 % on N48's reference).
        const bool shared_cores = r.host.cores > 0 && r.ranks > r.host.cores;
        if (shared_cores && plain.size() >= kMinWakeCalls && beside.size() >= kMinWakeCalls) {
          const double plain_us = std::max(0.0, weighted_median(plain));
          const double beside_us = std::max(0.0, weighted_median(beside));
          if (beside_us > plain_us) {
            k.extra_us = plain_us;
            k.beside_extra_us = beside_us;
            k.beside_calls = beside.size();
            r.call_costs.push_back(k);
            continue;
          }
        }
        plain.insert(plain.end(), beside.begin(), beside.end());
        k.extra_us = std::max(0.0, weighted_median(std::move(plain)));
        r.call_costs.push_back(k);
      }
    }
    // A collective's own per-call cost beyond the fit: its class's where it has one (beside
    // compute, that one's where the class has it). nullopt for a call without one (contended, a
    // transfer, a class with too few calls).
    auto class_extra = [&r](const std::optional<CallClass>& cls, bool beside) -> std::optional<double> {
      if (!cls) return std::nullopt;
      for (const CalibrationResult::CallCost& k : r.call_costs)
        if (k.cls == *cls) return beside && k.beside_extra_us ? *k.beside_extra_us : k.extra_us;
      return std::nullopt;
    };
    // The wake time: what the asleep calls took beyond the awake ones (their weighted median),
    // each beyond its own class's cost where it has one (the simulator adds wake_us to that).
    if (split) {
      std::vector<std::pair<double, double>> beyond;
      for (size_t i = 0; i < asleep.size(); ++i) {
        const LadPoint& p = asleep[i];
        // (A transfer has no class: class_extra gives it none. One on the sweep's fit alone
        // has no per-call cost beyond it.)
        const std::optional<double> own = fitted_class(p.cls) == kCollective ? class_extra(asleep_class[i], asleep_beside[i])
                                          : p.cls == kTransfer && r.p2p_sweep_only ? std::optional<double>(0.0)
                                                                                   : std::nullopt;
        beyond.push_back({p.y - c * p.x - own.value_or(pooled), p.w});
      }
      r.wake_us = std::max(0.0, weighted_median(std::move(beyond)));
    } else {
      r.wake_us = 0.0;
    }

    // The calls' tail (CollectiveSpec::call_tail_us): per execution, its calls' mean time beyond
    // what the simulator will predict for each (the fit, its class's per-call cost, the bytes'
    // slow-down, wake_us for a sleeper), the median over the executions, at least 0. The
    // per-call costs are weighted medians; the step pays the mean (as compute_tail, above).
    std::map<int64_t, std::pair<double, size_t>> by_execution;  // execution -> (residuals' sum, calls)
    for (const CommSample& call : r.in_situ.comm) {
      if (call.execution < 0) continue;
      const double fit_us = r.comm_fit.predict_us(call.pattern, call.group, call.bytes);
      const bool slept = split && spin_us > 0 && (r.drift_used() ? call.spread_us : call.waited_us) + fit_us > spin_us;
      const bool transfer = call.pattern == CommPattern::send_recv;
      const bool is_contended = !transfer && r.contended_extra_own && spin_us > 0 && call.contended_since_us >= 0 &&
                                call.contended_since_us < spin_us;
      const double per_call = transfer       ? r.p2p_in_situ_extra_us
                              : is_contended ? r.contended_in_situ_extra_us
                                             : class_extra(call.call_class, call.beside_compute).value_or(r.comm_in_situ_extra_us);
      const double predicted = fit_us + per_call + c * r.comm_fit.bytes_us(call.pattern, call.group, call.bytes) + (slept ? r.wake_us : 0.0);
      auto& [sum, n] = by_execution[call.execution];
      sum += call.time_us - predicted;
      ++n;
    }
    std::vector<double> means;
    for (const auto& [e, sn] : by_execution) means.push_back(sn.first / static_cast<double>(sn.second));
    r.call_tail_executions = means.size();
    r.call_tail_us = means.empty() ? 0.0 : std::max(0.0, quantile(means, 0.5));
  }
}

}  // namespace paralab::calib
