// paralab tests — what the calibration tests share: a small CPU scenario and a synthetic
// calibration with known parameters (test_calibrate.cpp, test_corrections.cpp).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "analysis/calibration/calibrate.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "../ir/test_util.hpp"

namespace paralab::calib::testing {

// A 4-layer tiny GPT in fp32 on `tensor` x `pipeline` CPU ranks of one node, on `topology`.
inline std::string cpu_scenario(const std::string& topology, int tensor = 2, int pipeline = 1) {
  return "[model]\npreset = \"tiny\"\nnum_layers = 4\n[training]\nglobal_batch_size = 4\nmicro_batch_size = 1\n"
         "precision = \"fp32\"\n[parallel]\ntensor = " + std::to_string(tensor) + "\npipeline = " + std::to_string(pipeline) +
         "\n[cluster]\ntopology = \"" + topology + "\"\nnodes = 1\ndevices_per_node = " + std::to_string(tensor * pipeline) + "\n";
}

// A synthetic calibration: every compute op of the IR "measured" at a time that is a known
// function of its work; communication on the alpha-beta model with known parameters.
inline CalibrationResult synthetic_result(const StepIR& ir) {
  CalibrationResult r;
  r.backend = "cpu";
  r.ranks = static_cast<int>(ir.layout.world());
  r.reps = 3;
  r.started_utc = "2024-01-01T00:00:00Z";
  r.host.hostname = "test-host";
  r.host.cpu_model = "Test CPU";
  r.host.cores = 2;
  r.host.cpu_mhz = 2000;
  r.host.theoretical_fp32_tflops_per_core = 0.064;
  r.paralab_version = "0.1.0+test";
  r.base = load_topology(data_dir() / "topologies" / "cpu-host.toml");
  std::map<OpKey, OpSamples> seen;
  for (const StepGraph& g : ir.stages)
    for (const Op& op : g.ops) {
      if (is_comm(op.kind)) continue;
      const OpKey k = op_key(op);
      OpSamples& s = seen[k];
      if (!s.us.empty()) continue;
      s.key = k;
      s.flops = op.flops;
      s.bytes = op.bytes;
      s.exec_flops = op.flops * (op.attention() ? 0.5 : 1.0);
      s.origin = "scenario test";
      const double t = op.gemm() ? 3.0 + op.flops / 40e3 : op.attention() ? 2.0 + s.exec_flops / 8e3 : 1.5 + op.bytes / 6e3;
      s.us = {t * 0.98, t, t * 1.03};
    }
  for (auto& [k, s] : seen) r.compute.push_back(s);
  for (CommPattern p : {CommPattern::all_reduce, CommPattern::all_gather, CommPattern::send_recv})
    for (int64_t bytes = 256; bytes <= (int64_t{1} << 20); bytes *= 16)
      r.comm.push_back({p, DType::f32, 2, bytes, {20.0 + comm_steps(p, 2) * 4.0 + comm_wire_bytes(p, 2, static_cast<double>(bytes)) / 3e3}, 0});
  r.copy_gbps = 10.0;
  fit_all(r);
  return r;
}

}  // namespace paralab::calib::testing
