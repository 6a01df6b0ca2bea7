// paralab tests — how paralab launches its own jobs (analysis/launch.hpp): the command line a
// user is shown, and the progress lines a worker passes to its parent.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "analysis/launch.hpp"

using namespace paralab::calib;

TEST_CASE("the launch line separates the launcher's description and each argument by one space", "[analysis][launch]") {
  const std::vector<std::string> args = {"/opt/paralab", "execute", "s.toml", "--steps", "1"};
  // One rank: no launcher, only the note (validate printed "(one rank, no launcher)/opt/...").
  const Launcher one = make_launcher(1);
  CHECK(one.prefix.empty());
  CHECK(one.command_line(args) == "(one rank, no launcher) /opt/paralab execute s.toml --steps 1");
  Launcher mpi;
  mpi.prefix = {"/usr/bin/mpirun", "-np", "4", "--oversubscribe"};
  mpi.env = {"OMPI_ALLOW_RUN_AS_ROOT=1"};
  mpi.description = "OMPI_ALLOW_RUN_AS_ROOT=1 /usr/bin/mpirun -np 4 --oversubscribe";
  CHECK(mpi.command_line(args) ==
        "OMPI_ALLOW_RUN_AS_ROOT=1 /usr/bin/mpirun -np 4 --oversubscribe /opt/paralab execute s.toml --steps 1");
  CHECK(Launcher{}.command_line(args) == "/opt/paralab execute s.toml --steps 1");
  CHECK(mpi.command_line({}) == mpi.description);
}

TEST_CASE("a worker's progress line reads back as written, and other lines are not progress", "[analysis][launch]") {
  double f = -1;
  std::string what;
  REQUIRE(parse_progress_line(progress_line(0.375, "gemm 512x512x512 fp32"), f, what));
  CHECK(f == Approx(0.375).margin(1e-3));
  CHECK(what == "gemm 512x512x512 fp32");
  // mpirun may prefix a rank's stderr lines.
  REQUIRE(parse_progress_line("[1,0]<stderr>:" + progress_line(1.0, "done"), f, what));
  CHECK(f == 1.0);
  CHECK(what == "done");
  CHECK_FALSE(parse_progress_line("rank 0: measuring", f, what));
  CHECK_FALSE(parse_progress_line("", f, what));
}
