// paralab interop — a scenario being converted from another tool's configuration: the paralab
// keys set so far, each with the argument it came from, and every input item that was not
// converted, with the reason. Written out as a commented scenario TOML file.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "interop/import_options.hpp"
#include "ir/error.hpp"

namespace paralab::interop {

// One input item: a command-line argument with its values, or a YAML key with its value.
struct SourceItem {
  std::string name;                 // "--num-layers", "model.num_layers"
  std::vector<std::string> values;  // an argument's words after it; a YAML key: one value
  SourceLoc loc;
  int value_line = 0;        // a script's value set on another line (NUM_LAYERS=96 above)
  bool null = false;         // YAML null / ~ (unset)
  bool sequence = false;     // a YAML sequence: `values` holds its items
  std::string unresolved;    // non-empty: the value is computed at run time; says why

  [[nodiscard]] std::string value() const;  // the values joined by spaces
  [[nodiscard]] std::string shown() const;  // "--num-layers 96", "model.num_layers = 96"
  [[nodiscard]] std::string origin() const;  // "--num-layers 96 (train.sh:29, value set at line 12)"
  [[nodiscard]] bool is_flag() const { return name.rfind("--", 0) == 0; }
};

// Why an item was not converted.
enum class SkipKind : uint8_t {
  ignored,      // no effect on the work of a training step (logging, data, checkpoints)
  unsupported,  // changes the step, but paralab cannot model it: the scenario differs there
  unknown,      // not an item paralab knows
};

struct Skipped {
  SourceItem item;
  SkipKind kind = SkipKind::ignored;
  std::string reason;
};

struct DraftValue {
  std::string toml;    // the value as TOML: 96, true, "rmsnorm"
  std::string origin;  // "--num-layers 96 (launch.sh:28)", or how it was derived
};

class ScenarioDraft {
 public:
  std::string tool;         // "megatron", "nemo": the `paralab import` subcommand
  std::string source;       // the file converted, or "the command line"
  std::string name;         // the scenario's name

  // Sets (or replaces) paralab key `key`; `origin` says where the value came from.
  void set(const std::string& key, const std::string& toml, const std::string& origin);
  // The same, naming `item` as the origin (`how`, when given, replaces the default wording).
  void set_from(const std::string& key, const std::string& toml, const SourceItem& item, const std::string& how = "");
  [[nodiscard]] bool has(const std::string& key) const { return find(key) != nullptr; }
  [[nodiscard]] const DraftValue* find(const std::string& key) const;
  // The value of an integer key, if set.
  [[nodiscard]] std::optional<int64_t> integer(const std::string& key) const;
  [[nodiscard]] std::string text(const std::string& key) const;  // a string key's value, unquoted

  // Input items kept for derived values (the importers' own rules), by fact name. `take`
  // returns one (nullptr when absent) and marks it used; `skip_unused` lists the others as
  // ignored, so no item is dropped unsaid.
  void keep(const std::string& fact, const SourceItem& item) { facts_[fact] = {item, false}; }
  const SourceItem* take(const std::string& fact_name);
  void skip_unused_facts();

  void skip(const SourceItem& item, SkipKind kind, const std::string& reason);
  void note(const std::string& line) { notes_.push_back(line); }
  [[nodiscard]] const std::vector<Skipped>& skipped() const { return skipped_; }
  [[nodiscard]] const std::vector<std::string>& notes() const { return notes_; }

  // Where an error about paralab key `key` should point: the item it came from, if any.
  [[nodiscard]] const SourceItem* origin_item(const std::string& key) const;

  // The scenario TOML: the skipped items and notes as comments at the top, then the keys by
  // section, each with its origin as a comment.
  [[nodiscard]] std::string toml() const;
  // What the user reads on stderr: the skipped items grouped by reason, and the notes.
  [[nodiscard]] std::string report() const;

 private:
  struct Entry {
    std::string key;
    DraftValue value;
    std::optional<SourceItem> item;
  };
  std::vector<Entry> values_;  // in the order set, written by section
  std::map<std::string, std::pair<SourceItem, bool>> facts_;  // the item, used
  std::vector<Skipped> skipped_;
  std::vector<std::string> notes_;
};

// "file:line" of an item ("the command line" for arguments given directly).
std::string where(const SourceLoc& loc);
// `loc` for an error: an argument given directly is located at "the command line".
SourceLoc located(const SourceLoc& loc);

// A TOML value for a converted word: bare when it is an integer, a number or a boolean,
// else a quoted string.
std::string toml_value(const std::string& word);

// A converted scenario must load: the draft's TOML goes through paralab's scenario loader
// before it is written, and what the loader refuses is raised again against the input item
// that set the key (file, line, argument, value), not against a temporary file.
void check_draft(const ScenarioDraft& draft);

// The last step of a conversion: the options' `sets` applied, unused facts listed as ignored,
// and check_draft.
void finish_draft(ScenarioDraft& draft, const ImportOptions& opts);

// A ConfigError about an input item: names its file, line, name and value.
[[noreturn]] void fail(const SourceItem& item, const std::string& problem, const std::string& allowed);

}  // namespace paralab::interop
