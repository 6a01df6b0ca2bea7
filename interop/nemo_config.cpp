// paralab interop — a NeMo training YAML to a scenario: the items, the table, NeMo's own
// derived values (precision, optimizer, FSDP, overlap), Megatron-LM's, the cluster.
#include "interop/nemo_config.hpp"

#include <algorithm>

#include "interop/cluster_size.hpp"
#include "interop/megatron_defaults.hpp"
#include "interop/yaml_config.hpp"

namespace paralab::interop {

namespace {

// trainer.precision / model.precision: PyTorch Lightning's names.
void nemo_precision(ScenarioDraft& d) {
  const SourceItem* p = d.take("precision");
  const SourceItem* o2 = d.take("amp_o2");
  if (p && !p->null) {
    const std::string v = lowercase(item_word(*p));
    const char* to = v == "bf16" || v == "bf16-mixed" || v == "bf16-true"            ? "bf16"
                     : v == "16" || v == "16-mixed" || v == "fp16" || v == "16-true" ? "fp16"
                     : v == "32" || v == "32-true" || v == "fp32"                    ? "fp32"
                                                                                     : nullptr;
    if (!to) fail(*p, "a precision paralab cannot model", "bf16 | bf16-mixed | 16 | 16-mixed | 32 | 32-true");
    d.set_from("training.precision", toml_value(to), *p);
  }
  if (!o2) return;
  const bool half = d.text("training.precision") == "bf16" || d.text("training.precision") == "fp16";
  if (half && !fact_on(o2))
    d.skip(*o2, SkipKind::unsupported,
           "O1 autocast keeps fp32 weights; paralab models Megatron's O2 mixed precision (half-precision weights, fp32 "
           "main copy)");
  else
    d.skip(*o2, SkipKind::ignored,
           half ? "Megatron's O2 mixed precision, as paralab models it" : "applies to bf16 or fp16 training only");
}

// model.optim.*: the optimizer, its sharding and overlap, and model.fsdp.
void nemo_optimizer(ScenarioDraft& d) {
  const SourceItem* name = d.take("optim_name");
  const std::string n = name && !name->null ? item_word(*name) : "";
  const bool apex_dist = n == "distributed_fused_adam", mcore_dist = n == "mcore_distributed_optim";
  if (name && !n.empty()) {
    if (n == "sgd")
      d.set_from("training.optimizer", "\"sgd\"", *name);
    else if (apex_dist || mcore_dist || n == "fused_adam" || n == "adam" || n == "adamw")
      d.set_from("training.optimizer", "\"adam\"", *name);
    else
      fail(*name, "an optimizer paralab cannot model",
           "fused_adam | adam | adamw | distributed_fused_adam | mcore_distributed_optim | sgd");
    if (apex_dist || mcore_dist)
      d.set_from("parallel.zero_stage", "1", *name, name->origin() + ": the distributed optimizer");
  }
  if (const SourceItem* betas = d.take("betas")) {
    if (!betas->sequence || betas->values.size() != 2) fail(*betas, "expected two numbers", "[beta1, beta2]");
    for (int k = 0; k < 2; ++k) {
      SourceItem one = *betas;
      one.values = {betas->values[static_cast<size_t>(k)]};
      one.sequence = false;
      d.set_from(k == 0 ? "training.adam_beta1" : "training.adam_beta2", toml_value(std::to_string(item_real(one))),
                 *betas);
    }
  }
  const struct {
    const char* fact;
    const char* key;
    bool apex_default;  // Apex's DistributedFusedAdam overlaps gradient reduction by default
  } overlaps[] = {{"overlap_grad_sync", "parallel.overlap_grad_reduce", true},
                  {"overlap_param_sync", "parallel.overlap_param_gather", false}};
  for (const auto& o : overlaps) {
    const SourceItem* f = d.take(o.fact);
    if (f && !f->null)
      d.set_from(o.key, item_bool(*f) ? "true" : "false", *f);
    else
      d.set(o.key, apex_dist && o.apex_default ? "true" : "false",
            "NeMo's default for model.optim.name = " + (n.empty() ? "(none)" : n));
  }
  const SourceItem* fsdp = d.take("fsdp");
  const SourceItem* sharding = d.take("fsdp_sharding");
  if (!fact_on(fsdp)) {
    if (sharding) d.skip(*sharding, SkipKind::ignored, "an FSDP detail that applies only with model.fsdp");
    return;
  }
  const std::string s = sharding && !sharding->null ? item_word(*sharding) : "full";
  if (s == "full")
    d.set_from("parallel.zero_stage", "3", *fsdp, fsdp->origin() + ", fully sharded");
  else if (s == "grad")
    d.set_from("parallel.zero_stage", "2", *sharding);
  else
    fail(sharding ? *sharding : *fsdp, "an FSDP sharding paralab cannot model", "full | grad");
}

void nemo_checks(ScenarioDraft& d, const std::string& file) {
  for (const char* key : {"model.num_layers", "model.hidden_size", "model.num_attention_heads", "model.seq_length"})
    if (!d.has(key))
      throw ConfigError(SourceLoc{file, 0, 0},
                        std::string(key) == "model.seq_length" ? "model.encoder_seq_length" : key, "",
                        "required key is missing", "a number");
  if (const SourceItem* seq = d.take("data_seq_length"); seq && !seq->null) {
    if (std::to_string(item_integer(*seq)) != d.text("model.seq_length"))
      d.skip(*seq, SkipKind::unsupported, "differs from model.encoder_seq_length, which paralab uses");
  }
}

GpuCount nemo_gpus(ScenarioDraft& d) {
  GpuCount g;
  const struct {
    const char* fact;
    std::optional<int64_t>* into;
    std::string* origin;
  } counts[] = {{"devices", &g.per_node, &g.per_node_origin}, {"nodes", &g.nodes, &g.nodes_origin}};
  for (const auto& c : counts) {
    const SourceItem* f = d.take(c.fact);
    if (!f || f->null) continue;
    const std::string v = item_word(*f);
    if (v == "-1" || v == "auto") {
      d.note(f->origin() + ": every GPU the job sees; give paralab import --gpus N");
      continue;
    }
    *c.into = item_integer(*f);
    *c.origin = f->origin();
  }
  return g;
}

// model.num_moe_experts: NeMo's 1 (or null) is a dense model, more are routed experts.
void nemo_experts(ScenarioDraft& d) {
  const SourceItem* n = d.take("num_moe_experts");
  if (!n) return;
  const int64_t experts = n->null ? 1 : item_integer(*n, 0);
  if (experts > 1) d.set_from("model.num_experts", std::to_string(experts), *n);
  else d.skip(*n, SkipKind::ignored, "NeMo's 1 (or none): a dense model");
}

}  // namespace

ScenarioDraft import_nemo(const std::filesystem::path& yaml, const ImportOptions& opts) {
  if (yaml.extension() == ".py")
    throw ConfigError(
        SourceLoc{yaml.string(), 0, 0}, "FILE", yaml.string(),
        "a Python file: NeMo 2.0 and Megatron-Bridge recipes are Python programs, which paralab does not run",
        "a NeMo 1.x or NeMo-Framework-Launcher training YAML (e.g. megatron_gpt_config.yaml)");
  ScenarioDraft d;
  d.tool = "nemo";
  d.source = yaml.string();
  d.name = opts.name.empty() ? yaml.stem().string() : opts.name;
  const auto rules = nemo_rules();
  for (const SourceItem& item : read_yaml_items(yaml)) apply_rule(d, find_rule(rules, item.name), item);
  nemo_checks(d, yaml.string());
  nemo_precision(d);
  nemo_optimizer(d);
  nemo_experts(d);
  apply_megatron_defaults(d, opts);
  size_cluster(d, nemo_gpus(d), opts);
  finish_draft(d, opts);
  return d;
}

}  // namespace paralab::interop
