// paralab interop — Megatron-LM's derived values (megatron/training/arguments.py:
// validate_args), shared by the Megatron-LM and NeMo importers.
#include "interop/megatron_defaults.hpp"

#include <algorithm>
#include <optional>

#include "interop/rule.hpp"
#include "ir/pipeline_layout.hpp"

namespace paralab::interop {

namespace {

// Tokenizers named by a configuration (Megatron-LM's --tokenizer-type / --tokenizer-model /
// --merge-file, NeMo's model.tokenizer.*): Megatron reads their vocabulary from the tokenizer
// files at run time, which paralab does not have.
struct TokenizerHint {
  std::string type;        // GPT2BPETokenizer, HuggingFaceTokenizer, ... (Megatron's names)
  std::string model;       // a Hugging Face name or a tokenizer file path
  std::string vocab_file;  // GPT-2's vocab.json, BERT's vocab.txt
  std::string merge_file;  // GPT-2's merges.txt
};

struct VocabSize {
  int64_t size = 0;
  std::string tokenizer;  // "GPT-2 BPE", "Llama 3"
};

enum class Field : uint8_t { type, model, file };

struct Known {
  Field field;
  const char* pattern;  // the tokenizer type exactly; a model or file name: a lowercase substring
  int64_t size;
  const char* tokenizer;
};

// Sizes from the tokenizers' own files: GPT-2's encoder.json (Radford et al. 2019: 50,257),
// Llama 2's tokenizer.model (Touvron et al. 2023: 32k), Llama 3's tokenizer (Llama Team 2024:
// 128K tokens, 128,256 with the special tokens), Mistral 7B / Mixtral (Jiang et al. 2023: 32k).
constexpr Known kKnown[] = {
    {Field::type, "GPT2BPETokenizer", 50257, "GPT-2 BPE"},
    {Field::type, "Llama2Tokenizer", 32000, "Llama 2"},
    {Field::model, "llama-3", 128256, "Llama 3"},
    {Field::model, "llama3", 128256, "Llama 3"},
    {Field::model, "llama-2", 32000, "Llama 2"},
    {Field::model, "llama2", 32000, "Llama 2"},
    {Field::model, "mixtral", 32000, "Mistral"},
    {Field::model, "mistral-7b", 32000, "Mistral"},
    {Field::model, "gpt2", 50257, "GPT-2 BPE"},
    {Field::file, "gpt2", 50257, "GPT-2 BPE"},
    {Field::file, "merges.txt", 50257, "GPT-2 BPE"},
};

// The vocabulary of a known tokenizer (GPT-2 BPE, Llama 2, Llama 3, Mistral), else nothing. A
// model name is looked for in `model` and `type` (NeMo names Hugging Face tokenizers by type).
std::optional<VocabSize> known_vocab(const TokenizerHint& hint) {
  const std::string model = lowercase(hint.model + " " + hint.type),
                    files = lowercase(hint.vocab_file + " " + hint.merge_file);
  for (const Known& k : kKnown) {
    const bool hit = k.field == Field::type    ? hint.type == k.pattern
                     : k.field == Field::model ? model.find(k.pattern) != std::string::npos
                                               : files.find(k.pattern) != std::string::npos;
    if (hit) return VocabSize{k.size, k.tokenizer};
  }
  // Of Megatron-LM's tokenizers only GPT2BPETokenizer reads a merge file.
  if (hint.type.empty() && !hint.merge_file.empty()) return VocabSize{50257, "GPT-2 BPE"};
  return std::nullopt;
}

std::string fact_text(const SourceItem* item) { return item && !item->null ? item->value() : ""; }

}  // namespace

bool fact_on(const SourceItem* item) {
  if (!item || item->null) return false;
  if (item->values.empty()) return true;
  const std::string v = lowercase(item->value());
  return v != "false" && v != "null" && v != "0" && v != "none" && !v.empty();
}

void derive_grad_dtype(ScenarioDraft& d) {
  const SourceItem* bf16_grads = d.take("grad_reduce_in_bf16");
  const SourceItem* main_grads = d.take("main_grads_dtype");
  const SourceItem* sync = d.take("grad_sync_dtype");
  if (d.has("training.accumulate_allreduce_grads_in_fp32") || d.text("training.precision") != "bf16") {
    for (const SourceItem* f : {bf16_grads, main_grads, sync})
      if (f) d.skip(*f, SkipKind::ignored, "the gradient dtype is set otherwise (fp32 or fp16 training, or given)");
    return;
  }
  for (const SourceItem* f : {bf16_grads, main_grads, sync}) {
    const std::string v = lowercase(fact_text(f));
    if (f && (f == bf16_grads ? fact_on(f) : v == "bf16" || v == "16" || v == "bf16-mixed")) {
      d.set_from("training.accumulate_allreduce_grads_in_fp32", "false", *f);
      return;
    }
  }
  d.set("training.accumulate_allreduce_grads_in_fp32", "true",
        "Megatron-LM's rule for bf16: gradients accumulate and reduce in fp32 (no bf16 gradients asked for)");
}

void derive_low_precision(ScenarioDraft& d) {
  const SourceItem* fp8 = d.take("fp8");
  const SourceItem* fp8_recipe = d.take("fp8_recipe");
  const SourceItem* fp4 = d.take("fp4");
  const SourceItem* fp4_recipe = d.take("fp4_recipe");
  const SourceItem* low = fact_on(fp4) ? fp4 : fact_on(fp8) ? fp8 : nullptr;
  const SourceItem* recipe = low == fp4 ? fp4_recipe : fp8_recipe;
  for (const SourceItem* f : {fp8, fp8_recipe, fp4, fp4_recipe})
    if (f && f != low && f != recipe) d.skip(*f, SkipKind::ignored, "off, or without the fp8/fp4 format it goes with");
  if (low) {
    const std::string base = d.text("training.precision");
    if (base == "fp16")
      d.skip(*low, SkipKind::unsupported,
             "fp8/fp4 GEMMs with fp16 storage: paralab's low-precision GEMMs keep bf16 storage");
    std::string precision = low == fp4 ? "nvfp4" : "fp8";
    const std::string r = lowercase(fact_text(recipe));
    if (low == fp8 && r == "mxfp8") precision = "mxfp8";
    if (!r.empty() && r != "nvfp4" && r != "mxfp8" && r != "delayed" && r != "tensorwise" && r != "blockwise")
      d.skip(*recipe, SkipKind::unsupported,
             "a scaling recipe paralab does not model (delayed, tensorwise, blockwise, mxfp8, nvfp4)");
    std::string how = low->origin();
    if (recipe) how += ", " + recipe->origin();
    d.set_from("training.precision", toml_value(precision), *low, how + ": GEMMs in " + precision + ", storage bf16");
  }
  if (!d.has("training.precision"))
    d.set("training.precision", "\"fp32\"", "no bf16 or fp16 given: Megatron-LM trains in fp32");
}

void derive_recompute(ScenarioDraft& d) {
  const SourceItem* method = d.take("recompute_method");
  const SourceItem* count = d.take("recompute_num_layers");
  if ((!method || method->null) && (!count || count->null)) return;
  if (d.text("training.recompute") != "full") {
    for (const SourceItem* f : {method, count})
      if (f && !f->null) d.skip(*f, SkipKind::ignored, "Megatron-LM reads it only with full recompute granularity");
    return;
  }
  const std::string m = method && !method->null ? item_word(*method) : "uniform";
  const int64_t n = count && !count->null ? item_integer(*count) : 1;
  const SourceItem& at = count && !count->null ? *count : *method;
  const int64_t vp = d.integer("parallel.virtual_pipeline_stages").value_or(1);
  const int64_t per_stage = d.integer("model.num_layers").value_or(1) / d.integer("parallel.pipeline").value_or(1) / vp;
  if (m != "uniform" && m != "block") fail(*method, "unknown recompute method", "uniform | block");
  if ((m == "uniform" && n == 1) || (m == "block" && n >= per_stage)) {
    d.skip(at, SkipKind::ignored, "every layer recomputed: paralab's full recompute");
    if (method && &at != method) d.skip(*method, SkipKind::ignored, "every layer recomputed: paralab's full recompute");
  } else if (m == "uniform") {
    d.skip(at, SkipKind::unsupported,
           "Megatron checkpoints the input of each group of " + std::to_string(n) +
               " layers (less memory); paralab checkpoints every layer's input (the same recompute work)");
  } else {
    d.skip(at, SkipKind::unsupported,
           "Megatron recomputes " + std::to_string(n) + " of each model chunk's " + std::to_string(per_stage) +
               " layers; paralab recomputes all of them (more time, less memory than the run)");
  }
}

void derive_sequence_parallel(ScenarioDraft& d) {
  if (d.text("parallel.sequence_parallel") == "true" && d.integer("parallel.tensor").value_or(1) == 1)
    d.set("parallel.sequence_parallel", "false",
          "sequence parallelism was asked for, but Megatron-LM turns it off at tensor parallel size 1");
}

void derive_virtual_stages(ScenarioDraft& d) {
  if (const SourceItem* per = d.take("layers_per_virtual_stage"); per && !per->null) {
    const int64_t n = item_integer(*per);
    // Megatron-LM counts the embedding and loss as layers here when asked to (arguments.py).
    const int64_t layers = d.integer("model.num_layers").value_or(0) +
                           (d.text("parallel.account_for_embedding_in_pipeline_split") == "true") +
                           (d.text("parallel.account_for_loss_in_pipeline_split") == "true");
    const int64_t pp = d.integer("parallel.pipeline").value_or(1);
    if (d.has("parallel.virtual_pipeline_stages"))
      fail(*per, "given with the number of virtual stages too", "one of the two");
    if (layers <= 0 || layers % pp != 0 || (layers / pp) % n != 0)
      fail(*per,
           "does not divide the layers of a pipeline stage (" + std::to_string(layers) + " / " + std::to_string(pp) +
               ")",
           "a divisor of the layers per pipeline stage");
    d.set_from("parallel.virtual_pipeline_stages", std::to_string(layers / pp / n), *per,
               per->origin() + ": " + std::to_string(layers) + " layers / " + std::to_string(pp) + " stages / " +
                   std::to_string(n));
  }
  int64_t virtual_stages = d.integer("parallel.virtual_pipeline_stages").value_or(1);
  // A layout sets the virtual stages (its stage count / pipeline). A layout that does not parse
  // is left to check_draft, which reports the loader's error against the input item.
  if (d.has("parallel.pipeline_model_parallel_layout")) try {
      const auto stages = parse_pipeline_layout(d.text("parallel.pipeline_model_parallel_layout"), SourceLoc{},
                                                "parallel.pipeline_model_parallel_layout");
      virtual_stages =
          static_cast<int64_t>(stages.size()) / std::max<int64_t>(1, d.integer("parallel.pipeline").value_or(1));
    } catch (const ConfigError&) {
    }
  if (virtual_stages > 1 && !d.has("parallel.schedule"))
    d.set("parallel.schedule", "\"interleaved\"", "Megatron-LM runs the interleaved 1F1B schedule with virtual stages");
}

void derive_vocab(ScenarioDraft& d, const ImportOptions& opts) {
  TokenizerHint hint;
  const SourceItem* type = d.take("tokenizer_type");
  const SourceItem* model = d.take("tokenizer_model");
  const SourceItem* vocab_file = d.take("vocab_file");
  const SourceItem* merge_file = d.take("merge_file");
  const SourceItem* size = d.take("vocab_size");
  hint.type = fact_text(type), hint.model = fact_text(model);
  hint.vocab_file = fact_text(vocab_file), hint.merge_file = fact_text(merge_file);
  if (opts.vocab_size) {
    d.set("model.vocab_size", std::to_string(*opts.vocab_size),
          "--vocab-size " + std::to_string(*opts.vocab_size) + " (paralab import)");
    if (size) d.skip(*size, SkipKind::ignored, "replaced by paralab import's --vocab-size");
    return;
  }
  if (size && !size->null) {
    const int64_t v = item_integer(*size);
    if (hint.type == "NullTokenizer")  // its vocabulary is --vocab-size plus the end-of-document token
      d.set_from("model.vocab_size", std::to_string(v + 1), *size,
                 size->origin() + " + 1: NullTokenizer's end-of-document token");
    else
      d.set_from("model.vocab_size", std::to_string(v), *size);
    return;
  }
  if (auto known = known_vocab(hint)) {
    const SourceItem* from = type && !hint.type.empty() && known_vocab({hint.type, "", "", ""}) ? type
                             : model && !hint.model.empty()                                     ? model
                             : merge_file                                                       ? merge_file
                             : vocab_file                                                       ? vocab_file
                                                                                                : type;
    d.set_from("model.vocab_size", std::to_string(known->size), *from,
               "the " + known->tokenizer + " tokenizer's vocabulary, from " + from->origin());
    return;
  }
  std::string seen = hint.type + " " + hint.model + " " + hint.vocab_file;
  seen.erase(0, seen.find_first_not_of(' '));
  throw ConfigError(
      SourceLoc{d.source, 0, 0}, "model.vocab_size", "",
      "the vocabulary size is unknown: no vocabulary size given and no tokenizer paralab knows" +
          (seen.find_first_not_of(' ') == std::string::npos ? std::string() : " (" + seen + ")"),
      "paralab import ... --vocab-size N (the tokenizer's vocabulary; GPT-2 50257, Llama 2 32000, Llama 3 128256)");
}

void apply_megatron_defaults(ScenarioDraft& d, const ImportOptions& opts) {
  derive_grad_dtype(d);
  derive_low_precision(d);
  derive_virtual_stages(d);
  derive_recompute(d);
  derive_sequence_parallel(d);
  derive_vocab(d, opts);
}

}  // namespace paralab::interop
