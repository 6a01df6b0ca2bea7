// paralab — golden results: every scenario in scenarios/ (not the presets) is simulated and
// its key figures compared with tests/scenarios/golden/<name>.json at a tight tolerance, so
// any change to the IR, the compute model, the network or the engine that moves a prediction
// shows up here. Regenerate deliberately: PARALAB_UPDATE_GOLDEN=1 <this test binary>.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "results/result_io.hpp"
#include "sim/simulate.hpp"

using namespace paralab;
namespace fs = std::filesystem;

namespace {

// The fields compared (dotted paths into the summary JSON).
const char* const kKeys[] = {
    "world_size",          "step_time_s",        "tokens_per_s",          "model_tflops_per_gpu",
    "hardware_tflops_per_gpu", "mfu",             "bubble_fraction",       "peak_memory_gib",
    "fits_in_memory",      "breakdown.compute_s", "breakdown.bubble_s",    "breakdown.exposed_comm_s.tp",
    "breakdown.exposed_comm_s.cp", "breakdown.exposed_comm_s.dp", "breakdown.exposed_comm_s.pp",
    "breakdown.exposed_comm_s.other",
};
constexpr double kRelTol = 1e-6;
constexpr double kAbsTol = 1e-9;

const nlohmann::json* at_path(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json* cur = &j;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object() || !cur->contains(key)) return nullptr;
    cur = &(*cur)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

nlohmann::json golden_of(const StepResult& r) {
  nlohmann::json j = summary_json(r);
  j.erase("sim_wall_s");
  j.erase("wall_s");
  j.erase("events");  // the network's event count may change without moving a prediction
  return j;
}

struct Outcome {
  std::vector<std::string> problems;
  int checked = 0, written = 0;
};

Outcome check_dir(const fs::path& scenarios, const fs::path& golden, bool update) {
  Outcome out;
  std::set<std::string> names;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(scenarios))
    if (e.is_regular_file() && e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string name = f.stem().string();
    names.insert(name);
    const StepResult r = sim::simulate(build_step_ir(load_scenario(f))).result;
    const nlohmann::json now = golden_of(r);
    const fs::path gfile = golden / (name + ".json");
    if (update) {
      fs::create_directories(golden);
      std::ofstream(gfile) << now.dump(2) << "\n";
      ++out.written;
      continue;
    }
    std::ifstream in(gfile);
    if (!in) {
      out.problems.push_back(name + ": no golden result " + gfile.string() +
                             " (generate it with PARALAB_UPDATE_GOLDEN=1 and commit it)");
      continue;
    }
    nlohmann::json want;
    in >> want;
    ++out.checked;
    for (const char* key : kKeys) {
      const nlohmann::json *a = at_path(now, key), *b = at_path(want, key);
      if (!a || !b) {
        out.problems.push_back(name + ": field " + key + (a ? " missing from the golden" : " missing from the result"));
        continue;
      }
      if (a->is_boolean() || b->is_boolean()) {
        if (*a != *b) out.problems.push_back(name + ": " + key + " is " + a->dump() + ", golden " + b->dump());
        continue;
      }
      const double x = a->get<double>(), y = b->get<double>();
      if (std::abs(x - y) > kAbsTol + kRelTol * std::abs(y))
        out.problems.push_back(name + ": " + key + " is " + a->dump() + ", golden " + b->dump());
    }
  }
  if (!update && fs::exists(golden))
    for (const auto& e : fs::directory_iterator(golden))
      if (e.path().extension() == ".json" && !names.count(e.path().stem().string()))
        out.problems.push_back("golden " + e.path().filename().string() + " has no scenario in " + scenarios.string() +
                               " (remove it)");
  return out;
}

bool update_requested() {
  const char* v = std::getenv("PARALAB_UPDATE_GOLDEN");
  return v && *v && std::string(v) != "0";
}

}  // namespace

TEST_CASE("golden: every scenario in scenarios/ matches its golden result", "[golden]") {
  const fs::path src = PARALAB_SOURCE_DIR;
  const Outcome o = check_dir(src / "scenarios", src / "tests" / "scenarios" / "golden", update_requested());
  for (const std::string& p : o.problems) UNSCOPED_INFO(p);
  CHECK(o.problems.empty());
  if (update_requested()) WARN("wrote " << o.written << " golden results");
}

TEST_CASE("golden: mismatches, missing and stale goldens are reported", "[golden]") {
  const fs::path dir = fs::temp_directory_path() / ("paralab-golden-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "scenarios");
  std::ofstream(dir / "scenarios" / "small.toml")
      << "[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 16\n[parallel]\ntensor = 2\npipeline = 2\n"
         "[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\n";
  const fs::path golden = dir / "golden";
  CHECK(check_dir(dir / "scenarios", golden, false).problems.size() == 1);  // missing
  CHECK(check_dir(dir / "scenarios", golden, true).written == 1);           // regenerate
  const Outcome ok = check_dir(dir / "scenarios", golden, false);
  CHECK(ok.problems.empty());
  CHECK(ok.checked == 1);
  // Perturb the golden step time by 1e-4 (relative): caught.
  nlohmann::json j;
  std::ifstream(golden / "small.json") >> j;
  j["step_time_s"] = j["step_time_s"].get<double>() * (1 + 1e-4);
  std::ofstream(golden / "small.json") << j.dump(2);
  const Outcome bad = check_dir(dir / "scenarios", golden, false);
  REQUIRE(bad.problems.size() == 1);
  CHECK(bad.problems[0].find("step_time_s") != std::string::npos);
  // A golden without its scenario is stale.
  std::ofstream(golden / "gone.json") << "{}";
  CHECK(check_dir(dir / "scenarios", golden, false).problems.size() == 2);
  fs::remove_all(dir);
}
