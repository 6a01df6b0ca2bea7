// paralab — the topology file format: one field table per part (hardware keys; the calibration's
// scalar keys and each of its arrays of tables), read by the loader and written by
// `paralab calibrate` through the same tables (docs/config.md, docs/calibration.md "File").
#pragma once

#include <map>
#include <string>

#include "ir/field_table.hpp"
#include "ir/topology.hpp"

namespace paralab {

const FieldTable<Topology>& topology_fields();                // name, [device], [node], [network], [collectives]
const FieldTable<Calibration>& calibration_fields();          // [calibration] schema_version, source
const FieldTable<GemmPoint>& gemm_point_fields();             // [[calibration.gemm]]
const FieldTable<KernelPoint>& kernel_point_fields();         // [[calibration.kernel]]
const FieldTable<CorrectionRow>& correction_fields();         // [[calibration.correction]]
const FieldTable<ExecutionPoint>& execution_point_fields();   // [[calibration.execution]]

// What a written file says about how its values were obtained, by key ("device.mem_bw_gbps")
// or by array entry ("calibration.correction#3"), appended to the fields' own comments.
using TopologyNotes = std::map<std::string, std::string>;

// The topology as a file `load_topology` reads back to the same values: `header` (comment
// lines, each without its "# "), the hardware keys, then the calibration if it has one.
std::string topology_toml(const Topology& t, const std::string& header = "", const TopologyNotes& notes = {});

}  // namespace paralab
