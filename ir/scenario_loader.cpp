// paralab — scenario schema, preset merging and overrides. Validation is in validate.cpp.
#include "ir/scenario_loader.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

#include "ir/ir_size.hpp"
#include "ir/moe_routing.hpp"
#include "ir/raw_config.hpp"
#include "ir/schema.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"

namespace paralab {

namespace {

#define AT(expr) [](Scenario & sc) -> auto& { return sc.expr; }

// Upper bounds refuse absurd sizes (typos like an extra zero group of digits) while leaving
// room for any real model: 2^20 hidden, 2^24 tokens, 10^4 layers.
const Schema<Scenario>& scenario_schema() {
  static const Schema<Scenario> schema = [] {
    constexpr int64_t kBig = int64_t{1} << 24;
    Schema<Scenario> x;
    x.text("name", AT(name)).field("description", [](Scenario&, const RawValue& v, const std::string& k) {
      read_string(v, k);
    });
    x.text("model.preset", AT(model.preset))
        .integer("model.num_layers", AT(model.num_layers), 1, 10000)
        .integer("model.hidden_size", AT(model.hidden_size), 1, int64_t{1} << 20)
        .integer("model.num_attention_heads", AT(model.num_attention_heads), 1, 65536)
        .integer("model.num_query_groups", AT(model.num_query_groups), 1, 65536)
        .integer("model.kv_channels", AT(model.kv_channels), 1, 65536)
        .integer("model.ffn_hidden_size", AT(model.ffn_hidden_size), 1, int64_t{1} << 22)
        .integer("model.vocab_size", AT(model.vocab_size), 1, kBig)
        .integer("model.make_vocab_size_divisible_by", AT(model.make_vocab_size_divisible_by), 1, 65536)
        .integer("model.seq_length", AT(model.seq_length), 1, kBig)
        .integer("model.max_position_embeddings", AT(model.max_position_embeddings), 1, kBig)
        .choice<Activation>("model.activation", AT(model.activation))
        .choice<Normalization>("model.normalization", AT(model.normalization))
        .choice<PositionEmbedding>("model.position_embedding_type", AT(model.position_embedding_type))
        .boolean("model.untie_embeddings", AT(model.untie_embeddings))
        .boolean("model.add_bias_linear", AT(model.add_bias_linear))
        .real("model.hidden_dropout", AT(model.hidden_dropout), 0, 0.999)
        .real("model.attention_dropout", AT(model.attention_dropout), 0, 0.999)
        .real("model.norm_epsilon", AT(model.norm_epsilon), 0, 1, true)
        .real("model.rotary_base", AT(model.rotary_base), 1, 1e9)
        .integer("model.num_experts", AT(model.moe.num_experts), 0, 1 << 20)
        .integer("model.moe_router_topk", AT(model.moe.moe_router_topk), 1, 1 << 20)
        .integer("model.moe_ffn_hidden_size", AT(model.moe.moe_ffn_hidden_size), 1, int64_t{1} << 22)
        .integer("model.moe_shared_expert_intermediate_size", AT(model.moe.moe_shared_expert_intermediate_size), 0,
                 int64_t{1} << 24)
        .field("model.moe_layer_freq", [](Scenario& sc, const RawValue& v, const std::string& k) {
          sc.model.moe.moe_layer_freq = v.type == RawValue::Type::integer ? std::to_string(v.i) : read_string(v, k);
        })
        .choice<RouterScore>("model.moe_router_score_function", AT(model.moe.moe_router_score_function))
        .real("model.moe_router_topk_scaling_factor", AT(model.moe.moe_router_topk_scaling_factor), 0, 1e6)
        .integer("model.moe_router_num_groups", AT(model.moe.moe_router_num_groups), 1, 1 << 20)
        .integer("model.moe_router_group_topk", AT(model.moe.moe_router_group_topk), 1, 1 << 20)
        .choice<LoadBalancing>("model.moe_router_load_balancing_type", AT(model.moe.moe_router_load_balancing_type))
        .boolean("model.moe_router_enable_expert_bias", AT(model.moe.moe_router_enable_expert_bias))
        .real("model.moe_aux_loss_coeff", AT(model.moe.moe_aux_loss_coeff), 0, 1e6)
        .choice<TokenDispatcher>("model.moe_token_dispatcher_type", AT(model.moe.moe_token_dispatcher_type))
        .real("model.moe_expert_capacity_factor", AT(model.moe.moe_expert_capacity_factor), 0, 1e6, true)
        .boolean("model.moe_grouped_gemm", AT(model.moe.moe_grouped_gemm))
        .integer("model.mtp_num_layers", AT(model.moe.mtp_num_layers), 0, 64)
        .choice<RoutingModel>("model.moe_routing", AT(model.moe.moe_routing))
        .real("model.moe_routing_zipf_exponent", AT(model.moe.moe_routing_zipf_exponent), 0, 10)
        .real("model.moe_routing_hot_expert_share", AT(model.moe.moe_routing_hot_expert_share), 0, 1, true)
        .text("model.moe_routing_counts_file", AT(model.moe.moe_routing_counts_file))
        .integer("model.moe_routing_seed", AT(model.moe.moe_routing_seed), 0, int64_t{1} << 62)
        .boolean("model.multi_latent_attention", AT(model.mla.multi_latent_attention))
        .integer("model.q_lora_rank", AT(model.mla.q_lora_rank), 0, 1 << 20)
        .integer("model.kv_lora_rank", AT(model.mla.kv_lora_rank), 1, 1 << 20)
        .integer("model.qk_head_dim", AT(model.mla.qk_head_dim), 1, 65536)
        .integer("model.qk_pos_emb_head_dim", AT(model.mla.qk_pos_emb_head_dim), 0, 65536)
        .integer("model.v_head_dim", AT(model.mla.v_head_dim), 1, 65536);
    x.integer("training.global_batch_size", AT(training.global_batch_size), 1, kBig)
        .integer("training.micro_batch_size", AT(training.micro_batch_size), 1, int64_t{1} << 20)
        .choice<Precision>("training.precision", AT(training.precision))
        .choice<Optimizer>("training.optimizer", AT(training.optimizer))
        .choice<Recompute>("training.recompute", AT(training.recompute))
        .choice<AttentionImpl>("training.attention", AT(training.attention))
        .real("training.lr", AT(training.lr), 0, 10, true)
        .real("training.weight_decay", AT(training.weight_decay), 0, 10)
        .real("training.adam_beta1", AT(training.adam_beta1), 0, 0.999999)
        .real("training.adam_beta2", AT(training.adam_beta2), 0, 0.999999)
        .real("training.adam_eps", AT(training.adam_eps), 0, 1, true)
        .real("training.sgd_momentum", AT(training.sgd_momentum), 0, 0.999999)
        .real("training.clip_grad", AT(training.clip_grad), 0, 1e9)
        .real("training.initial_loss_scale", AT(training.initial_loss_scale), 1, 1e38)
        .integer("training.loss_scale_window", AT(training.loss_scale_window), 1, int64_t{1} << 30)
        .integer("training.seed", AT(training.seed), 0, int64_t{1} << 62)
        .boolean("training.gradient_accumulation_fusion", AT(training.gradient_accumulation_fusion))
        .boolean("training.accumulate_allreduce_grads_in_fp32", AT(training.accumulate_allreduce_grads_in_fp32))
        .boolean("training.optimizer_cpu_offload", AT(training.optimizer_cpu_offload))
        .real("training.optimizer_offload_fraction", AT(training.optimizer_offload_fraction), 0, 1)
        .boolean("training.overlap_cpu_optimizer_d2h_h2d", AT(training.overlap_cpu_optimizer_d2h_h2d));
    x.integer("parallel.tensor", AT(parallel.tensor), 1, 65536)
        .integer("parallel.pipeline", AT(parallel.pipeline), 1, 65536)
        .integer("parallel.context", AT(parallel.context), 1, 65536)
        .integer("parallel.data", AT(parallel.data), 1, kBig)
        .integer("parallel.expert", AT(parallel.expert), 1, 1 << 20)
        .integer("parallel.expert_tensor", AT(parallel.expert_tensor), 1, 65536)
        .boolean("parallel.sequence_parallel", AT(parallel.sequence_parallel))
        .integer("parallel.virtual_pipeline_stages", AT(parallel.virtual_pipeline_stages), 1, 1024)
        .integer("parallel.microbatch_group_size_per_vp_stage", AT(parallel.microbatch_group_size_per_vp_stage), 1,
                 kBig)
        .choice<Schedule>("parallel.schedule", AT(parallel.schedule))
        .integer("parallel.zero_stage", AT(parallel.zero_stage), 0, 3)
        .choice<OffloadParam>("parallel.offload_param", AT(parallel.offload_param))
        .choice<DataParallelImpl>("parallel.data_parallel_impl", AT(parallel.data_parallel_impl))
        .real("parallel.dp_bucket_mb", AT(parallel.dp_bucket_mb), 0, 1e6, true)
        .boolean("parallel.overlap_grad_reduce", AT(parallel.overlap_grad_reduce))
        .boolean("parallel.overlap_param_gather", AT(parallel.overlap_param_gather))
        .boolean("parallel.scatter_gather_tensors_in_pipeline",
                 AT(parallel.scatter_gather_tensors_in_pipeline))
        .boolean("parallel.async_tensor_model_parallel_allreduce",
                 AT(parallel.async_tensor_model_parallel_allreduce))
        .integer("parallel.decoder_first_pipeline_num_layers",
                 AT(parallel.decoder_first_pipeline_num_layers), 1, 10000)
        .integer("parallel.decoder_last_pipeline_num_layers",
                 AT(parallel.decoder_last_pipeline_num_layers), 1, 10000)
        .boolean("parallel.account_for_embedding_in_pipeline_split",
                 AT(parallel.account_for_embedding_in_pipeline_split))
        .boolean("parallel.account_for_loss_in_pipeline_split", AT(parallel.account_for_loss_in_pipeline_split))
        .field("parallel.pipeline_model_parallel_layout", [](Scenario& sc, const RawValue& v, const std::string& k) {
          sc.parallel.pipeline_model_parallel_layout = read_string(v, k);
          sc.parallel.pipeline_layout = parse_pipeline_layout(sc.parallel.pipeline_model_parallel_layout, v.loc, k);
        });
    x.text("cluster.topology", AT(cluster.topology))
        .integer("cluster.nodes", AT(cluster.nodes), 1, 1000000)
        .integer("cluster.devices_per_node", AT(cluster.devices_per_node), 1, 1024);
    x.choice<CollectiveAlgo>("simulation.collective_algorithm", AT(simulation.collective_algorithm));
    x.boolean("simulation.pace_tensor_groups", AT(simulation.pace_tensor_groups));
    x.real("reliability.gpu_failures_per_day", AT(reliability.gpu_failures_per_day), 0, 100)
        .real("reliability.node_failures_per_day", AT(reliability.node_failures_per_day), 0, 100)
        .real("reliability.checkpoint_write_gbps", AT(reliability.checkpoint_write_gbps), 0, 1e9, true)
        .real("reliability.checkpoint_read_gbps", AT(reliability.checkpoint_read_gbps), 0, 1e9, true)
        .real("reliability.restart_s", AT(reliability.restart_s), 0, 1e7)
        .real("reliability.checkpoint_interval_s", AT(reliability.checkpoint_interval_s), 0, 1e9);
    x.real("variation.gpu_speed_cv", AT(variation.gpu_speed_cv), 0, 0.5)
        .integer("variation.seed", AT(variation.seed), 0, int64_t{1} << 62)
        .choice<SeqLengthDistribution>("variation.seq_length_distribution", AT(variation.seq_length_distribution))
        .integer("variation.document_mean_tokens", AT(variation.document_mean_tokens), 1, kBig)
        .integer("variation.document_min_tokens", AT(variation.document_min_tokens), 1, kBig)
        .integer("variation.document_max_tokens", AT(variation.document_max_tokens), 1, kBig);
    return x;
  }();
  return schema;
}
#undef AT

// Megatron-LM's argument names, accepted for the [parallel] keys they mean (docs/config.md).
constexpr std::pair<std::string_view, std::string_view> kParallelAliases[] = {
    {"parallel.tensor_model_parallel_size", "parallel.tensor"},
    {"parallel.pipeline_model_parallel_size", "parallel.pipeline"},
    {"parallel.context_parallel_size", "parallel.context"},
    {"parallel.data_parallel_size", "parallel.data"},
    {"parallel.expert_model_parallel_size", "parallel.expert"},
    {"parallel.expert_tensor_parallel_size", "parallel.expert_tensor"},
    {"parallel.num_virtual_stages_per_pipeline_rank", "parallel.virtual_pipeline_stages"},
    {"parallel.virtual_pipeline_model_parallel_size", "parallel.virtual_pipeline_stages"},
    {"parallel.num_layers_in_first_pipeline_stage", "parallel.decoder_first_pipeline_num_layers"},
    {"parallel.num_layers_in_last_pipeline_stage", "parallel.decoder_last_pipeline_num_layers"},
};

// Renames aliases in one source (the file, or the --set list) to their keys; a key given under
// two names in one source is refused.
void canonicalize_aliases(RawTable& t) {
  for (const auto& [alias, key] : kParallelAliases) {
    auto it = t.find(std::string(alias));
    if (it == t.end()) continue;
    const std::string canonical(key);
    if (t.count(canonical))
      throw ConfigError(it->second.loc, it->first, it->second.text,
                        "is Megatron-LM's name for " + canonical + ", which is also set (at " +
                            t.at(canonical).loc.str() + ")",
                        "one of the two names");
    t[canonical] = it->second;
    t.erase(it);
  }
}

std::filesystem::path preset_path(const std::string& name) {
  return data_dir() / "scenarios" / "presets" / (name + ".toml");
}

std::string presets_choice() {
  std::string out;
  for (const auto& p : shipped_presets()) out += (out.empty() ? "" : " | ") + p;
  return out;
}

// Model presets set [model] keys only (a preset is a model, not a run).
RawTable read_preset(const std::string& name, const RawValue& where) {
  const bool looks_like_path = name.find('/') != std::string::npos;
  std::error_code ec;  // a name the file system refuses (e.g. too long) is an unknown preset too
  if (name.empty() || looks_like_path || !std::filesystem::is_regular_file(preset_path(name), ec))
    throw ConfigError(where.loc, "model.preset", where.text, "unknown preset", presets_choice());
  RawFile raw = read_toml_file(preset_path(name));
  for (const auto& [key, v] : raw.values)
    if (key.rfind("model.", 0) != 0 || key == "model.preset")
      throw ConfigError(v.loc, key, v.text, "a preset file may only set [model] keys",
                        "[model] keys except preset");
  return raw.values;
}

}  // namespace

std::vector<std::string> shipped_presets() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() / "scenarios" / "presets", ec))
    if (e.path().extension() == ".toml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

Scenario load_scenario(const std::filesystem::path& file, const std::vector<std::string>& overrides, bool check_layout) {
  RawFile raw = read_toml_file(file);

  // Split overrides into scenario keys and topology keys.
  RawTable set_values;
  std::vector<std::pair<std::string, RawValue>> topo_overrides;
  for (const auto& o : overrides) {
    auto [key, v] = parse_override(o);
    if (key.rfind("topology.", 0) == 0) topo_overrides.emplace_back(key, v);
    else set_values[key] = v;
  }
  // A top-level `preset = "..."` is accepted as a spelling of [model] preset.
  for (RawTable* t : {&raw.values, &set_values}) {
    if (auto it = t->find("preset"); it != t->end()) {
      if (t->count("model.preset"))
        throw ConfigError(it->second.loc, "preset", it->second.text,
                          "preset is given twice (top level and [model])", "one of them");
      (*t)["model.preset"] = it->second;
      t->erase(it);
    }
  }

  canonicalize_aliases(raw.values);
  canonicalize_aliases(set_values);

  // Merge: preset, then the file, then --set.
  RawTable merged;
  const RawTable* preset_src = set_values.count("model.preset") ? &set_values : &raw.values;
  if (auto it = preset_src->find("model.preset"); it != preset_src->end())
    merged = read_preset(read_string(it->second, "model.preset"), it->second);
  for (const auto& [k, v] : raw.values) merged[k] = v;
  for (const auto& [k, v] : set_values) merged[k] = v;

  Scenario s;
  s.file = file;
  s.name = file.stem().string();
  s.provenance.set_default_file(raw.file);
  const auto& schema = scenario_schema();
  for (const auto& [key, v] : merged) {
    schema.apply(s, key, v);
    s.provenance.set(key, v.loc);
  }

  read_variation_arrays(s.variation, raw.arrays, file.parent_path(), raw.file);

  // Required keys (after the preset).
  for (const char* req : {"model.num_layers", "model.hidden_size", "model.num_attention_heads",
                          "model.vocab_size", "model.seq_length", "training.global_batch_size",
                          "cluster.topology"}) {
    if (!merged.count(req))
      throw ConfigError(SourceLoc{raw.file, 0, 0}, req, "", "required key is missing",
                        std::string("set it in the file, through [model] preset = \"...\" (") +
                            presets_choice() + "), or with --set " + req + "=...");
  }

  // Derived defaults (Megatron-LM's argument defaults).
  ModelConfig& m = s.model;
  if (!merged.count("model.num_query_groups")) m.num_query_groups = m.num_attention_heads;
  if (!merged.count("model.kv_channels")) {
    if (m.hidden_size % m.num_attention_heads != 0)
      throw ConfigError(s.provenance.at("model.num_attention_heads"), "model.num_attention_heads",
                        std::to_string(m.num_attention_heads),
                        "hidden_size (" + std::to_string(m.hidden_size) +
                            ") is not divisible by the number of heads, so the head size is undefined",
                        "a divisor of hidden_size, or set model.kv_channels");
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  if (!merged.count("model.ffn_hidden_size")) m.ffn_hidden_size = 4 * m.hidden_size;
  if (!merged.count("model.max_position_embeddings")) m.max_position_embeddings = m.seq_length;
  if (!merged.count("model.moe_ffn_hidden_size")) m.moe.moe_ffn_hidden_size = m.ffn_hidden_size;
  if (m.moe.enabled())
    m.moe.moe_layers = parse_moe_layer_freq(m.moe.moe_layer_freq, m.num_layers, s.provenance.at("model.moe_layer_freq"),
                                            "model.moe_layer_freq");
  if (m.moe.enabled() && !m.moe.moe_routing_counts_file.empty()) {
    const int64_t moe_layers = std::count(m.moe.moe_layers.begin(), m.moe.moe_layers.end(), true);
    std::filesystem::path counts(m.moe.moe_routing_counts_file);
    if (counts.is_relative()) counts = file.parent_path() / counts;
    m.moe.measured_counts = read_routing_counts(counts, m.moe.num_experts, moe_layers, "model.moe_routing_counts_file");
  }
  // A pipeline layout sets the virtual stages (Megatron-LM: its stage count / pipeline size);
  // validate_model_and_splits checks that it divides and agrees with an explicit value.
  ParallelConfig& par = s.parallel;
  if (!par.pipeline_layout.empty() && !merged.count("parallel.virtual_pipeline_stages") &&
      static_cast<int64_t>(par.pipeline_layout.size()) % par.pipeline == 0) {
    par.virtual_pipeline_stages = static_cast<int64_t>(par.pipeline_layout.size()) / par.pipeline;
    // Errors about the virtual stages then point at the layout that set them.
    s.provenance.set("parallel.virtual_pipeline_stages", merged.at("parallel.pipeline_model_parallel_layout").loc);
  }

  // Topology.
  const RawValue& topo = merged.at("cluster.topology");
  const auto topo_path = resolve_topology(s.cluster.topology, file.parent_path(), topo.loc, "cluster.topology");
  s.topology = load_topology(topo_path, topo_overrides);
  if (!merged.count("cluster.devices_per_node")) s.cluster.devices_per_node = s.topology.node.devices_per_node;

  if (!check_layout) {
    if (!merged.count("parallel.data")) s.parallel.data = 0;
    return s;
  }
  validate_model_and_splits(s);
  // Data parallelism inferred from the cluster when not given.
  if (!merged.count("parallel.data")) {
    const int64_t gpus = s.cluster.nodes * s.cluster.devices_per_node;
    const int64_t model_par = s.parallel.tensor * s.parallel.pipeline * s.parallel.context;
    if (gpus % model_par != 0)
      throw ConfigError(s.provenance.at("parallel.tensor"), "parallel.data", "(inferred)",
                        "tensor*pipeline*context = " + std::to_string(model_par) +
                            " does not divide the cluster's " + std::to_string(gpus) + " devices (" +
                            std::to_string(s.cluster.nodes) + " nodes x " +
                            std::to_string(s.cluster.devices_per_node) + ")",
                        "tensor*pipeline*context*data == nodes*devices_per_node");
    s.parallel.data = gpus / model_par;
  }
  validate_scenario(s);
  validate_variation(s.variation, s.world_size(), s.cluster.nodes, s.cluster.devices_per_node, raw.file);
  if (!s.variation.links.empty()) {
    const SourceLoc at{raw.file, 0, 0};
    if (s.topology.network.kind == NetworkKind::none || s.cluster.nodes < 2)
      throw ConfigError(at, "variation.link.node", std::to_string(s.variation.links[0].node),
                        "this cluster has no network between nodes to degrade", "a cluster of two or more nodes on a network");
    for (const LinkVariation& l : s.variation.links) {
      const int64_t nics = s.topology.node.nics_per_node;
      if (l.nic >= nics)
        throw ConfigError(at, "variation.link.nic", std::to_string(l.nic), "no such NIC on a node of this topology",
                          "0 .. " + std::to_string(nics - 1));
      if (l.bandwidth_fraction == 0 && (l.nic < 0 || nics < 2))
        throw ConfigError(at, "variation.link.bandwidth_fraction", "0",
                          "the node would have no NIC left: its ranks could not reach the others",
                          "a fraction > 0, or one NIC (variation.link.nic) of a node with several");
    }
    if (nvlink_domain_devices(s) != s.cluster.devices_per_node)
      throw ConfigError(at, "variation.link.node", std::to_string(s.variation.links[0].node),
                        "the topology's NVLink domain spans several hosts, whose NICs the network model pools",
                        "a topology whose NVLink domain is one host (dgx-*, not gb*-nvl72)");
  }
  // Resources: an IR this host cannot hold is refused here, before generation starts (once per
  // file loaded, not in validate_scenario, which the planner calls for every candidate).
  check_ir_fits_host(s, host_memory_available_bytes());
  return s;
}

}  // namespace paralab
