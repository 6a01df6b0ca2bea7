// paralab — the table of commands.
#include "apps/commands.hpp"

namespace paralab::cli {

std::span<const Command> commands() {
  static constexpr Command table[] = {
      {"inspect", "parameters, FLOPs, communication and memory per rank, from the IR alone", &run_inspect,
       "paralab inspect SCENARIO [--json] [--dump-ir FILE [--rank R]] [--set section.key=value ...]"},
      {"execute", "run the step for real (under mpirun, one rank per device): measured trace and summary", &run_execute,
       "mpirun -np N paralab execute SCENARIO [--backend cpu|cuda] [--json] [--trace FILE] [--verify] [--watchdog S] [--steps N]"},
      {"simulate", "predicted step time, throughput, MFU, memory and breakdown on the modeled hardware", &run_simulate,
       "paralab simulate SCENARIO [--json] [--trace FILE] [--set section.key=value ...] | --chakra DIR [--topology T]"},
      {"compare", "per-op and per-step error between a predicted and a measured result", &run_compare,
       "paralab compare PREDICTED MEASURED [--json] [--top N] [--report FILE.html]"},
      {"plan", "every valid layout for the model and cluster, simulated and ranked", &run_plan,
       "paralab plan SCENARIO [--json] [--csv FILE] [--top N] [--baseline k=v,...] [--threads N] [--exact]"},
      {"calibrate", "measure this hardware with the executor's code and write a calibrated topology", &run_calibrate,
       "paralab calibrate --backend cpu|cuda --out FILE [SCENARIO ...] [--ranks N] [--reps N] [--quick]"},
      {"validate", "simulate, execute and compare a scenario in one go (calibrates this machine once)", &run_validate,
       "paralab validate SCENARIO --backend cpu|cuda [--calibration FILE] [--json] [--report FILE.html]"},
      {"import", "Megatron-LM arguments or launch script, or a NeMo YAML, as a scenario (what is not converted is named)", &run_import,
       "paralab import megatron [--file launch.sh] [--out FILE.toml] [--gpus N] [--topology T] [--] ARGS... | paralab import nemo FILE.yaml [--out FILE.toml] [--gpus N] [--vocab-size N]"},
      {"export", "the step as one Chakra execution trace per rank (ASTRA-sim's input)", &run_export,
       "paralab export chakra SCENARIO DIR [--prefix P] [--json] [--set section.key=value ...]"},
  };
  return table;
}

}  // namespace paralab::cli
