// paralab — validation of the layer split over pipeline stages: even, uneven first/last stages,
// the embedding and loss counted as layers, or Megatron-LM's pipeline_model_parallel_layout.
// Combinations Megatron-LM refuses are refused with its reason (megatron/training/arguments.py,
// megatron/core/transformer/transformer_config.py, pipeline_parallel_layer_layout.py).
#include <string>

#include "ir/validate_util.hpp"

namespace paralab {

namespace {

constexpr const char* kLayout = "parallel.pipeline_model_parallel_layout";
constexpr const char* kFirst = "parallel.decoder_first_pipeline_num_layers";
constexpr const char* kLast = "parallel.decoder_last_pipeline_num_layers";
constexpr const char* kEmb = "parallel.account_for_embedding_in_pipeline_split";
constexpr const char* kLoss = "parallel.account_for_loss_in_pipeline_split";

std::string n(int64_t x) { return std::to_string(x); }

// Ways to make `L` layers fit `p` stages, for the message of an even split that does not.
std::string split_hints(int64_t L, int64_t p) {
  std::string out;
  if ((L + 1) % p == 0) out += "; or " + std::string(kEmb) + " = true (" + n(L + 1) + " = " + n(p) + " x " + n((L + 1) / p) + ")";
  if ((L + 2) % p == 0)
    out += "; or " + std::string(kEmb) + " and " + kLoss + " = true (" + n(L + 2) + " = " + n(p) + " x " +
           n((L + 2) / p) + ", as Llama 3.1 405B's 126 layers run on 8 stages)";
  for (int64_t f = 1; p > 2 && f < L; ++f) {  // equal first and last stages, the middle even
    const int64_t rest = L - 2 * f;
    if (rest > 0 && rest % (p - 2) == 0) {
      out += "; or " + std::string(kFirst) + " = " + kLast + " = " + n(f) + " (" + n(rest / (p - 2)) +
             " on each middle stage)";
      break;
    }
  }
  return out + "; or a " + kLayout;
}

void validate_layout(const Scenario& s) {
  const Checker c{s};
  const ParallelConfig& par = s.parallel;
  const auto& st = par.pipeline_layout;
  const std::string v = "\"" + par.pipeline_model_parallel_layout + "\"";
  const int64_t stages = static_cast<int64_t>(st.size());
  const std::string grammar = "stages separated by '|'; E first in the first stage, L last in the last";
  if (stages % par.pipeline != 0)
    c.fail(kLayout, v,
         "has " + n(stages) + " stages; Megatron-LM: the length of pipeline_model_parallel_layout must be divisible by "
         "pipeline_model_parallel_size (" + n(par.pipeline) + ")",
         "k x " + n(par.pipeline) + " stages (k virtual stages per pipeline rank)");
  if (stages / par.pipeline > 1024)
    c.fail(kLayout, v, "has " + n(stages) + " stages: " + n(stages / par.pipeline) + " virtual stages per pipeline rank",
         "at most 1024 virtual stages per rank (virtual_pipeline_stages' bound)");
  if (par.virtual_pipeline_stages != stages / par.pipeline)
    c.fail("parallel.virtual_pipeline_stages", n(par.virtual_pipeline_stages),
         "disagrees with the layout's " + n(stages) + " stages on " + n(par.pipeline) +
             " pipeline ranks; Megatron-LM sets no more than one of --num-virtual-stages-per-pipeline-rank and "
             "--pipeline-model-parallel-layout",
         n(stages / par.pipeline) + ", or leave it unset");
  int64_t emb = 0, loss = 0, decoder = 0, mtp = 0;
  for (const auto& x : st) emb += x.embedding, loss += x.loss, decoder += x.decoder, mtp += x.mtp;
  if (emb != 1) c.fail(kLayout, v, "has " + n(emb) + " E; Megatron-LM: embedding must be specified exactly once", grammar);
  if (loss != 1) c.fail(kLayout, v, "has " + n(loss) + " L; Megatron-LM: loss must be specified exactly once", grammar);
  if (!st.front().embedding || !st.front().embedding_first)
    c.fail(kLayout, v,
         "Megatron-LM: the first layer must be embedding; the embedding runs on the first virtual stage "
         "(pipeline rank 0, chunk 0), so its E leads the first stage",
         grammar);
  if (!st.back().loss || !st.back().loss_last)
    c.fail(kLayout, v,
         "Megatron-LM: the last layer must be loss; the loss runs on the last virtual stage, so its L ends the "
         "last stage",
         grammar);
  if (decoder != s.model.num_layers)
    c.fail(kLayout, v,
         "Megatron-LM: the number of decoder layers (t: " + n(decoder) + ") must match num_layers (" +
             n(s.model.num_layers) + ")",
         n(s.model.num_layers) + " t in all");
  if (mtp != 0)
    c.fail(kLayout, v,
         "Megatron-LM: the number of MTP layers in the layout (m: " + n(mtp) +
             ") must match mtp_num_layers (0: multi-token prediction is not modeled)",
         "no m");
}

}  // namespace

void validate_pipeline_split(const Scenario& s) {
  const Checker c{s};
  const ParallelConfig& par = s.parallel;
  const int64_t L = s.model.num_layers, p = par.pipeline;
  const int64_t first = par.decoder_first_pipeline_num_layers, last = par.decoder_last_pipeline_num_layers;
  const bool uneven = first > 0 || last > 0;
  const bool counted = par.account_for_embedding_in_pipeline_split || par.account_for_loss_in_pipeline_split;
  const std::string uneven_key = first > 0 ? kFirst : kLast;
  const std::string counted_key = par.account_for_embedding_in_pipeline_split ? kEmb : kLoss;
  if (!par.pipeline_layout.empty()) {
    const std::string v = "\"" + par.pipeline_model_parallel_layout + "\"";
    if (uneven)
      c.fail(kLayout, v,
           "Megatron-LM refuses a pipeline_model_parallel_layout with " + uneven_key.substr(9) +
               " (num_layers_in_first/last_pipeline_stage): the layout places every layer",
           "the layout, or the uneven first/last stages");
    if (counted)
      c.fail(kLayout, v, "is given with " + counted_key.substr(9) + ": the layout places the embedding (E) and loss (L) itself",
           "the layout, or the counted embedding/loss");
    validate_layout(s);
    return;
  }
  if (uneven && counted)
    c.fail(uneven_key, n(first > 0 ? first : last),
         "Megatron-LM: num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot be set at the "
         "same time with account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split",
         "the uneven first/last stages, or the counted embedding/loss");
  if (uneven) {
    const int64_t fixed_stages = (first > 0) + (last > 0);
    const int64_t rest = L - first - last;
    if (p <= fixed_stages || rest <= 0 || rest % (p - fixed_stages) != 0)
      c.fail(uneven_key, n(first > 0 ? first : last),
           "the remaining " + n(rest) + " layers do not split evenly over the other " + n(p - fixed_stages) +
               " pipeline stages",
           "values that leave a positive multiple of " + n(p - fixed_stages) + " layers for the middle stages");
    if (par.virtual_pipeline_stages > 1)
      c.fail(uneven_key, n(first > 0 ? first : last), "uneven stages are not supported with virtual stages",
           "virtual_pipeline_stages = 1");
    return;
  }
  const int64_t e = par.account_for_embedding_in_pipeline_split, l = par.account_for_loss_in_pipeline_split;
  const int64_t total = L + e + l;
  const std::string counted_as = counted ? n(L) + " layers + " + (e && l ? "embedding + loss" : e ? "embedding" : "loss") +
                                               " = " + n(total)
                                         : "num_layers (" + n(L) + ")";
  if (total % p != 0) {
    c.fail("parallel.pipeline", n(p), "does not divide " + counted_as,
         "a divisor of " + n(total) + ": " + divisors_of(total) + (counted ? "" : split_hints(L, p)));
  }
  const int64_t per_stage = total / p;
  if (per_stage % par.virtual_pipeline_stages != 0)
    c.fail("parallel.virtual_pipeline_stages", n(par.virtual_pipeline_stages),
         "does not divide the " + n(per_stage) + " layers per pipeline stage (" + counted_as + " over " + n(p) + ")",
         "a divisor of " + n(per_stage) + ": " + divisors_of(per_stage));
}

}  // namespace paralab
