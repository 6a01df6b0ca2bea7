// paralab — the self-contained HTML report (report.hpp).
#include "analysis/validate/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

namespace paralab {

std::string report_family(const OpMeta& m) {
  const std::string& k = m.kind;
  if (k == "gemm") return "gemm";
  if (k == "attention_fwd" || k == "attention_bwd") return "attention";
  if (k.rfind("layernorm", 0) == 0 || k.rfind("rmsnorm", 0) == 0) return "norm";
  if (k.rfind("embedding", 0) == 0 || k.rfind("xent", 0) == 0) return "embedding & loss";
  if (k == "optimizer_step" || k == "grad_norm" || k == "overflow_check" || k == "scaler_update") return "optimizer";
  if (k == "collective") return "collective " + m.group;
  if (k == "send" || k == "recv" || k == "sendrecv") return "p2p " + m.group;
  return "elementwise";
}

std::string report_pass(const OpMeta& m, bool split_backward) {
  if (!m.stream.empty() && m.stream != "compute") return "communication";
  if (m.phase == "fwd") return "F forward";
  if (m.phase == "bwd") return split_backward ? "B input gradient" : "B+W backward";
  if (m.phase == "wgrad") return "W weight gradient";
  if (m.phase == "recompute") return "R recompute";
  return "optimizer";
}

namespace {

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// JSON safe inside <script>: no "</" sequence.
std::string script_json(const nlohmann::json& j) {
  std::string s = j.dump();
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      o += "<\\/";
      ++i;
      continue;
    }
    o += s[i];
  }
  return o;
}

struct Interner {
  std::map<std::string, int> index;
  nlohmann::json list = nlohmann::json::array();
  int operator()(const std::string& s) {
    auto it = index.find(s);
    if (it != index.end()) return it->second;
    const int i = static_cast<int>(list.size());
    index[s] = i;
    list.push_back(s);
    return i;
  }
};

nlohmann::json timeline_json(const LoadedResult& r, Interner& fam, Interner& passes, Interner& names) {
  // Lanes: rank-major, then the stream order of docs/results.md.
  auto stream_order = [](const std::string& s) {
    for (int i = 0; i < kStreams; ++i)
      if (s == to_string(static_cast<Stream>(i))) return i;
    return kStreams;
  };
  std::map<std::pair<int64_t, std::pair<int, std::string>>, int> lanes;
  for (size_t i = 0; i < r.result.ops.size(); ++i) {
    const std::string& st = i < r.meta.size() ? r.meta[i].stream : std::string("compute");
    lanes[{r.result.ops[i].rank, {stream_order(st), st}}] = 0;
  }
  nlohmann::json lane_list = nlohmann::json::array();
  int li = 0;
  for (auto& [key, idx] : lanes) {
    idx = li++;
    lane_list.push_back("rank " + std::to_string(key.first) + " " + key.second.second);
  }
  const bool split = std::any_of(r.meta.begin(), r.meta.end(), [](const OpMeta& m) { return m.phase == "wgrad"; });
  double t0 = 1e300, t1 = 0;
  nlohmann::json ops = nlohmann::json::array();
  for (size_t i = 0; i < r.result.ops.size(); ++i) {
    const OpTiming& t = r.result.ops[i];
    const OpMeta m = i < r.meta.size() ? r.meta[i] : OpMeta{};
    const int lane = lanes[{t.rank, {stream_order(m.stream.empty() ? "compute" : m.stream), m.stream.empty() ? "compute" : m.stream}}];
    t0 = std::min(t0, t.start_us);
    t1 = std::max(t1, t.end_us);
    nlohmann::json o = {lane, std::round(t.start_us * 100) / 100, std::round((t.end_us - t.start_us) * 100) / 100,
                        fam(report_family(m)), names(m.name.empty() ? "op " + std::to_string(t.op) : m.name),
                        passes(report_pass(m, split))};
    ops.push_back(std::move(o));  // [lane, start, duration, family, name, pass]
  }
  if (r.result.ops.empty()) t0 = t1 = 0;
  return {{"lanes", lane_list}, {"ops", ops}, {"t0", t0}, {"t1", t1}, {"step_s", r.result.step_time_s}};
}

const char* kStyle = R"CSS(
:root { --fg:#1d2330; --muted:#5b6474; --line:#d9dee7; --bg:#ffffff; --card:#f5f7fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); margin: 0; padding: 20px 28px 40px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; }
.notes { color: var(--muted); font-size: 12.5px; margin: 0; padding: 0; list-style: none; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 16px; }
.card { background: var(--card); border-radius: 8px; padding: 10px 16px; min-width: 150px; }
.card .v { font-size: 22px; font-weight: 600; }
.card .l { color: var(--muted); font-size: 12px; }
.good { color: #2a7a3b; } .warn { color: #a86200; } .bad { color: #b3261e; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
@media (max-width: 1000px) { .pair { grid-template-columns: 1fr; } }
.chart { width: 100%; min-height: 60px; overflow-x: auto; }
.chart svg { display: block; }
.chart text { font-size: 10.5px; fill: var(--muted); }
.legend { display: flex; flex-wrap: wrap; gap: 6px 14px; font-size: 12px; color: var(--muted); margin: 6px 0; }
.legend span::before { content: ""; display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; background: var(--c); vertical-align: -1px; }
table { border-collapse: collapse; font-size: 12.5px; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { color: var(--muted); font-weight: 600; }
.sub { color: var(--muted); font-size: 12px; margin: 2px 0 6px; }
)CSS";

const char* kScript = R"JS(
(function () {
  const D = JSON.parse(document.getElementById('paralab-data').textContent);
  const NS = 'http://www.w3.org/2000/svg';
  const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7',
                   '#9c755f', '#86bcb6', '#d37295', '#8cd17d', '#499894', '#f1ce63', '#a0cbe8', '#ffbe7d'];
  const color = (f) => PALETTE[f % PALETTE.length];
  // The schedule view: each pass its own colour (F blue, B orange, W green as in Qi et al.'s figures).
  const PASS_COLOURS = { 'F forward': '#4e79a7', 'B input gradient': '#f28e2b', 'B+W backward': '#e15759',
                         'W weight gradient': '#59a14f', 'R recompute': '#b07aa1', 'optimizer': '#9c755f',
                         'communication': '#d5d9e0' };
  const passColor = (p) => PASS_COLOURS[D.passes[p]] || '#bab0ac';
  function el(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(us) {
    if (us >= 1e6) return (us / 1e6).toFixed(3) + ' s';
    if (us >= 1e3) return (us / 1e3).toFixed(2) + ' ms';
    return us.toFixed(1) + ' \u00b5s';
  }
  function legend(id, items, colourOf, labels) {
    const host = document.getElementById(id);
    items.forEach((f) => {
      const s = document.createElement('span');
      s.style.setProperty('--c', colourOf(f));
      s.textContent = labels[f];
      host.appendChild(s);
    });
  }

  // Timelines: one time scale for both, a lane per rank and stream.
  const span = Math.max(D.predicted.t1 - D.predicted.t0, D.measured.t1 - D.measured.t0, 1);
  function timeline(id, R, byPass) {
    const host = document.getElementById(id);
    const W = Math.max(360, host.clientWidth || 640);
    const laneH = 13, gap = 3, left = 118, right = 12, top = 20;
    const H = top + R.lanes.length * (laneH + gap) + 6;
    const svg = el('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H }, host);
    const plotW = W - left - right;
    const x = (t) => left + plotW * (t - R.t0) / span;
    const step = Math.pow(10, Math.floor(Math.log10(span / 4)));
    const tick = [1, 2, 5, 10].map((m) => m * step).find((s) => span / s <= 8) || step * 10;
    for (let t = 0; t <= span; t += tick) {
      el('line', { x1: x(R.t0 + t), x2: x(R.t0 + t), y1: top - 4, y2: H, stroke: '#e7eaf0' }, svg);
      el('text', { x: x(R.t0 + t), y: 11, 'text-anchor': 'middle' }, svg).textContent = fmt(t);
    }
    R.lanes.forEach((name, i) => {
      el('text', { x: left - 6, y: top + i * (laneH + gap) + laneH - 2, 'text-anchor': 'end' }, svg).textContent = name;
    });
    let drawn = 0;
    for (const o of R.ops) {
      const y = top + o[0] * (laneH + gap);
      const r = el('rect', { x: x(o[1]), y: y, width: Math.max(0.5, plotW * o[2] / span), height: laneH, fill: byPass ? passColor(o[5]) : color(o[3]) }, svg);
      el('title', {}, r).textContent = D.names[o[4]] + ' \u2014 ' + fmt(o[2]);
      drawn++;
    }
    host.setAttribute('data-drawn', String(drawn));
    host.setAttribute('data-expected', String(R.ops.length));
  }

  // Predicted against measured duration per op, log-log.
  function scatter(id) {
    const host = document.getElementById(id);
    const W = Math.max(360, Math.min(host.clientWidth || 640, 760)), H = 440;
    const m = { l: 64, r: 16, t: 12, b: 44 };
    const pts = D.scatter.filter((p) => p[0] > 0 && p[1] > 0);
    let lo = Infinity, hi = 0;
    for (const p of pts) { lo = Math.min(lo, p[0], p[1]); hi = Math.max(hi, p[0], p[1]); }
    if (!pts.length) { lo = 1; hi = 10; }
    const a = Math.floor(Math.log10(lo)), b = Math.max(a + 1, Math.ceil(Math.log10(hi)));
    const svg = el('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H }, host);
    const sx = (v) => m.l + (W - m.l - m.r) * (Math.log10(v) - a) / (b - a);
    const sy = (v) => H - m.b - (H - m.t - m.b) * (Math.log10(v) - a) / (b - a);
    for (let e = a; e <= b; e++) {
      const v = Math.pow(10, e);
      el('line', { x1: sx(v), x2: sx(v), y1: m.t, y2: H - m.b, stroke: '#e7eaf0' }, svg);
      el('line', { x1: m.l, x2: W - m.r, y1: sy(v), y2: sy(v), stroke: '#e7eaf0' }, svg);
      el('text', { x: sx(v), y: H - m.b + 14, 'text-anchor': 'middle' }, svg).textContent = fmt(v);
      el('text', { x: m.l - 6, y: sy(v) + 3, 'text-anchor': 'end' }, svg).textContent = fmt(v);
    }
    const lo10 = Math.pow(10, a), hi10 = Math.pow(10, b);
    el('line', { x1: sx(lo10), y1: sy(lo10), x2: sx(hi10), y2: sy(hi10), stroke: '#333', 'stroke-width': 1 }, svg);
    for (const f of [1.1, 1 / 1.1])
      el('line', { x1: sx(lo10), y1: sy(lo10 * f), x2: sx(hi10), y2: sy(hi10 * f), stroke: '#999', 'stroke-dasharray': '4 3' }, svg);
    el('text', { x: (m.l + W - m.r) / 2, y: H - 8, 'text-anchor': 'middle' }, svg).textContent = 'measured duration';
    const yl = el('text', { x: 14, y: (m.t + H - m.b) / 2, 'text-anchor': 'middle',
                            transform: 'rotate(-90 14 ' + ((m.t + H - m.b) / 2) + ')' }, svg);
    yl.textContent = 'predicted duration';
    let drawn = 0;
    for (const p of pts) {
      const c = el('circle', { cx: sx(p[1]), cy: sy(p[0]), r: 2.6, fill: color(p[2]), 'fill-opacity': 0.65 }, svg);
      el('title', {}, c).textContent = D.names[p[3]] + ' (rank ' + p[4] + '): predicted ' + fmt(p[0]) + ', measured ' + fmt(p[1]);
      drawn++;
    }
    host.setAttribute('data-drawn', String(drawn));
    host.setAttribute('data-expected', String(pts.length));
  }

  const used = new Set();
  for (const R of [D.predicted, D.measured]) for (const o of R.ops) used.add(o[3]);
  for (const p of D.scatter) used.add(p[2]);
  legend('legend-timelines', [...used].sort((x, y) => x - y), color, D.families);
  timeline('timeline-predicted', D.predicted, false);
  timeline('timeline-measured', D.measured, false);
  const usedPasses = new Set();
  for (const R of [D.predicted, D.measured]) for (const o of R.ops) usedPasses.add(o[5]);
  legend('legend-schedule', [...usedPasses].sort((x, y) => x - y), passColor, D.passes);
  timeline('schedule-predicted', D.predicted, true);
  timeline('schedule-measured', D.measured, true);
  document.getElementById('schedule-predicted').setAttribute('data-passes', [...usedPasses].map((p) => D.passes[p]).join(','));
  scatter('scatter');
  document.documentElement.setAttribute('data-report-ready', '1');
})();
)JS";

}  // namespace

std::string html_report(const LoadedResult& predicted, const LoadedResult& measured, const Comparison& c, const ReportInfo& info) {
  Interner fam, passes, names;
  nlohmann::json data;
  data["predicted"] = timeline_json(predicted, fam, passes, names);
  data["measured"] = timeline_json(measured, fam, passes, names);
  // The scatter: every joined op (measured rank), its family from the measured trace.
  std::map<std::pair<int64_t, OpId>, size_t> meta_at;
  for (size_t i = 0; i < measured.result.ops.size(); ++i) meta_at[{measured.result.ops[i].rank, measured.result.ops[i].op}] = i;
  nlohmann::json pts = nlohmann::json::array();
  for (const OpError& e : c.ops) {
    auto it = meta_at.find({e.rank, e.op});
    const OpMeta m = it != meta_at.end() && it->second < measured.meta.size() ? measured.meta[it->second] : OpMeta{};
    pts.push_back({std::round(e.predicted_us * 100) / 100, std::round(e.measured_us * 100) / 100, fam(report_family(m)),
                   names(e.name), e.rank});
  }
  data["scatter"] = pts;
  data["families"] = fam.list;
  data["passes"] = passes.list;
  data["names"] = names.list;

  auto cls = [](double err_pct, double good, double warn) {
    const double a = std::abs(err_pct);
    return a <= good ? "good" : a <= warn ? "warn" : "bad";
  };
  std::string h;
  char buf[1024];
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>" + html_escape(info.title) + "</title>\n<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  h += "<h1>" + html_escape(info.title) + "</h1>\n<ul class=\"notes\">\n";
  for (const auto& n : info.notes) h += "<li>" + html_escape(n) + "</li>\n";
  h += "</ul>\n<div class=\"cards\">\n";
  std::snprintf(buf, sizeof buf,
                "<div class=\"card\"><div class=\"v\">%.4g s</div><div class=\"l\">predicted step time</div></div>\n"
                "<div class=\"card\"><div class=\"v\">%.4g s</div><div class=\"l\">measured step time</div></div>\n"
                "<div class=\"card\"><div class=\"v %s\" id=\"step-error\">%+.1f%%</div><div class=\"l\">step-time error</div></div>\n"
                "<div class=\"card\"><div class=\"v %s\" id=\"op-mape\">%.1f%%</div><div class=\"l\">per-op MAPE (%lld ops)</div></div>\n"
                "<div class=\"card\"><div class=\"v\">%.1f%% / %.1f%%</div><div class=\"l\">bubble predicted / measured</div></div>\n",
                c.predicted_step_s, c.measured_step_s, cls(c.step_time_error_pct, 10, 25), c.step_time_error_pct,
                cls(c.op_mape_pct, 15, 30), c.op_mape_pct, (long long)c.ops_scored, 100 * c.bubble_predicted, 100 * c.bubble_measured);
  h += buf;
  h += "</div>\n";
  h += "<h2>Timelines</h2>\n<div class=\"sub\">One time scale for both; a lane per rank and stream (the simulator runs one "
       "representative rank per pipeline stage). Hover a bar for the op and its duration.</div>\n";
  h += "<div class=\"legend\" id=\"legend-timelines\"></div>\n<div class=\"pair\">\n";
  std::snprintf(buf, sizeof buf, "<div><b>Predicted</b> <span class=\"sub\">%.4g s</span><div class=\"chart\" id=\"timeline-predicted\"></div></div>\n",
                c.predicted_step_s);
  h += buf;
  std::snprintf(buf, sizeof buf, "<div><b>Measured</b> <span class=\"sub\">%.4g s</span><div class=\"chart\" id=\"timeline-measured\"></div></div>\n",
                c.measured_step_s);
  h += buf;
  h += "</div>\n<h2>Schedule</h2>\n<div class=\"sub\">The same timelines coloured by pass, in Qi et al.'s notation: F "
       "forward, B input gradient, W weight gradient (B+W: a backward not split); communication in grey.</div>\n";
  h += "<div class=\"legend\" id=\"legend-schedule\"></div>\n<div class=\"pair\">\n";
  h += "<div><b>Predicted</b><div class=\"chart\" id=\"schedule-predicted\"></div></div>\n";
  h += "<div><b>Measured</b><div class=\"chart\" id=\"schedule-measured\"></div></div>\n";
  h += "</div>\n<h2>Predicted against measured, per op</h2>\n<div class=\"sub\">Log-log; the solid line is a perfect "
       "prediction, the dashed lines &plusmn;10&nbsp;%. Colours as in the timelines.</div>\n<div class=\"chart\" id=\"scatter\"></div>\n";
  h += "<h2>Error by op class</h2>\n<table>\n<tr><th>op class</th><th>ops</th><th>predicted s</th><th>measured s</th><th>error</th><th>MAPE</th></tr>\n";
  for (const ClassError& e : c.by_class) {
    std::snprintf(buf, sizeof buf, "<tr><td>%s</td><td>%lld</td><td>%.5g</td><td>%.5g</td><td class=\"%s\">%+.1f%%</td><td>%.1f%%</td></tr>\n",
                  html_escape(e.cls).c_str(), (long long)e.ops, e.predicted_s, e.measured_s, cls(e.error_pct(), 10, 25),
                  e.error_pct(), e.mape_pct);
    h += buf;
  }
  h += "</table>\n";
  h += "<script type=\"application/json\" id=\"paralab-data\">" + script_json(data) + "</script>\n";
  h += "<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return h;
}

}  // namespace paralab
