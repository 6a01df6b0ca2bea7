// paralab tests — NeMo training YAML to scenarios: NeMo's own GPT config and the
// NeMo-Framework-Launcher's GPT-3 175B converted and loaded (values checked against the files),
// NeMo's precision, optimizer and FSDP keys, and the errors.
#include <catch2/catch.hpp>

#include "import_util.hpp"
#include "interop/nemo_config.hpp"

using paralab::interop::ImportOptions;
using paralab::interop::import_nemo;
using paralab::interop::SkipKind;
using paralab::test::import_data;
using paralab::test::load_draft;
using paralab::test::skipped;
using paralab::test::TempFile;

namespace {

// A minimal NeMo file with `model_extra` lines added under model: (two-space indented).
std::string nemo_yaml(const std::string& model_extra, const std::string& trainer_extra = "") {
  return "trainer:\n  devices: 8\n  num_nodes: 1\n  precision: bf16-mixed\n" + trainer_extra +
         "model:\n  micro_batch_size: 1\n  global_batch_size: 32\n  encoder_seq_length: 4096\n"
         "  num_layers: 16\n  hidden_size: 2048\n  num_attention_heads: 16\n"
         "  tokenizer:\n    library: huggingface\n    type: meta-llama/Meta-Llama-3-8B\n" +
         model_extra;
}

}  // namespace

TEST_CASE("the NeMo-Framework-Launcher's GPT-3 175B converts to its model and layout", "[interop][nemo]") {
  const auto d = import_nemo(import_data("nemo_launcher_gpt3_175b.yaml"), {});
  const paralab::Scenario s = load_draft(d);
  CHECK(s.model.num_layers == 96);
  CHECK(s.model.hidden_size == 12288);
  CHECK(s.model.num_attention_heads == 96);
  CHECK(s.model.ffn_hidden_size == 49152);  // ${multiply:4, ${.hidden_size}}
  CHECK(s.model.seq_length == 2048);
  CHECK(s.model.vocab_size == 50257);  // GPT2BPETokenizer
  CHECK(s.training.precision == paralab::Precision::bf16);
  CHECK(s.training.global_batch_size == 2048);
  CHECK(s.training.lr == Approx(0.9e-4));
  CHECK(s.training.adam_beta2 == Approx(0.95));
  CHECK(s.parallel.tensor == 4);
  CHECK(s.parallel.pipeline == 8);
  CHECK(s.parallel.virtual_pipeline_stages == 6);
  CHECK(s.parallel.schedule == paralab::Schedule::interleaved);
  CHECK(s.parallel.sequence_parallel);
  CHECK(s.parallel.zero_stage == 1);  // mcore_distributed_optim
  CHECK(s.parallel.overlap_grad_reduce);
  CHECK(s.parallel.overlap_param_gather);
  CHECK(s.parallel.dp_bucket_mb == Approx(220));
  CHECK(s.world_size() == 1024);  // 128 nodes x 8
  CHECK(s.parallel.data == 32);
  REQUIRE(skipped(d, "model.overlap_p2p_comm"));
  CHECK(skipped(d, "model.overlap_p2p_comm")->kind == SkipKind::unsupported);
  CHECK(skipped(d, "exp_manager.name")->kind == SkipKind::ignored);
  CHECK(skipped(d, "model.ub_tp_comm_overlap")->kind == SkipKind::ignored);  // false: off
  for (const auto& sk : d.skipped()) CHECK(sk.kind != SkipKind::unknown);
}

TEST_CASE("NeMo's own megatron_gpt_config.yaml converts, its open values left as they are", "[interop][nemo]") {
  const auto d = import_nemo(import_data("megatron_gpt_config.yaml"), {});
  const paralab::Scenario s = load_draft(d);
  CHECK(s.model.num_layers == 12);
  CHECK(s.model.hidden_size == 768);
  CHECK(s.model.max_position_embeddings == 512);  // ${.encoder_seq_length}
  CHECK_FALSE(s.model.untie_embeddings);
  CHECK(s.training.micro_batch_size == 4);
  CHECK(s.training.global_batch_size == 8);
  CHECK(s.training.adam_beta2 == Approx(0.98));
  CHECK_FALSE(s.training.gradient_accumulation_fusion);
  CHECK(s.world_size() == 1);
  CHECK(s.parallel.zero_stage == 0);  // fused_adam
  const auto* prefix = skipped(d, "model.data.data_prefix");  // ???
  REQUIRE(prefix);
  CHECK(prefix->kind == SkipKind::ignored);
  for (const auto& sk : d.skipped()) CHECK(sk.kind != SkipKind::unknown);
}

TEST_CASE("NeMo keys: Hugging Face tokenizers, fp8, FSDP, O1, recompute", "[interop][nemo]") {
  TempFile f(nemo_yaml("  fp8: true\n  fsdp: true\n  fsdp_sharding_strategy: grad\n  megatron_amp_O2: false\n"
                       "  activations_checkpoint_granularity: selective\n  num_moe_experts: 8\n  frobnicate: 1\n"),
             "cfg.yaml");
  const auto d = import_nemo(f.path(), {});
  const paralab::Scenario s = load_draft(d);
  CHECK(s.model.vocab_size == 128256);  // meta-llama/Meta-Llama-3-8B
  CHECK(s.training.precision == paralab::Precision::fp8);
  CHECK(s.parallel.zero_stage == 2);
  CHECK(s.training.recompute == paralab::Recompute::selective);
  CHECK(s.training.accumulate_allreduce_grads_in_fp32);
  CHECK(skipped(d, "model.megatron_amp_O2")->kind == SkipKind::unsupported);
  CHECK(s.model.moe.num_experts == 8);  // NeMo's num_moe_experts > 1: routed experts
  CHECK_FALSE(skipped(d, "model.num_moe_experts"));
  CHECK(skipped(d, "model.frobnicate")->kind == SkipKind::unknown);
}

TEST_CASE("NeMo errors name the file, line, key and value", "[interop][nemo]") {
  TempFile bad_precision(nemo_yaml("", "  precision: 64\n"), "p.yaml");
  CHECK_THROWS_WITH(import_nemo(bad_precision.path(), {}), Catch::Contains("p.yaml:") && Catch::Contains("trainer.precision = 64"));
  TempFile open_value(nemo_yaml("  tensor_model_parallel_size: ${oc.env:TP}\n"), "o.yaml");
  CHECK_THROWS_WITH(import_nemo(open_value.path(), {}),
                    Catch::Contains("o.yaml:15") && Catch::Contains("model.tensor_model_parallel_size") && Catch::Contains("oc.env"));
  TempFile no_vocab("model:\n  num_layers: 2\n  hidden_size: 64\n  num_attention_heads: 4\n  encoder_seq_length: 128\n", "v.yaml");
  CHECK_THROWS_WITH(import_nemo(no_vocab.path(), {}), Catch::Contains("vocabulary size is unknown"));
  ImportOptions vocab;
  vocab.vocab_size = 1000;
  CHECK(load_draft(import_nemo(no_vocab.path(), vocab)).model.vocab_size == 1000);
  CHECK_THROWS_WITH(import_nemo("recipe.py", {}), Catch::Contains("NeMo 2.0 and Megatron-Bridge recipes are Python programs"));
}
