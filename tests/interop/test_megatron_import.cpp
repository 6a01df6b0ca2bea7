// paralab tests — Megatron-LM arguments to scenarios: the public example scripts converted
// and loaded (values checked against the scripts), Megatron-LM's derived values, what is
// reported as not converted, and errors that name the argument, file and line.
#include <catch2/catch.hpp>

#include "import_util.hpp"
#include "interop/megatron_args.hpp"

using paralab::ConfigError;
using paralab::interop::ImportOptions;
using paralab::interop::import_megatron_args;
using paralab::interop::import_megatron_script;
using paralab::interop::SkipKind;
using paralab::test::import_data;
using paralab::test::load_draft;
using paralab::test::skipped;

namespace {

// A small model's arguments plus `extra`.
std::vector<std::string> small(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--num-layers", "8", "--hidden-size", "1024", "--num-attention-heads", "16",
                                "--seq-length", "2048", "--vocab-size", "50257", "--micro-batch-size", "2"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

ImportOptions gpus(int64_t n) {
  ImportOptions o;
  o.gpus = n;
  return o;
}

}  // namespace

TEST_CASE("Megatron-LM's GPT-3 175B example converts to the paper's model", "[interop][megatron]") {
  // examples/gpt3/train_gpt3_175b_distributed.sh runs on 1 node of 8; TP8 x PP16 needs 128 GPUs or more.
  CHECK_THROWS_WITH(import_megatron_script(import_data("train_gpt3_175b_distributed.sh"), {}, {}),
                    Catch::Contains("train_gpt3_175b_distributed.sh:57") && Catch::Contains("does not divide the run's 8 GPUs") &&
                        Catch::Contains("--gpus N"));
  const auto d = import_megatron_script(import_data("train_gpt3_175b_distributed.sh"), {}, gpus(1536));
  const paralab::Scenario s = load_draft(d);
  CHECK(s.model.num_layers == 96);
  CHECK(s.model.hidden_size == 12288);
  CHECK(s.model.num_attention_heads == 96);
  CHECK(s.model.ffn_hidden_size == 4 * 12288);
  CHECK(s.model.seq_length == 2048);
  CHECK(s.model.vocab_size == 50257);  // --merge-file: GPT-2 BPE
  CHECK(s.training.micro_batch_size == 1);
  CHECK(s.training.global_batch_size == 1536);
  CHECK(s.training.precision == paralab::Precision::fp16);
  CHECK(s.training.adam_beta2 == Approx(0.95));
  CHECK(s.parallel.tensor == 8);
  CHECK(s.parallel.pipeline == 16);
  CHECK(s.parallel.data == 12);  // 1536 / (8 x 16)
  CHECK_FALSE(s.parallel.overlap_grad_reduce);  // Megatron-LM's default
  CHECK(s.cluster.nodes == 192);
  CHECK(s.topology.node.devices_per_node == 8);
  for (const char* arg : {"--save", "--load", "--data-path", "--train-iters", "--step-batch-size-schedule", "--init-method-std"}) {
    INFO(arg);
    REQUIRE(skipped(d, arg));
    CHECK(skipped(d, arg)->kind == SkipKind::ignored);
  }
  const std::string toml = d.toml();
  CHECK(toml.find("#     --save-interval, --save, --load") != std::string::npos);
  CHECK(toml.find("num_layers = 96") != std::string::npos);
  CHECK(toml.find("# --num-layers 96 (") != std::string::npos);
}

TEST_CASE("Megatron-LM's Llama 3 8B FP8 example converts with its derived values", "[interop][megatron]") {
  const auto d = import_megatron_script(import_data("train_llama3_8b_h100_fp8.sh"), {}, {});
  const paralab::Scenario s = load_draft(d);
  CHECK(s.model.num_layers == 32);
  CHECK(s.model.hidden_size == 4096);
  CHECK(s.model.ffn_hidden_size == 14336);
  CHECK(s.model.num_query_groups == 8);
  CHECK(s.model.seq_length == 8192);
  CHECK(s.model.vocab_size == 128257);  // NullTokenizer: --vocab-size 128256 + end of document
  CHECK(s.model.activation == paralab::Activation::swiglu);
  CHECK(s.model.normalization == paralab::Normalization::rmsnorm);
  CHECK(s.model.position_embedding_type == paralab::PositionEmbedding::rope);
  CHECK(s.model.untie_embeddings);
  CHECK_FALSE(s.model.add_bias_linear);
  CHECK(s.training.precision == paralab::Precision::fp8);
  CHECK_FALSE(s.training.accumulate_allreduce_grads_in_fp32);  // --grad-reduce-in-bf16
  CHECK(s.training.global_batch_size == 128);
  CHECK(s.parallel.zero_stage == 1);
  CHECK(s.parallel.overlap_grad_reduce);
  CHECK_FALSE(s.parallel.sequence_parallel);  // --sequence-parallel at TP1: Megatron turns it off
  CHECK(s.world_size() == 8);
  REQUIRE(skipped(d, "--fp8-param-gather"));
  CHECK(skipped(d, "--fp8-param-gather")->kind == SkipKind::unsupported);
}

TEST_CASE("Megatron-LM's derived values: swiglu width, GQA, virtual stages, bf16 gradients", "[interop][megatron]") {
  auto d = import_megatron_args(small({"--swiglu", "--group-query-attention", "--bf16", "--pipeline-model-parallel-size", "2",
                                       "--num-layers-per-virtual-pipeline-stage", "2", "--global-batch-size", "64"}),
                                gpus(8));
  paralab::Scenario s = load_draft(d);
  CHECK(s.model.ffn_hidden_size == 2730 / 64 * 64);  // int(4 x 1024 x 2/3 / 64) x 64 = 2688
  CHECK(s.model.num_query_groups == 1);              // --group-query-attention alone: Megatron's default
  CHECK(s.parallel.virtual_pipeline_stages == 2);    // 8 layers / 2 stages / 2
  CHECK(s.parallel.schedule == paralab::Schedule::interleaved);
  CHECK(s.training.accumulate_allreduce_grads_in_fp32);
  CHECK(s.parallel.data == 4);

  d = import_megatron_args(small({"--num-query-groups", "4", "--recompute-granularity", "full", "--recompute-method", "block",
                                  "--recompute-num-layers", "2", "--global-batch-size", "16"}),
                           gpus(8));
  s = load_draft(d);
  CHECK(s.model.num_query_groups == 16);  // without --group-query-attention Megatron ignores it
  CHECK(skipped(d, "--num-query-groups")->kind == SkipKind::ignored);
  CHECK(s.training.recompute == paralab::Recompute::full);
  CHECK(skipped(d, "--recompute-num-layers")->kind == SkipKind::unsupported);  // 2 of 8 layers
  CHECK(s.training.precision == paralab::Precision::fp32);                     // no --bf16 / --fp16
  CHECK(s.training.global_batch_size == 16);
}

TEST_CASE("Megatron-LM's optimizer offload arguments convert to the offload keys", "[interop][megatron][offload]") {
  auto d = import_megatron_args(small({"--bf16", "--use-distributed-optimizer", "--optimizer-cpu-offload",
                                       "--optimizer-offload-fraction", "0.5", "--overlap-cpu-optimizer-d2h-h2d",
                                       "--global-batch-size", "16"}),
                                gpus(8));
  const paralab::Scenario s = load_draft(d);
  CHECK(s.training.optimizer_cpu_offload);
  CHECK(s.training.optimizer_offload_fraction == 0.5);
  CHECK(s.training.overlap_cpu_optimizer_d2h_h2d);
  CHECK(s.parallel.zero_stage == 1);
  CHECK_FALSE(skipped(d, "--optimizer-cpu-offload"));
}

TEST_CASE("mixture-of-experts arguments convert; unknown ones are reported, never dropped", "[interop][megatron]") {
  const auto d = import_megatron_args(small({"--num-experts", "8", "--moe-router-topk", "2", "--expert-model-parallel-size", "8",
                                             "--moe-layer-freq", "([0]*1+[1]*7)", "--moe-router-score-function", "sigmoid",
                                             "--moe-router-enable-expert-bias", "--moe-token-dispatcher-type", "alltoall",
                                             "--moe-permute-fusion", "--frobnicate", "3", "--bf16"}),
                                      gpus(8));
  const paralab::Scenario s = load_draft(d);
  CHECK(s.model.moe.num_experts == 8);
  CHECK(s.model.moe.moe_router_topk == 2);
  CHECK(s.parallel.expert == 8);
  CHECK(s.model.moe.moe_layers == std::vector<bool>{false, true, true, true, true, true, true, true});
  CHECK(s.model.moe.moe_router_score_function == paralab::RouterScore::sigmoid);
  CHECK(s.model.moe.moe_router_enable_expert_bias);
  CHECK(s.model.moe.moe_token_dispatcher_type == paralab::TokenDispatcher::alltoall);
  for (const char* moe : {"--num-experts", "--moe-router-topk", "--expert-model-parallel-size", "--moe-layer-freq"})
    CHECK_FALSE(skipped(d, moe));
  REQUIRE(skipped(d, "--moe-permute-fusion"));
  CHECK(skipped(d, "--moe-permute-fusion")->kind == SkipKind::unsupported);
  CHECK(skipped(d, "--moe-permute-fusion")->reason.find("mixture-of-experts") != std::string::npos);
  REQUIRE(skipped(d, "--frobnicate"));
  CHECK(skipped(d, "--frobnicate")->kind == SkipKind::unknown);
  CHECK(d.toml().find("#   --frobnicate 3 (the command line): not an argument paralab knows") != std::string::npos);
}

TEST_CASE("the GPU count: launcher, then options; the global batch defaults as Megatron's", "[interop][megatron]") {
  auto with_launcher = small({});
  with_launcher.insert(with_launcher.begin(), {"torchrun", "--nproc_per_node", "4", "--nnodes=2", "pretrain_gpt.py"});
  auto d = import_megatron_args(with_launcher, {});
  paralab::Scenario s = load_draft(d);
  CHECK(s.world_size() == 8);
  CHECK(s.cluster.nodes == 2);
  CHECK(s.cluster.devices_per_node == 4);
  CHECK(s.training.global_batch_size == 2 * 8);  // micro batch x data
  d = import_megatron_args(with_launcher, gpus(32));
  CHECK(load_draft(d).cluster.nodes == 4);
  ImportOptions on_a100 = gpus(16);
  on_a100.topology = "dgx-a100";
  s = load_draft(import_megatron_args(small({"--bf16"}), on_a100));
  CHECK(s.topology.device.name.find("A100") != std::string::npos);
}

TEST_CASE("bad arguments name the argument, the value and what is allowed", "[interop][megatron]") {
  CHECK_THROWS_WITH(import_megatron_args(small({"--tensor-model-parallel-size", "two"}), gpus(8)),
                    Catch::Contains("the command line: --tensor-model-parallel-size = two: expected an integer"));
  CHECK_THROWS_WITH(import_megatron_args(small({"--normalization", "ScaleNorm"}), gpus(8)),
                    Catch::Contains("--normalization = ScaleNorm") && Catch::Contains("LayerNorm | RMSNorm"));
  CHECK_THROWS_WITH(import_megatron_args(small({"--pipeline-model-parallel-size", "3"}), gpus(3)),
                    Catch::Contains("--pipeline-model-parallel-size = 3") && Catch::Contains("as paralab's parallel.pipeline"));
  CHECK_THROWS_WITH(import_megatron_args(small({"--global-batch-size", "6"}), gpus(8)),
                    Catch::Contains("--global-batch-size = 6") && Catch::Contains("a multiple of 16"));
  CHECK_THROWS_WITH(import_megatron_args({"--hidden-size", "64"}, gpus(1)), Catch::Contains("--num-layers") && Catch::Contains("required"));
  auto no_vocab = small({});
  no_vocab.erase(no_vocab.begin() + 8, no_vocab.begin() + 10);
  CHECK_THROWS_WITH(import_megatron_args(no_vocab, gpus(1)), Catch::Contains("vocabulary size is unknown") && Catch::Contains("--vocab-size N"));
  CHECK_THROWS_WITH(import_megatron_args(small({"--bf16"}), gpus(12)), Catch::Contains("--gpus = 12") && Catch::Contains("a multiple of it"));
  CHECK_THROWS_WITH(import_megatron_script(import_data("x.py"), {}, {}), Catch::Contains("a Python file"));
}

TEST_CASE("Megatron-LM's pipeline split and grouping arguments convert to their keys", "[interop][megatron][pipeline]") {
  // 8 layers + embedding + loss over 5 stages.
  auto d = import_megatron_args(small({"--pipeline-model-parallel-size", "5", "--account-for-embedding-in-pipeline-split",
                                       "--account-for-loss-in-pipeline-split", "--global-batch-size", "10"}),
                                gpus(5));
  paralab::Scenario s = load_draft(d);
  CHECK(s.parallel.account_for_embedding_in_pipeline_split);
  CHECK(s.parallel.account_for_loss_in_pipeline_split);
  CHECK_FALSE(skipped(d, "--account-for-loss-in-pipeline-split"));
  // Layers per virtual stage count the embedding and loss too: 10 / 5 / 1 = 2 virtual stages.
  d = import_megatron_args(small({"--pipeline-model-parallel-size", "5", "--account-for-embedding-in-pipeline-split",
                                  "--account-for-loss-in-pipeline-split", "--num-layers-per-virtual-pipeline-stage", "1",
                                  "--global-batch-size", "10"}),
                           gpus(5));
  s = load_draft(d);
  CHECK(s.parallel.virtual_pipeline_stages == 2);
  CHECK(s.parallel.schedule == paralab::Schedule::interleaved);
  // A layout sets the virtual stages and, with more than one, the interleaved schedule.
  d = import_megatron_args(small({"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout",
                                  "Et|(tt|)*2,tttL", "--global-batch-size", "8"}),
                           gpus(2));
  s = load_draft(d);
  CHECK(s.parallel.pipeline_model_parallel_layout == "Et|(tt|)*2,tttL");
  CHECK(s.parallel.virtual_pipeline_stages == 2);
  CHECK(s.parallel.schedule == paralab::Schedule::interleaved);
  // Micro-batch groups: 6 micro-batches on 4 stages, one group of 6.
  d = import_megatron_args(small({"--pipeline-model-parallel-size", "4", "--num-virtual-stages-per-pipeline-rank", "2",
                                  "--microbatch-group-size-per-virtual-pipeline-stage", "6", "--global-batch-size", "12"}),
                           gpus(4));
  s = load_draft(d);
  CHECK(s.parallel.microbatch_group_size_per_vp_stage == 6);
  CHECK(s.num_microbatches() == 6);
}
