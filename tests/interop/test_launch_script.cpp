// paralab tests — launch scripts read as bash runs them, up to the training command: line
// continuations, variables (strings, arrays, defaults), conditions, arithmetic, comments,
// redirections; and the errors for scripts without one training command.
#include <catch2/catch.hpp>

#include <algorithm>

#include "interop/launch_script.hpp"
#include "ir/error.hpp"

using paralab::ConfigError;
using paralab::interop::LaunchCommand;
using paralab::interop::parse_launch_script;

namespace {

std::vector<std::string> texts(const std::vector<paralab::interop::ScriptWord>& words) {
  std::vector<std::string> out;
  for (const auto& w : words) out.push_back(w.text);
  return out;
}

}  // namespace

TEST_CASE("string variables, ${VAR}, continuations and comments", "[interop][shell]") {
  const LaunchCommand c = parse_launch_script(
      "#!/bin/bash\n"
      "# a comment\n"
      "LAYERS=24  # trailing comment\n"
      "GPT_ARGS=\"--num-layers ${LAYERS} \\\n"
      "  --hidden-size 2048\"\n"
      "DISTRIBUTED_ARGS=\"--nproc_per_node 8 --nnodes 2\"\n"
      "python -m torch.distributed.launch $DISTRIBUTED_ARGS \\\n"
      "  pretrain_gpt.py \\\n"
      "  $GPT_ARGS --seq-length 1024 2>&1 | tee log.txt\n",
      "s.sh");
  CHECK(texts(c.launcher) == std::vector<std::string>{"python", "-m", "torch.distributed.launch", "--nproc_per_node", "8", "--nnodes", "2"});
  CHECK(c.script.text == "pretrain_gpt.py");
  CHECK(texts(c.args) == std::vector<std::string>{"--num-layers", "24", "--hidden-size", "2048", "--seq-length", "1024"});
  CHECK(c.args[0].line == 4);  // where the text was written
  CHECK(c.args[1].line == 3);  // ${LAYERS}: its value's line
  CHECK(c.args[3].line == 5);
  CHECK(c.args[5].line == 9);
}

TEST_CASE("arrays: ( ... ) over lines, +=, quoted elements, [@] and [*]", "[interop][shell]") {
  const LaunchCommand c = parse_launch_script(
      "MODEL=(\n"
      "  --num-layers 8   # inline comment\n"
      "  --hidden-size 512\n"
      ")\n"
      "MODEL+=(\"--fp8-format hybrid\")\n"
      "QUOTED=(\"--seed 7\")\n"
      "torchrun --nproc_per_node=4 ${MODEL[@]} pretrain_bert.py ${MODEL[@]} \"${QUOTED[@]}\" ${#MODEL[@]}\n",
      "a.sh");
  CHECK(texts(c.launcher).size() == 8);  // torchrun, --nproc_per_node=4 and the array, split
  CHECK(c.script.text == "pretrain_bert.py");
  CHECK(texts(c.args) == std::vector<std::string>{"--num-layers", "8", "--hidden-size", "512", "--fp8-format", "hybrid", "--seed 7", "5"});
}

TEST_CASE("defaults, script arguments, the environment and $((arithmetic))", "[interop][shell]") {
  const LaunchCommand c = parse_launch_script(
      "TP=${TP_SIZE:-4}\n"
      "NODES=${SLURM_NNODES:-\"2\"}\n"
      "GPUS_PER_NODE=8\n"
      "WORLD=$(($GPUS_PER_NODE*NODES))\n"
      "CKPT=$1\n"
      "torchrun pretrain_gpt.py --tensor-model-parallel-size $TP --world $WORLD --save $CKPT --load $(pwd) $UNSET_VAR --x\n",
      "d.sh");
  CHECK(texts(c.args) == std::vector<std::string>{"--tensor-model-parallel-size", "4", "--world", "16", "--save", "$1", "--load", "$(pwd)", "--x"});
  CHECK(c.args[1].unresolved.empty());
  CHECK(c.args[5].unresolved.find("argument given to the script") != std::string::npos);
  CHECK(c.args[7].unresolved.find("command substitution") != std::string::npos);
  REQUIRE(!c.notes.empty());
  CHECK(c.notes.back().find("UNSET_VAR") != std::string::npos);  // expanded to nothing, and said so
  CHECK(c.env.scalar("NODES")->str() == "2");
}

TEST_CASE("conditions paralab can decide are taken; others count as false, with a note", "[interop][shell]") {
  const LaunchCommand c = parse_launch_script(
      "DTYPE=\"fp8\"\n"
      "EXTRA=()\n"
      "if [[ \"$DTYPE\" == \"fp8\" ]]; then\n"
      "  EXTRA+=(--fp8-format hybrid)\n"
      "elif [ \"$DTYPE\" = bf16 ]; then\n"
      "  EXTRA+=(--bf16)\n"
      "else\n"
      "  EXTRA+=(--fp16)\n"
      "fi\n"
      "if [ -n \"${WANDB_API_KEY}\" ] || [[ 3 -gt 2 && -z \"$NOPE\" ]]; then EXTRA+=(--yes); fi\n"
      "if [ ! -f pretrain_gpt.py ]; then\n"
      "  EXTRA+=(--never)\n"
      "fi\n"
      "torchrun pretrain_gpt.py ${EXTRA[@]}\n",
      "c.sh");
  CHECK(texts(c.args) == std::vector<std::string>{"--fp8-format", "hybrid", "--yes"});
  REQUIRE(c.notes.size() == 1);
  CHECK(c.notes[0].find("c.sh:11") != std::string::npos);
}

TEST_CASE("here-documents, functions and the training script in a variable", "[interop][shell]") {
  const LaunchCommand c = parse_launch_script(
      "cat > cfg.txt <<'EOF'\n"
      "torchrun pretrain_gpt.py --not-this-one\n"
      "EOF\n"
      "SCRIPT=\"/opt/megatron/pretrain_gpt.py\"\n"
      "run() {\n"
      "  echo start\n"
      "}\n"
      "srun torchrun \"$SCRIPT\" --num-layers 2\n",
      "h.sh");
  CHECK(c.script.text == "/opt/megatron/pretrain_gpt.py");
  CHECK(texts(c.args) == std::vector<std::string>{"--num-layers", "2"});
}

TEST_CASE("scripts without exactly one training command are refused with the file and line", "[interop][shell]") {
  CHECK_THROWS_WITH(parse_launch_script("echo hello\n", "none.sh"), Catch::Contains("none.sh") && Catch::Contains("no command runs a training script"));
  CHECK_THROWS_WITH(parse_launch_script("python pretrain_gpt.py --a\npython pretrain_gpt.py --b\n", "two.sh"),
                    Catch::Contains("two.sh:2") && Catch::Contains("second training command"));
  CHECK_THROWS_WITH(parse_launch_script("A=1\nB=\"open\nC=2\n", "q.sh"), Catch::Contains("q.sh:2") && Catch::Contains("unterminated double quote"));
  CHECK_THROWS_AS(parse_launch_script("if [ 1 ]; then\n torchrun pretrain_gpt.py\n", "f.sh"), ConfigError);
  CHECK_THROWS_WITH(parse_launch_script("A=(--x\n", "p.sh"), Catch::Contains("no closing ')'"));
}

TEST_CASE("the public example scripts read to their training command", "[interop][shell]") {
  const LaunchCommand c = paralab::interop::read_launch_script(std::string(PARALAB_SOURCE_DIR) + "/tests/data/import/train_llama3_8b_h100_fp8.sh");
  const auto args = texts(c.args);
  auto has = [&](const std::string& a) { return std::find(args.begin(), args.end(), a) != args.end(); };
  CHECK(c.script.text == "pretrain_gpt.py");  // "$PRETRAIN_SCRIPT_PATH"
  CHECK(has("--fp8-format"));                 // the `if [[ "$DTYPE" == "fp8" ]]` branch
  CHECK(has("--mock-data"));                  // TOKENIZER_ARG=${3:-"MOCK"}: the mock-data branch
  CHECK(!has("--tokenizer-model"));
  CHECK(has("--use-distributed-optimizer"));  // TRAINING_ARGS+=("${DDP_ARGS[@]}")
  CHECK(c.args.front().text == "--use-mcore-models");
}
