// paralab tests — the HTML report's content, without a browser (report_render.cpp draws it in
// headless Chromium).
#include <catch2/catch.hpp>

#include "analysis/validate/compare.hpp"
#include "analysis/validate/report.hpp"
#include "ir/step_ir.hpp"
#include "results/result_io.hpp"
#include "../ir/test_util.hpp"
#include "report_fixture.hpp"

using namespace paralab;

TEST_CASE("the report is one self-contained page with both charts' data", "[analysis][report]") {
  const test::ReportFixture f;
  const std::string html = f.html();
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  // Nothing downloaded: no external scripts, styles, images or fonts.
  CHECK(html.find("src=\"http") == std::string::npos);
  CHECK(html.find("href=\"http") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
  CHECK(html.find("url(") == std::string::npos);
  for (const char* id : {"timeline-predicted", "timeline-measured", "scatter", "paralab-data", "step-error", "op-mape"})
    CHECK(html.find(std::string("id=\"") + id + "\"") != std::string::npos);
  // The data never closes its <script> early.
  const size_t data = html.find("id=\"paralab-data\">");
  REQUIRE(data != std::string::npos);
  const size_t end = html.find("</script>", data);
  CHECK(html.substr(data, end - data).find("</") == std::string::npos);
  // Every op class of the comparison has a row.
  for (const ClassError& e : f.comparison.by_class) CHECK(html.find("<td>" + e.cls + "</td>") != std::string::npos);
}

TEST_CASE("op families group kinds for the charts", "[analysis][report]") {
  OpMeta m;
  m.kind = "gemm";
  CHECK(report_family(m) == "gemm");
  m.kind = "layernorm_bwd";
  CHECK(report_family(m) == "norm");
  m.kind = "collective";
  m.group = "tp";
  CHECK(report_family(m) == "collective tp");
  m.kind = "recv";
  m.group = "pp";
  CHECK(report_family(m) == "p2p pp");
  m.kind = "optimizer_step";
  CHECK(report_family(m) == "optimizer");
}

TEST_CASE("the schedule view names F, B and W, and B+W when the backward is not split", "[analysis][report]") {
  OpMeta m;
  m.kind = "gemm";
  m.stream = "compute";
  m.phase = "fwd";
  CHECK(report_pass(m, true) == "F forward");
  m.phase = "bwd";
  CHECK(report_pass(m, true) == "B input gradient");
  CHECK(report_pass(m, false) == "B+W backward");
  m.phase = "wgrad";
  CHECK(report_pass(m, true) == "W weight gradient");
  m.phase = "optimizer";
  CHECK(report_pass(m, true) == "optimizer");
  m.kind = "send";
  m.stream = "pp_send";
  m.phase = "fwd";
  CHECK(report_pass(m, true) == "communication");
  // A ZB-H1 report carries the three passes; a 1F1B one the fused backward.
  const std::string zb = test::ReportFixture("zb-h1").html(), one = test::ReportFixture("1f1b").html();
  CHECK(zb.find("\"W weight gradient\"") != std::string::npos);
  CHECK(zb.find("\"B+W backward\"") == std::string::npos);
  CHECK(one.find("\"B+W backward\"") != std::string::npos);
  CHECK(one.find("\"W weight gradient\"") == std::string::npos);
}
