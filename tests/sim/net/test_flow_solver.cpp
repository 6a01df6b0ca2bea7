// paralab — tests of the max-min fair flow solver (sim/net/flow_solver).
// Reference: Bertsekas & Gallager, Data Networks (2nd ed.), Sec. 6.5.2, max-min fairness and
// the progressive filling algorithm.
#include <catch2/catch.hpp>
#include <limits>

#include "sim/net/flow_solver.hpp"

using namespace paralab::sim;

namespace {

std::vector<FinishedFlow> run_all(FlowSolver& s, std::vector<double>* times = nullptr) {
  std::vector<FinishedFlow> out;
  for (;;) {
    const double t = s.next_completion_us();
    if (t == std::numeric_limits<double>::infinity()) break;
    const size_t before = out.size();
    s.advance(t, out);
    if (times)
      for (size_t i = before; i < out.size(); ++i) times->push_back(s.now_us());
  }
  return out;
}

}  // namespace

TEST_CASE("net solver: two flows on one link each get half", "[net]") {
  FlowSolver s({1000.0});  // 1 GB/s = 1000 bytes/us
  const LinkLoad l0[] = {{0, 1.0}};
  const uint32_t a = s.add(l0, 1e6, 1);
  const uint32_t b = s.add(l0, 1e6, 2);
  CHECK(s.rate_Bpus(a) == Approx(500.0));
  CHECK(s.rate_Bpus(b) == Approx(500.0));
  // Both finish together at 2 * 1e6 / 1000 us.
  CHECK(s.next_completion_us() == Approx(2000.0));
}

TEST_CASE("net solver: flows on disjoint links do not slow each other", "[net]") {
  FlowSolver s({1000.0, 1000.0, 250.0});
  const LinkLoad p0[] = {{0, 1.0}, {2, 1.0}};
  const LinkLoad p1[] = {{1, 1.0}};
  const uint32_t a = s.add(p0, 1e3, 1);
  const uint32_t b = s.add(p1, 1e3, 2);
  CHECK(s.rate_Bpus(a) == Approx(250.0));  // held by its own slow link only
  CHECK(s.rate_Bpus(b) == Approx(1000.0));
}

TEST_CASE("net solver: three flows on two links get the textbook max-min rates", "[net]") {
  // Links A (capacity 1) and B (capacity 2); flow 0 crosses A and B, flow 1 only A, flow 2
  // only B. Progressive filling: A fills first at level 1/2 (flows 0 and 1 frozen at 1/2),
  // then flow 2 takes the rest of B: 2 - 1/2 = 3/2.
  FlowSolver s({1.0, 2.0});
  const LinkLoad f0[] = {{0, 1.0}, {1, 1.0}};
  const LinkLoad f1[] = {{0, 1.0}};
  const LinkLoad f2[] = {{1, 1.0}};
  const uint32_t a = s.add(f0, 100, 0);
  const uint32_t b = s.add(f1, 100, 1);
  const uint32_t c = s.add(f2, 100, 2);
  CHECK(s.rate_Bpus(a) == Approx(0.5));
  CHECK(s.rate_Bpus(b) == Approx(0.5));
  CHECK(s.rate_Bpus(c) == Approx(1.5));
}

TEST_CASE("net solver: a flow finishing early releases bandwidth to the others", "[net]") {
  // One link of 1000 B/us; A = 1000 B and B = 3000 B start together at 500 B/us each.
  // A ends at t = 2 us; B has 2000 B left, now at 1000 B/us: ends at t = 4 us.
  FlowSolver s({1000.0});
  const LinkLoad l0[] = {{0, 1.0}};
  s.add(l0, 1000, 10);
  s.add(l0, 3000, 11);
  std::vector<double> times;
  const auto out = run_all(s, &times);
  REQUIRE(out.size() == 2);
  CHECK(out[0].tag == 10);
  CHECK(times[0] == Approx(2.0).epsilon(1e-12));
  CHECK(out[1].tag == 11);
  CHECK(times[1] == Approx(4.0).epsilon(1e-12));
}

TEST_CASE("net solver: a flow starting later takes its share from then on", "[net]") {
  // A = 3000 B alone at 1000 B/us from t = 0; B = 500 B joins at t = 1 (A has 2000 left).
  // Shared at 500 each: B ends at t = 2 (A has 1500 left), A alone again ends at t = 3.5.
  FlowSolver s({1000.0});
  const LinkLoad l0[] = {{0, 1.0}};
  s.add(l0, 3000, 1);
  std::vector<FinishedFlow> out;
  s.advance(1.0, out);
  CHECK(out.empty());
  s.add(l0, 500, 2);
  std::vector<double> times;
  out = run_all(s, &times);
  REQUIRE(out.size() == 2);
  CHECK(out[0].tag == 2);
  CHECK(times[0] == Approx(2.0).epsilon(1e-12));
  CHECK(times[1] == Approx(3.5).epsilon(1e-12));
}

TEST_CASE("net solver: link weights count symmetric copies", "[net]") {
  // A flow standing for 3 copies on a link (weight 3) next to a single flow (weight 1):
  // both rise together until 3r + r = 1200, so r = 300 each.
  FlowSolver s({1200.0});
  const LinkLoad heavy[] = {{0, 3.0}};
  const LinkLoad light[] = {{0, 1.0}};
  const uint32_t a = s.add(heavy, 1e6, 0);
  const uint32_t b = s.add(light, 1e6, 1);
  CHECK(s.rate_Bpus(a) == Approx(300.0));
  CHECK(s.rate_Bpus(b) == Approx(300.0));
}

TEST_CASE("net solver: only the touched component is re-solved", "[net]") {
  FlowSolver s({1000.0, 1000.0});
  const LinkLoad l0[] = {{0, 1.0}};
  const LinkLoad l1[] = {{1, 1.0}};
  s.add(l0, 1e6, 0);
  s.add(l1, 1e6, 1);
  s.next_completion_us();
  const auto before = s.stats();
  s.add(l1, 1e6, 2);
  s.next_completion_us();
  const auto after = s.stats();
  CHECK(after.resolves == before.resolves + 1);
  CHECK(after.flow_visits == before.flow_visits + 2);  // flows 1 and 2, not 0
}

TEST_CASE("net solver: empty flows finish at once and ties finish in start order", "[net]") {
  FlowSolver s({1000.0});
  const LinkLoad l0[] = {{0, 1.0}};
  s.add({}, 1000, 7);  // no links (same device)
  s.add(l0, 0, 8);     // no bytes
  s.add(l0, 1000, 9);
  s.add(l0, 1000, 10);
  std::vector<double> times;
  const auto out = run_all(s, &times);
  REQUIRE(out.size() == 4);
  CHECK(out[0].tag == 7);
  CHECK(out[1].tag == 8);
  CHECK(times[1] == 0.0);
  CHECK(out[2].tag == 9);
  CHECK(out[3].tag == 10);
  CHECK(times[2] == times[3]);
}

TEST_CASE("net solver: a flow over a zero-capacity link is rejected", "[net]") {
  FlowSolver s({1000.0, 0.0});
  const LinkLoad ok[] = {{0, 1.0}};
  const LinkLoad dead[] = {{0, 1.0}, {1, 1.0}};
  CHECK_NOTHROW(s.add(ok, 10, 0));
  CHECK_THROWS(s.add(dead, 10, 1));
  CHECK(s.active_flows() == 1);  // the rejected flow left no trace
}
