// paralab tests — the correction table (ir/correction.hpp): its fixed hierarchy, lookup by the
// deepest class, the rows refused, the file's round trip through the one field table, the schema
// version; and the fit's classes (analysis/calibration/corrections.hpp).
#include <catch2/catch.hpp>

#include <stdexcept>

#include "analysis/calibration/corrections.hpp"
#include "ir/error.hpp"
#include "ir/topology_format.hpp"
#include "ir/topology_loader.hpp"
#include "../ir/test_util.hpp"

using namespace paralab;
using namespace paralab::calib;

namespace {

OpFacts gather(Span span, Phase phase, double bytes) { return OpFacts{OpKind::collective, CollKind::all_gather, span, phase, bytes}; }

CorrectionRow row(OpClass c, double fixed, double factor = 1.0) { return CorrectionRow{c, Correction{fixed, factor}}; }

}  // namespace

TEST_CASE("an op takes the deepest class that holds it", "[analysis][corrections]") {
  OpClass comm{CostKind::time, OpFamily::comm};
  OpClass ag{CostKind::time, OpFamily::comm, OpKind::collective, CollKind::all_gather};
  OpClass ag_intra_fwd = ag;
  ag_intra_fwd.span = Span::intra_node;
  ag_intra_fwd.phase = Phase::forward;
  OpClass bucket = ag_intra_fwd;
  bucket.min_bytes = 1024;
  bucket.max_bytes = 4096;
  const CorrectionTable t({row(comm, 1), row(ag, 2, 1.1), row(ag_intra_fwd, 3), row(bucket, 4, 2.0),
                           row(OpClass{CostKind::dispatch}, 7)});
  CHECK(t.find(CostKind::time, gather(Span::intra_node, Phase::forward, 2048)).fixed_us == 4);
  CHECK(t.find(CostKind::time, gather(Span::intra_node, Phase::forward, 8192)).fixed_us == 3);
  CHECK(t.find(CostKind::time, gather(Span::inter_node, Phase::forward, 2048)).fixed_us == 2);
  CHECK(t.find(CostKind::time, gather(Span::intra_node, Phase::backward, 2048)).factor == 1.1);
  CHECK(t.find(CostKind::time, OpFacts{OpKind::send, std::nullopt, Span::intra_node, Phase::forward, 10}).fixed_us == 1);
  CHECK(t.find(CostKind::time, OpFacts{OpKind::gemm}).identity());  // no compute row
  CHECK(t.find(CostKind::dispatch, OpFacts{OpKind::gemm}).fixed_us == 7);
  CHECK(t.find(CostKind::handoff, OpFacts{OpKind::gemm}).identity());
  CHECK(Correction{10, 1.5}.apply(100) == 160);
}

TEST_CASE("a row must name a prefix of the hierarchy", "[analysis][corrections]") {
  auto refused = [](OpClass c) { return !validate_class(c).empty(); };
  CHECK_FALSE(refused(OpClass{CostKind::time, OpFamily::compute, OpKind::gemm}));
  CHECK(refused(OpClass{CostKind::time, std::nullopt, OpKind::gemm}));                     // kind without family
  CHECK(refused(OpClass{CostKind::time, OpFamily::comm, OpKind::gemm}));                   // gemm is compute
  CHECK(refused(OpClass{CostKind::time, OpFamily::compute, OpKind::gemm, CollKind::all_reduce}));
  OpClass span_on_compute{CostKind::time, OpFamily::compute, OpKind::gemm};
  span_on_compute.span = Span::intra_node;
  CHECK(refused(span_on_compute));
  OpClass phase_skipping_span{CostKind::time, OpFamily::comm, OpKind::send};
  phase_skipping_span.phase = Phase::forward;
  CHECK(refused(phase_skipping_span));
  OpClass bucket_without_phase{CostKind::time, OpFamily::compute, OpKind::gemm};
  bucket_without_phase.max_bytes = 10;
  CHECK(refused(bucket_without_phase));
  OpClass empty_bucket{CostKind::time, OpFamily::compute, OpKind::gemm};
  empty_bucket.phase = Phase::forward;
  empty_bucket.min_bytes = empty_bucket.max_bytes = 10;
  CHECK(refused(empty_bucket));
  // Two rows for one class, overlapping buckets, a factor on a gap: refused with the class named.
  CHECK_THROWS_AS(CorrectionTable({row(OpClass{CostKind::dispatch}, 1), row(OpClass{CostKind::dispatch}, 2)}), std::invalid_argument);
  OpClass b1{CostKind::time, OpFamily::compute, OpKind::gemm};
  b1.phase = Phase::forward;
  OpClass b2 = b1;
  b1.min_bytes = 0, b1.max_bytes = 100, b2.min_bytes = 50, b2.max_bytes = 200;
  CHECK_THROWS_AS(CorrectionTable({row(b1, 1), row(b2, 1)}), std::invalid_argument);
  CHECK_THROWS_WITH(CorrectionTable({row(OpClass{CostKind::handoff}, 1, 2.0)}), Catch::Contains("factor must be 1"));
}

TEST_CASE("the fit's classes: every level that applies to an op, top down", "[analysis][corrections]") {
  CHECK(size_bucket(0) == std::pair<int64_t, int64_t>{0, 4});
  CHECK(size_bucket(4) == std::pair<int64_t, int64_t>{4, 16});
  CHECK(size_bucket(1 << 20) == std::pair<int64_t, int64_t>{1 << 20, 1 << 22});
  CHECK(size_bucket((1 << 20) - 1) == std::pair<int64_t, int64_t>{1 << 18, 1 << 20});
  const std::vector<OpClass> coll = class_chain(CostKind::time, gather(Span::intra_node, Phase::backward, 3000));
  REQUIRE(coll.size() == 7);  // every op, family, kind, collective, span, phase, bucket
  for (size_t i = 0; i < coll.size(); ++i) {
    CHECK(coll[i].depth() == static_cast<int>(i));
    CHECK(validate_class(coll[i]).empty());
    CHECK(coll[i].contains(gather(Span::intra_node, Phase::backward, 3000)));
  }
  const std::vector<OpClass> gemm = class_chain(CostKind::dispatch, OpFacts{OpKind::gemm, std::nullopt, std::nullopt, Phase::forward, 1e6});
  CHECK(gemm.size() == 5);  // every op, family, kind, phase, bucket
  // A call over one rank has no span: its chain stops at its kind.
  CHECK(class_chain(CostKind::time, OpFacts{OpKind::collective, CollKind::all_reduce, std::nullopt}).size() == 4);
}

TEST_CASE("a correction table goes through the file and back", "[analysis][corrections]") {
  Topology t = load_topology(data_dir() / "topologies" / "cpu-host.toml");
  t.calibration.schema_version = kCalibrationSchema;
  t.calibration.source = "test";
  OpClass b{CostKind::time, OpFamily::comm, OpKind::collective, CollKind::reduce_scatter};
  b.span = Span::inter_node;
  b.phase = Phase::backward;
  b.min_bytes = 4096;
  b.max_bytes = 16384;
  t.calibration.corrections = CorrectionTable({row(OpClass{CostKind::dispatch}, 1.953), row(b, 12.25, 1.0625),
                                               row(OpClass{CostKind::handoff, OpFamily::compute}, 0.1 + 0.2)});
  t.calibration.gemm.push_back({64, 128, 256, 2, MathMode::bf16, 13.28});
  t.calibration.executions.push_back({"s", "abc", 3, 0.5, 0.4, 0.6});
  test::TempFile f(topology_toml(t, "a header line\nanother"), "roundtrip.toml");
  const Topology back = load_topology(f.path());
  REQUIRE(back.calibration.corrections.rows().size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(back.calibration.corrections.rows()[i].cls == t.calibration.corrections.rows()[i].cls);
    CHECK(back.calibration.corrections.rows()[i].c.fixed_us == t.calibration.corrections.rows()[i].c.fixed_us);  // exactly
    CHECK(back.calibration.corrections.rows()[i].c.factor == t.calibration.corrections.rows()[i].c.factor);
  }
  CHECK(back.calibration.gemm.size() == 1);
  CHECK(back.calibration.gemm[0].batch == 2);
  CHECK(back.calibration.executions.at(0).step_max_s == 0.6);
  CHECK(back.device.peak(MathMode::f32) == t.device.peak(MathMode::f32));
  CHECK(back.node.intra_link.bw_gbps == t.node.intra_link.bw_gbps);
  // Written again, the same text: one field table reads and writes.
  CHECK(topology_toml(back, "a header line\nanother") == topology_toml(t, "a header line\nanother"));
}

TEST_CASE("a calibration without the current schema is refused, naming the upgrade", "[analysis][corrections]") {
  const std::string base = "name = \"x\"\n[device]\nkind = \"cpu\"\npeak_fp32_tflops = 1\nmemory_gib = 1\nmem_bw_gbps = 1\n"
                           "[node]\ndevices_per_node = 1\nintra = \"shm\"\nintra_bw_gbps = 1\n";
  test::TempFile old_key(base + "[collectives]\nsync_skew_us = 2\n", "old-key.toml");
  CHECK_THROWS_WITH(load_topology(old_key.path()), Catch::Contains("--upgrade") && Catch::Contains("collectives.sync_skew_us"));
  test::TempFile no_version(base + "[[calibration.gemm]]\nm = 1\nn = 1\nk = 1\ntime_us = 1\n", "no-version.toml");
  CHECK_THROWS_WITH(load_topology(no_version.path()), Catch::Contains("--upgrade"));
  test::TempFile newer(base + "[calibration]\nschema_version = 99\n", "newer.toml");
  CHECK_THROWS_WITH(load_topology(newer.path()), Catch::Contains("newer paralab"));
  test::TempFile bad_row(base + "[calibration]\nschema_version = 2\n[[calibration.correction]]\ncost = \"time\"\nphase = \"fwd\"\nfixed_us = 1\n",
                         "bad-row.toml");
  CHECK_THROWS_WITH(load_topology(bad_row.path()), Catch::Contains("a phase needs the op kind above it"));
  test::TempFile unknown(base + "[calibration]\nschema_version = 2\n[[calibration.correction]]\ncost = \"time\"\nfixed = 1\n",
                         "unknown.toml");
  CHECK_THROWS_AS(load_topology(unknown.path()), ConfigError);
}
