// paralab — parsing Megatron-LM's pipeline_model_parallel_layout strings (grammar in the header).
#include "ir/pipeline_layout.hpp"

#include <cctype>

namespace paralab {

namespace {

constexpr int64_t kMaxExpanded = int64_t{1} << 20;  // characters after unrolling repeats
constexpr int kMaxDepth = 64;                         // nested groups

class Expander {
 public:
  Expander(const std::string& text, const SourceLoc& at, const std::string& key) : s_(text), at_(at), key_(key) {}

  std::string run() {
    std::string out = sequence();
    if (i_ < s_.size()) fail("unbalanced ')' at position " + std::to_string(i_ + 1));
    return out;
  }

 private:
  // A sequence of items up to ')' or the end; an item is a character or a "(...)" group, each
  // optionally followed by "*n".
  std::string sequence() {
    std::string out;
    while (i_ < s_.size() && s_[i_] != ')') {
      std::string item;
      const char ch = s_[i_];
      if (ch == '(') {
        ++i_;
        if (++depth_ > kMaxDepth) fail("groups nested more than 64 deep");
        item = sequence();
        --depth_;
        if (i_ >= s_.size()) fail("'(' without its ')'");
        ++i_;
        if (i_ >= s_.size() || s_[i_] != '*') fail("a group \"(...)\" must be followed by \"*n\"");
      } else if (ch == ',' || std::isspace(static_cast<unsigned char>(ch))) {
        ++i_;
        continue;
      } else if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L' || ch == '|') {
        item = std::string(1, ch);
        ++i_;
      } else {
        fail(std::string("unknown character '") + ch + "' at position " + std::to_string(i_ + 1));
      }
      if (i_ < s_.size() && s_[i_] == '*') {
        ++i_;
        const size_t start = i_;
        int64_t n = 0;
        while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])) && n < kMaxExpanded)
          n = n * 10 + (s_[i_++] - '0');
        if (i_ == start) fail("'*' without a count at position " + std::to_string(start));
        std::string rep;
        for (int64_t k = 0; k < n && !item.empty(); ++k) {
          rep += item;
          if (static_cast<int64_t>(rep.size()) > kMaxExpanded) fail("expands to more than 2^20 entries");
        }
        item = rep;
      }
      out += item;
      if (static_cast<int64_t>(out.size()) > kMaxExpanded) fail("expands to more than 2^20 entries");
    }
    return out;
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw ConfigError(at_, key_, "\"" + s_ + "\"", why,
                      "stages separated by '|' of E (embedding), t (transformer layer), m (MTP layer), L (loss); "
                      "\"x*n\" and \"(...)*n\" repeat, commas are ignored (Megatron-LM's format)");
  }

  const std::string& s_;
  const SourceLoc& at_;
  const std::string& key_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<VirtualStageLayers> parse_pipeline_layout(const std::string& text, const SourceLoc& at,
                                                      const std::string& key) {
  const std::string flat = Expander(text, at, key).run();
  std::vector<VirtualStageLayers> stages(1);
  char prev = '|';  // the previous entry; '|' at a stage's start
  for (const char ch : flat) {
    VirtualStageLayers& st = stages.back();
    switch (ch) {
      case '|':
        st.loss_last = prev == 'L';
        stages.emplace_back();
        break;
      case 't': ++st.decoder; break;
      case 'm': ++st.mtp; break;
      case 'E':
        ++st.embedding;
        st.embedding_first = prev == '|';
        break;
      case 'L': ++st.loss; break;
      default: break;
    }
    prev = ch;
  }
  stages.back().loss_last = prev == 'L';
  return stages;
}

}  // namespace paralab
