// paralab interop — the draft scenario, its TOML and stderr forms, and its check by the loader.
#include "interop/draft.hpp"

#include <algorithm>
#include <charconv>

#include <unistd.h>

#include <atomic>
#include <fstream>

#include "ir/field_table.hpp"
#include "ir/scenario_loader.hpp"

namespace paralab::interop {

std::string SourceItem::value() const {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : " ") + v;
  return out;
}

std::string SourceItem::shown() const {
  if (is_flag()) return values.empty() ? name : name + " " + value();
  if (null) return name + " = null";
  if (sequence) {
    std::string items;
    for (const std::string& v : values) items += (items.empty() ? "" : ", ") + v;
    return name + " = [" + items + "]";
  }
  return name + " = " + value();
}

std::string SourceItem::origin() const {
  std::string at = where(loc);
  if (value_line > 0 && value_line != loc.line) at += ", value set at line " + std::to_string(value_line);
  return shown() + " (" + at + ")";
}

std::string where(const SourceLoc& loc) { return loc.file.empty() ? "the command line" : loc.str(); }

std::string toml_value(const std::string& word) {
  if (word == "true" || word == "false") return word;
  int64_t i = 0;
  const char* end = word.data() + word.size();
  if (!word.empty()) {
    auto r = std::from_chars(word.data(), end, i);
    if (r.ec == std::errc() && r.ptr == end) return word;
    double d = 0;
    auto rd = std::from_chars(word.data(), end, d);
    if (rd.ec == std::errc() && rd.ptr == end) return toml_number(d);
  }
  return toml_string(word);
}

SourceLoc located(const SourceLoc& loc) { return loc.file.empty() ? SourceLoc{"the command line", 0, 0} : loc; }

void fail(const SourceItem& item, const std::string& problem, const std::string& allowed) {
  throw ConfigError(located(item.loc), item.name, item.value(), problem, allowed);
}

void ScenarioDraft::set(const std::string& key, const std::string& toml, const std::string& origin) {
  for (Entry& e : values_)
    if (e.key == key) {
      e.value = {toml, origin};
      e.item.reset();
      return;
    }
  values_.push_back({key, {toml, origin}, std::nullopt});
}

void ScenarioDraft::set_from(const std::string& key, const std::string& toml, const SourceItem& item,
                             const std::string& how) {
  set(key, toml, how.empty() ? item.origin() : how);
  for (Entry& e : values_)
    if (e.key == key) e.item = item;
}

const DraftValue* ScenarioDraft::find(const std::string& key) const {
  for (const Entry& e : values_)
    if (e.key == key) return &e.value;
  return nullptr;
}

const SourceItem* ScenarioDraft::origin_item(const std::string& key) const {
  for (const Entry& e : values_)
    if (e.key == key && e.item) return &*e.item;
  return nullptr;
}

std::optional<int64_t> ScenarioDraft::integer(const std::string& key) const {
  const DraftValue* v = find(key);
  if (!v) return std::nullopt;
  int64_t i = 0;
  auto r = std::from_chars(v->toml.data(), v->toml.data() + v->toml.size(), i);
  if (r.ec != std::errc() || r.ptr != v->toml.data() + v->toml.size()) return std::nullopt;
  return i;
}

std::string ScenarioDraft::text(const std::string& key) const {
  const DraftValue* v = find(key);
  if (!v) return "";
  const std::string& t = v->toml;
  return t.size() >= 2 && t.front() == '"' ? t.substr(1, t.size() - 2) : t;
}

const SourceItem* ScenarioDraft::take(const std::string& fact_name) {
  auto it = facts_.find(fact_name);
  if (it == facts_.end()) return nullptr;
  it->second.second = true;
  return &it->second.first;
}

void ScenarioDraft::skip_unused_facts() {
  for (const auto& entry : facts_)
    if (!entry.second.second)
      skip(entry.second.first, SkipKind::ignored, "no effect without the arguments it goes with");
}

void ScenarioDraft::skip(const SourceItem& item, SkipKind kind, const std::string& reason) {
  skipped_.push_back({item, kind, reason});
}

namespace {

// Names joined with ", ", wrapped before `width` columns, each line starting with `indent`.
std::string wrapped(const std::vector<std::string>& names, const std::string& indent, size_t width = 96) {
  std::string out, line = indent;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string piece = names[i] + (i + 1 < names.size() ? "," : "");
    if (line.size() > indent.size() && line.size() + 1 + piece.size() > width) {
      out += line + "\n";
      line = indent;
    }
    line += (line.size() > indent.size() ? " " : "") + piece;
  }
  return out + line + "\n";
}

// The skipped items and notes, each line started by `lead` ("# " in the file, "" on stderr).
std::string skipped_text(const std::vector<Skipped>& skipped, const std::vector<std::string>& notes,
                         const std::string& lead) {
  std::string out;
  const struct {
    SkipKind kind;
    const char* title;
  } kinds[] = {
      {SkipKind::unsupported, "unsupported (paralab cannot model these: the scenario differs from the run there):"},
      {SkipKind::unknown, "unknown (not known to paralab: check whether they change the step):"}};
  for (const auto& k : kinds) {
    std::string block;
    for (const Skipped& s : skipped)
      if (s.kind == k.kind) block += lead + "  " + s.item.origin() + ": " + s.reason + "\n";
    if (!block.empty()) out += lead + k.title + "\n" + block;
  }
  std::vector<std::string> reasons;  // ignored items, one group per reason, in order of appearance
  for (const Skipped& s : skipped)
    if (s.kind == SkipKind::ignored && std::find(reasons.begin(), reasons.end(), s.reason) == reasons.end())
      reasons.push_back(s.reason);
  if (!reasons.empty()) out += lead + "ignored (no effect on the work of a training step):\n";
  for (const std::string& r : reasons) {
    std::vector<std::string> names;
    for (const Skipped& s : skipped)
      if (s.kind == SkipKind::ignored && s.reason == r &&
          std::find(names.begin(), names.end(), s.item.name) == names.end())
        names.push_back(s.item.name);
    out += lead + "  " + r + ":\n" + wrapped(names, lead + "    ");
  }
  if (!notes.empty()) out += lead + "notes:\n";
  for (const std::string& n : notes) out += lead + "  " + n + "\n";
  return out;
}

}  // namespace

std::string ScenarioDraft::report() const { return skipped_text(skipped_, notes_, ""); }

std::string ScenarioDraft::toml() const {
  std::string out = "# Converted by `paralab import " + tool + "` from " + source + ".\n" +
                    "# Each key's comment names what it came from; keys not set here take paralab's defaults\n"
                    "# (docs/config.md). What maps to what: docs/interop.md.\n";
  const std::string rest = skipped_text(skipped_, notes_, "# ");
  if (!rest.empty()) out += "#\n" + rest;
  out += "\nname = " + toml_string(name) + "\n";
  out += "description = " + toml_string("converted by paralab import " + tool + " from " + source) + "\n";
  std::vector<std::string> sections = {"model", "training", "parallel", "cluster"};
  for (const Entry& e : values_) {
    const std::string sec = e.key.substr(0, e.key.find('.'));
    if (std::find(sections.begin(), sections.end(), sec) == sections.end()) sections.push_back(sec);
  }
  for (const std::string& sec : sections) {
    std::string block;
    for (const Entry& e : values_) {
      if (e.key.compare(0, sec.size() + 1, sec + ".") != 0) continue;
      std::string line = e.key.substr(sec.size() + 1) + " = " + e.value.toml;
      if (line.size() < 36) line.resize(36, ' ');
      block += line + " # " + e.value.origin + "\n";
    }
    if (!block.empty()) out += "\n[" + sec + "]\n" + block;
  }
  return out;
}

namespace {

// A temporary scenario file, removed with the object.
class TempScenario {
 public:
  explicit TempScenario(const std::string& text) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("paralab-import-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".toml");
    std::ofstream(path_) << text;
  }
  ~TempScenario() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempScenario(const TempScenario&) = delete;
  TempScenario& operator=(const TempScenario&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

void check_draft(const ScenarioDraft& draft) {
  const TempScenario file(draft.toml());
  try {
    (void)load_scenario(file.path());
  } catch (const ConfigError& e) {
    if (const SourceItem* item = draft.origin_item(e.key()))
      throw ConfigError(located(item->loc), item->name, item->value(), e.problem() + " (as paralab's " + e.key() + ")",
                        e.allowed());
    const DraftValue* v = draft.find(e.key());
    throw ConfigError(SourceLoc{draft.source, 0, 0}, e.key(), e.value(),
                      "the converted scenario " + std::string(v ? "(" + v->origin + ")" : "") + ": " + e.problem(),
                      e.allowed());
  }
}

void finish_draft(ScenarioDraft& draft, const ImportOptions& opts) {
  for (const std::string& s : opts.sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || s.find('.') > eq)
      throw ConfigError(SourceLoc{"--set", 0, 0}, s, "", "expected section.key=value", "--set section.key=value");
    draft.set(s.substr(0, eq), toml_value(s.substr(eq + 1)), "--set " + s + " (paralab import)");
  }
  draft.skip_unused_facts();
  check_draft(draft);
}

}  // namespace paralab::interop
