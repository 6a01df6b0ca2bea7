// paralab interop — one row of a conversion table: an input item (a Megatron-LM argument, a
// NeMo YAML key) and what becomes of it. Both importers are a table of rules plus the derived
// values Megatron-LM computes (interop/megatron_defaults.hpp); there is no per-item code path.
#pragma once

#include <span>
#include <string>

#include "interop/draft.hpp"

namespace paralab::interop {

enum class Conv : uint8_t {
  integer,      // one integer value -> `key`
  real,         // one number -> `key`
  text,         // one word -> `key` as a TOML string
  boolean,      // a YAML true/false -> `key`
  negated,      // a YAML true/false -> `key` = not the value
  set,          // an argument without value, or a YAML true -> `key` = `arg` (a TOML value)
  choice,       // one value, renamed by `arg` ("LayerNorm=layernorm,RMSNorm=rmsnorm") -> `key`
  fact,         // kept under the name `key` for a derived value
  ignore,       // no effect on a step's work; `arg` is the reason
  unsupported,  // changes the step, paralab cannot model it; `arg` is the reason
};

struct Rule {
  const char* source;  // "--num-layers", "model.num_layers"; a trailing '*' matches a prefix
  Conv conv;
  const char* key;       // the paralab key, or the fact's name
  const char* arg = "";  // see Conv
  const char* off = "";  // unsupported: values meaning "not in use" ("false|null|1"), not listed as such
};

// Reasons shared by the tables (the stderr report groups ignored items by reason).
namespace why {
inline constexpr const char* data = "data, tokenizer files and data loading do not change a step's work";
inline constexpr const char* logging = "logging, profiling and timers do not change a step's work";
inline constexpr const char* checkpoint =
    "checkpoints are written between steps (their cost is [reliability]'s, docs/goodput.md)";
inline constexpr const char* schedule =
    "the learning-rate schedule, run length and exit conditions do not change a step's work";
inline constexpr const char* init = "weight initialization does not change a step's work";
inline constexpr const char* fusion = "a kernel-fusion switch: paralab's ops are Megatron-LM's fused kernels";
inline constexpr const char* impl = "an implementation choice that does the same work";
inline constexpr const char* numerics = "numerics only (scaling, checks, determinism): the same work";
inline constexpr const char* moe =
    "a mixture-of-experts option paralab does not model (docs/moe.md lists the keys it reads)";
}  // namespace why

// The rule for `name`: an exact row, else the longest matching prefix row; nullptr when none.
const Rule* find_rule(std::span<const Rule> table, const std::string& name);

// Applies `rule` (nullptr: an unknown item) to `item`. Throws ConfigError naming the item's
// file, line, name and value when the value does not fit the rule.
void apply_rule(ScenarioDraft& draft, const Rule* rule, const SourceItem& item);

// Typed reads of an item's single value, with the item named in errors.
int64_t item_integer(const SourceItem& item, int64_t min = 1);
double item_real(const SourceItem& item);
bool item_bool(const SourceItem& item);
std::string item_word(const SourceItem& item);  // exactly one value

std::string lowercase(std::string s);

}  // namespace paralab::interop
