// paralab interop — Megatron-LM arguments to a scenario: the arguments as items, the table,
// Megatron-LM's derived values, the cluster.
#include "interop/megatron_args.hpp"

#include <algorithm>
#include <charconv>

#include "interop/cluster_size.hpp"
#include "interop/launch_script.hpp"
#include "interop/megatron_defaults.hpp"

namespace paralab::interop {

namespace {

// The training script's words as arguments: each `--name` with the words up to the next one.
std::vector<SourceItem> to_items(const std::vector<ScriptWord>& words, const std::string& file, ScenarioDraft& d) {
  std::vector<SourceItem> items;
  for (const ScriptWord& w : words) {
    const SourceLoc loc = w.line < 0 ? SourceLoc{} : SourceLoc{file, w.line, 0};  // -1: the command line
    if (w.text.rfind("--", 0) == 0 && w.text.size() > 2) {
      SourceItem it;
      it.loc = loc;
      const size_t eq = w.text.find('=');
      it.name = w.text.substr(0, eq);
      if (eq != std::string::npos) it.values.push_back(w.text.substr(eq + 1)), it.value_line = w.line;
      it.unresolved = w.unresolved;
      items.push_back(std::move(it));
    } else if (!items.empty()) {
      SourceItem& it = items.back();
      it.values.push_back(w.text);
      if (it.value_line == 0) it.value_line = w.line;
      if (it.unresolved.empty()) it.unresolved = w.unresolved;
    } else {
      d.skip(SourceItem{w.text, {}, loc, 0, false, false, w.unresolved}, SkipKind::unknown,
             "a word before the first argument");
    }
  }
  return items;
}

std::optional<int64_t> count_of(const std::string& text) {
  int64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || v < 1) return std::nullopt;
  return v;
}

// GPUs per node and nodes: the launcher's options, else the script's variables.
GpuCount gpu_count(const LaunchCommand& c, ScenarioDraft& d) {
  GpuCount g;
  const auto at = [&](int line) { return " (" + where(SourceLoc{c.file, line, 0}) + ")"; };
  for (size_t i = 0; i < c.launcher.size(); ++i) {
    std::string opt = c.launcher[i].text, value;
    const size_t eq = opt.find('=');
    if (eq != std::string::npos)
      value = opt.substr(eq + 1), opt = opt.substr(0, eq);
    else if (i + 1 < c.launcher.size())
      value = c.launcher[i + 1].text;
    const bool per_node = opt == "--nproc_per_node" || opt == "--nproc-per-node" || opt == "--num_gpus";
    const bool nodes = opt == "--nnodes" || opt == "--num_nodes";
    if (!per_node && !nodes) continue;
    std::string shown = opt + " " + value;
    if (nodes && value.find(':') != std::string::npos) {  // elastic min:max
      d.note("elastic " + shown + at(c.launcher[i].line) + ": the most nodes taken");
      value = value.substr(value.find(':') + 1);
    }
    const auto v = count_of(value);
    if (!v) {
      d.note(shown + at(c.launcher[i].line) + " is not a number of GPUs or nodes paralab can read");
      continue;
    }
    (per_node ? g.per_node : g.nodes) = v;
    (per_node ? g.per_node_origin : g.nodes_origin) = shown + at(c.launcher[i].line);
  }
  const auto from_var = [&](std::optional<int64_t>& into, std::string& origin,
                            std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (auto p = c.env.scalar(n); !into && p && p->unresolved.empty())
        if (auto v = count_of(p->str())) into = v, origin = std::string(n) + "=" + p->str() + at(p->line());
  };
  from_var(g.per_node, g.per_node_origin, {"GPUS_PER_NODE", "NPROC_PER_NODE"});
  from_var(g.nodes, g.nodes_origin, {"NUM_NODES", "NNODES", "N_NODES"});
  return g;
}

void require(const ScenarioDraft& d, const std::string& file) {
  const struct {
    const char* key;
    const char* arg;
  } required[] = {{"model.num_layers", "--num-layers"},
                  {"model.hidden_size", "--hidden-size"},
                  {"model.num_attention_heads", "--num-attention-heads"},
                  {"model.seq_length", "--seq-length"}};
  for (const auto& r : required)
    if (!d.has(r.key))
      throw ConfigError(SourceLoc{file.empty() ? "the command line" : file, 0, 0}, r.arg, "",
                        "required argument is missing", std::string(r.arg) + " N");
}

// The derived values only Megatron-LM's own arguments have.
void megatron_only(ScenarioDraft& d) {
  const SourceItem* gqa = d.take("gqa");
  const SourceItem* groups = d.take("num_query_groups");
  if (gqa) {
    if (groups)
      d.set_from("model.num_query_groups", std::to_string(item_integer(*groups)), *groups);
    else
      d.set_from("model.num_query_groups", "1", *gqa,
                 gqa->origin() + " without --num-query-groups: Megatron-LM's default, 1");
  } else if (groups) {
    d.skip(*groups, SkipKind::ignored, "Megatron-LM reads it only with --group-query-attention");
  }
  if (!d.has("model.ffn_hidden_size")) {
    const int64_t h = d.integer("model.hidden_size").value_or(0);
    if (d.text("model.activation") == "swiglu")
      d.set("model.ffn_hidden_size", std::to_string(4 * h * 2 / 3 / 64 * 64),
            "Megatron-LM's default with --swiglu: 4h x 2/3, down to a multiple of 64");
    else
      d.set("model.ffn_hidden_size", std::to_string(4 * h), "Megatron-LM's default: 4 x hidden size");
  }
  if (const SourceItem* none = d.take("no_position_embedding")) {
    if (d.text("model.position_embedding_type") == "rope")
      d.skip(*none, SkipKind::ignored, "with rope there is no position table anyway");
    else
      d.skip(*none, SkipKind::unsupported,
             "a model without position embeddings: paralab builds the learned position table");
  }
  if (const SourceItem* fsdp = d.take("megatron_fsdp"); fsdp && !d.has("parallel.zero_stage"))
    d.set_from("parallel.zero_stage", "3", *fsdp, fsdp->origin() + ": its default sharding, optim_grads_params");
  for (const char* key : {"parallel.overlap_grad_reduce", "parallel.overlap_param_gather"})
    if (!d.has(key)) d.set(key, "false", "Megatron-LM's default (not asked for)");
  if (const SourceItem* bucket = d.take("ddp_bucket_size")) {
    const bool fp32 =
        d.text("training.accumulate_allreduce_grads_in_fp32") == "true" || d.text("training.precision") == "fp32";
    const double mib = static_cast<double>(item_integer(*bucket)) * (fp32 ? 4 : 2) / 1048576.0;
    d.set_from("parallel.dp_bucket_mb", toml_value(std::to_string(mib)), *bucket,
               bucket->origin() + std::string(" parameters x ") + (fp32 ? "4" : "2") + " bytes of gradient");
  }
}

ScenarioDraft convert(const LaunchCommand& c, const ImportOptions& opts) {
  ScenarioDraft d;
  d.tool = "megatron";
  d.source = c.file.empty() ? "the command line" : c.file;
  d.name = !opts.name.empty() ? opts.name : c.file.empty() ? "megatron" : std::filesystem::path(c.file).stem().string();
  for (const std::string& n : c.notes) d.note(n);
  const auto rules = megatron_rules();
  for (const SourceItem& item : to_items(c.args, c.file, d)) apply_rule(d, find_rule(rules, item.name), item);
  require(d, c.file);
  apply_megatron_defaults(d, opts);
  megatron_only(d);
  size_cluster(d, gpu_count(c, d), opts);
  finish_draft(d, opts);
  return d;
}

}  // namespace

ScenarioDraft import_megatron_args(const std::vector<std::string>& args, const ImportOptions& opts) {
  LaunchCommand c;
  bool after_script = std::none_of(args.begin(), args.end(), is_training_script);
  for (const std::string& a : args) {
    if (!after_script && is_training_script(a)) {
      after_script = true;
      c.script = ScriptWord{a, 0, ""};
      continue;
    }
    (after_script ? c.args : c.launcher).push_back(ScriptWord{a, 0, ""});
  }
  return convert(c, opts);
}

ScenarioDraft import_megatron_script(const std::filesystem::path& script, const std::vector<std::string>& extra,
                                     const ImportOptions& opts) {
  if (script.extension() == ".py")
    throw ConfigError(SourceLoc{script.string(), 0, 0}, "--file", script.string(),
                      "a Python file: --file takes the bash script that launches training",
                      "a launch script (.sh), or pretrain_gpt.py's arguments on the command line");
  LaunchCommand c = read_launch_script(script);
  for (const std::string& a : extra) c.args.push_back(ScriptWord{a, -1, ""});
  return convert(c, opts);
}

}  // namespace paralab::interop
