// paralab — when the ranks of an executed step computed (analysis/compute_activity.hpp): a rank's
// intervals merge, a stage counts with all its ranks on the node once any computes, the asking
// rank's stage always counts, other nodes never; misuse is an InternalError.
#include <catch2/catch.hpp>

#include "analysis/compute_activity.hpp"
#include "ir/error.hpp"
#include "ir/layout.hpp"

using namespace paralab;
using namespace paralab::calib;

TEST_CASE("compute activity: busy ranks count each computing stage's ranks on the node", "[analysis][calibrate]") {
  const Layout pp4(1, 1, 1, 4, 4);  // one rank per stage, one node
  ComputeActivity a(pp4);
  a.add(0, 0, 100);
  a.add(0, 100, 150);  // the gap after the op: merges with it
  a.add(1, 50, 60);
  a.add(2, 200, 300);
  a.add(3, 10, 10);  // empty: ignored
  a.finish();
  CHECK(a.busy_ranks(0, 0) == 1);
  CHECK(a.busy_ranks(0, 55) == 2);
  CHECK(a.busy_ranks(0, 120) == 1);   // rank 1 ended at 60
  CHECK(a.busy_ranks(0, 150) == 1);   // an interval is open at its end; rank 0 counts itself
  CHECK(a.busy_ranks(3, 55) == 3);    // rank 3 counts itself beside ranks 0 and 1
  CHECK(a.busy_ranks(3, 250) == 2);
  CHECK(a.busy_ranks(1, 1000) == 1);  // nobody else

  const Layout tp2pp2(2, 1, 1, 2, 4);  // ranks 0, 1 stage 0; 2, 3 stage 1
  ComputeActivity b(tp2pp2);
  b.add(3, 0, 100);
  b.finish();
  CHECK(b.busy_ranks(0, 50) == 4);   // stage 1 computes through rank 3: both its ranks count
  CHECK(b.busy_ranks(2, 50) == 2);   // rank 2's own stage
  CHECK(b.busy_ranks(0, 150) == 2);

  const Layout two_nodes(1, 1, 1, 4, 2);  // stages 0, 1 on node 0; 2, 3 on node 1
  ComputeActivity c(two_nodes);
  c.add(2, 0, 100);
  c.add(1, 0, 100);
  c.finish();
  CHECK(c.busy_ranks(0, 50) == 2);  // rank 1 on its node; rank 2 is on the other
  CHECK(c.busy_ranks(3, 50) == 2);

  ComputeActivity d(pp4);
  CHECK_THROWS_AS(d.busy_ranks(0, 0), InternalError);  // before finish()
  CHECK_THROWS_AS(d.add(4, 0, 1), InternalError);      // no such rank
  d.finish();
  CHECK_THROWS_AS(d.add(0, 0, 1), InternalError);  // after finish()
}
