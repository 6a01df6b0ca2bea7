// paralab tests — the HTML report renders in a real browser: headless Chromium loads the page,
// its script draws both timelines (by op family and, for a ZB-H1 run, by pass: F, B, W) and the
// scatter, and the DOM it dumps records how many
// elements each chart drew (data-drawn) against how many it had to draw (data-expected).
// Exit codes for ctest: 0 pass, 1 fail, 77 skipped (no Chromium on this machine; CI installs
// Debian's `chromium`, scripts/setup.sh too). $PARALAB_CHROMIUM names another browser binary.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "analysis/launch.hpp"
#include "report_fixture.hpp"

using namespace paralab;

namespace {

std::string find_browser() {
  if (const char* e = std::getenv("PARALAB_CHROMIUM"); e && *e) return e;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
    const char* path = std::getenv("PATH");
    std::string p = path ? path : "/usr/bin:/bin";
    size_t pos = 0;
    while (pos <= p.size()) {
      const size_t c = p.find(':', pos);
      const std::string dir = p.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
      pos = c == std::string::npos ? p.size() + 1 : c + 1;
      const std::string cand = dir + "/" + name;
      if (!dir.empty() && access(cand.c_str(), X_OK) == 0) return cand;
    }
  }
  return "";
}

// The opening tag of the element with this id in a DOM dump.
std::string tag_of(const std::string& dom, const std::string& id) {
  const size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t open = dom.rfind('<', at), close = dom.find('>', at);
  if (open == std::string::npos || close == std::string::npos) return "";
  return dom.substr(open, close - open + 1);
}

long attr(const std::string& tag, const std::string& name) {
  std::smatch m;
  if (std::regex_search(tag, m, std::regex(name + "=\"([0-9]+)\""))) return std::stol(m[1]);
  return -1;
}

int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

}  // namespace

int main() {
  const std::string browser = find_browser();
  if (browser.empty()) {
    std::printf("SKIP: no chromium in PATH (Debian: apt-get install chromium); the report rendering test needs it\n");
    return 77;
  }
  const test::ReportFixture f("zb-h1");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("paralab-report-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path page = dir / "report.html";
  std::ofstream(page) << f.html();

  const std::vector<std::string> cmd = {browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                        "--disable-dev-shm-usage", "--user-data-dir=" + (dir / "profile").string(),
                                        "--window-size=1400,1000", "--dump-dom", "file://" + page.string()};
  std::string err;
  const calib::ProcessResult r = calib::run_process(cmd, {}, [&](const std::string& line) { err += line + "\n"; }, 180);
  check(r.exit_code == 0 && !r.timed_out, "chromium ran (exit " + std::to_string(r.exit_code) + ")");
  if (r.exit_code != 0) std::printf("chromium said:\n%s\n", err.c_str());
  const std::string& dom = r.out;
  check(tag_of(dom, "timeline-predicted").size() > 0, "the DOM dump has the charts");
  std::smatch m;
  check(std::regex_search(dom, m, std::regex("<html[^>]*data-report-ready=\"1\"")), "the page's script finished (data-report-ready)");

  long scatter_expected = 0;
  for (const OpError& e : f.comparison.ops) scatter_expected += e.predicted_us > 0 && e.measured_us > 0;
  const struct {
    const char* id;
    long expected;
  } charts[] = {{"timeline-predicted", static_cast<long>(f.predicted.result.ops.size())},
                {"timeline-measured", static_cast<long>(f.measured.result.ops.size())},
                {"schedule-predicted", static_cast<long>(f.predicted.result.ops.size())},
                {"schedule-measured", static_cast<long>(f.measured.result.ops.size())},
                {"scatter", scatter_expected}};
  for (const auto& c : charts) {
    const std::string tag = tag_of(dom, c.id);
    const long drawn = attr(tag, "data-drawn"), expected = attr(tag, "data-expected");
    check(expected == c.expected && c.expected > 0,
          std::string(c.id) + ": expected " + std::to_string(expected) + " elements (the data has " + std::to_string(c.expected) + ")");
    check(drawn == expected, std::string(c.id) + ": drew " + std::to_string(drawn) + " of " + std::to_string(expected));
  }
  // The schedule view names F, B and W apart (a split backward has no fused B+W).
  const std::string passes = [&] {
    std::smatch pm;
    const std::string tag = tag_of(dom, "schedule-predicted");
    return std::regex_search(tag, pm, std::regex("data-passes=\"([^\"]*)\"")) ? pm[1].str() : std::string();
  }();
  check(passes.find("F forward") != std::string::npos && passes.find("B input gradient") != std::string::npos &&
            passes.find("W weight gradient") != std::string::npos && passes.find("B+W") == std::string::npos,
        "the schedule view's passes: " + passes);
  // The drawn SVG elements are really in the DOM.
  size_t rects = 0, circles = 0;
  for (size_t at = dom.find("<rect"); at != std::string::npos; at = dom.find("<rect", at + 1)) ++rects;
  for (size_t at = dom.find("<circle"); at != std::string::npos; at = dom.find("<circle", at + 1)) ++circles;
  check(rects >= 2 * (f.predicted.result.ops.size() + f.measured.result.ops.size()), "timeline bars in the DOM: " + std::to_string(rects));
  check(static_cast<long>(circles) == scatter_expected, "scatter points in the DOM: " + std::to_string(circles));

  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return failures == 0 ? 0 : 1;
}
