// paralab interop — the values Megatron-LM derives from its arguments, applied to a draft
// after its table has run. NeMo 1.x trains through Megatron core and derives them the same way,
// so both importers call these; they read the draft's keys and facts (interop/rule.hpp).
#pragma once

#include "interop/draft.hpp"
#include "interop/import_options.hpp"

namespace paralab::interop {

// Every rule below, in the order Megatron-LM applies them.
void apply_megatron_defaults(ScenarioDraft& d, const ImportOptions& opts);

// bf16: gradient buffers in fp32 unless bf16 gradients were asked for (facts
// grad_reduce_in_bf16, main_grads_dtype, grad_sync_dtype).
void derive_grad_dtype(ScenarioDraft& d);
// fp8 / fp4 facts to training.precision; no precision at all: fp32.
void derive_low_precision(ScenarioDraft& d);
// Full recompute's method and layer count (facts recompute_method, recompute_num_layers).
void derive_recompute(ScenarioDraft& d);
// Sequence parallelism is turned off at tensor parallel size 1.
void derive_sequence_parallel(ScenarioDraft& d);
// Virtual stages from layers per virtual stage; the interleaved schedule with virtual stages.
void derive_virtual_stages(ScenarioDraft& d);
// model.vocab_size from the options, the vocab_size fact or a tokenizer hint; else a ConfigError.
void derive_vocab(ScenarioDraft& d, const ImportOptions& opts);

// True when a fact is present and on: an argument without value, or a value other than
// false / null / 0 / none.
bool fact_on(const SourceItem* item);

}  // namespace paralab::interop
