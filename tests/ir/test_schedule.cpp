// paralab tests — pipeline schedules: every (micro-batch, chunk) runs forward then backward
// exactly once, in the order and with the in-flight bound each schedule promises.
#include <catch2/catch.hpp>

#include <map>

#include "ir/schedule.hpp"

using namespace paralab;

namespace {

// Checks completeness and returns the maximum number of micro-batch chunks in flight.
int64_t check_and_inflight(const std::vector<PipelineTask>& tasks, int64_t m, int64_t v) {
  std::map<std::pair<int, int>, int> state;  // 0 none, 1 forward done, 2 backward done
  int64_t inflight = 0, max_inflight = 0;
  for (const auto& t : tasks) {
    auto& s = state[{t.microbatch, t.chunk}];
    if (t.forward()) {
      REQUIRE(s == 0);
      s = 1;
      max_inflight = std::max(max_inflight, ++inflight);
    } else {
      REQUIRE(s == 1);
      s = 2;
      --inflight;
    }
  }
  REQUIRE(static_cast<int64_t>(state.size()) == m * v);
  for (const auto& [k, s] : state) REQUIRE(s == 2);
  return max_inflight;
}

}  // namespace

TEST_CASE("GPipe runs every forward before any backward", "[ir][schedule]") {
  const auto tasks = schedule_gpipe({4, 1, 8, 1});
  CHECK(check_and_inflight(tasks, 8, 1) == 8);
  for (size_t i = 0; i < 8; ++i) CHECK(tasks[i].forward());
}

TEST_CASE("1F1B keeps p - s micro-batches in flight on stage s", "[ir][schedule]") {
  // Narayanan et al. 2021, Sec. 2.2.1 (PipeDream-Flush).
  const int64_t p = 4, m = 8;
  for (int64_t s = 0; s < p; ++s) {
    const auto tasks = schedule_1f1b({p, s, m, 1});
    CHECK(check_and_inflight(tasks, m, 1) == p - s);
    // Micro-batches go forward and backward in order.
    int32_t f = 0, b = 0;
    for (const auto& t : tasks) CHECK(t.microbatch == (t.forward() ? f++ : b++));
  }
  // Fewer micro-batches than stages: everything warms up.
  CHECK(check_and_inflight(schedule_1f1b({8, 0, 3, 1}), 3, 1) == 3);
}

TEST_CASE("interleaved 1F1B follows Megatron's chunk order", "[ir][schedule]") {
  const int64_t p = 4, m = 8, v = 2;
  for (int64_t s = 0; s < p; ++s) {
    const auto tasks = schedule_interleaved({p, s, m, v});
    const int64_t inflight = check_and_inflight(tasks, m, v);
    CHECK(inflight <= (p - s - 1) * 2 + (v - 1) * p + 1);
    // The first p forwards run chunk 0 on micro-batches 0..p-1, then chunk 1 on the same.
    for (int64_t k = 0; k < p; ++k) {
      CHECK(tasks[static_cast<size_t>(k)].chunk == 0);
      CHECK(tasks[static_cast<size_t>(k)].microbatch == k);
    }
  }
  // The last stage's first backward is chunk v-1 of micro-batch 0.
  const auto last = schedule_interleaved({p, p - 1, m, v});
  for (const auto& t : last)
    if (!t.forward()) {
      CHECK(t.chunk == v - 1);
      CHECK(t.microbatch == 0);
      break;
    }
}

TEST_CASE("the schedule registry knows every schedule", "[ir][schedule]") {
  CHECK(schedule_for(Schedule::gpipe) == &schedule_gpipe);
  CHECK(schedule_for(Schedule::one_f_one_b) == &schedule_1f1b);
  CHECK(schedule_for(Schedule::interleaved) == &schedule_interleaved);
}

namespace {
// Every (micro-batch) runs F, then B, then W, exactly once each.
void check_split(const std::vector<PipelineTask>& tasks, int64_t m) {
  std::map<int, int> state;  // 1 F done, 2 B done, 3 W done
  for (const auto& t : tasks) {
    int& s = state[t.microbatch];
    const int want = t.kind == TaskKind::forward ? 0 : t.kind == TaskKind::input_grad ? 1 : 2;
    REQUIRE(t.kind != TaskKind::backward);
    REQUIRE(s == want);
    s = want + 1;
  }
  REQUIRE(static_cast<int64_t>(state.size()) == m);
  for (const auto& [mb, s] : state) REQUIRE(s == 3);
}
}  // namespace

TEST_CASE("ZB-H1 keeps 1F1B's peak of p micro-batches; ZB-H2 holds 2p - 1", "[ir][schedule]") {
  // Qi et al. 2024, Sec. 3.1: ZB-H1 matches 1F1B's peak memory, ZB-H2 trades memory for bubble.
  const int64_t p = 4, m = 12;
  for (int64_t s = 0; s < p; ++s) {
    const auto h1 = schedule_zb_h1({p, s, m, 1});
    const auto h2 = schedule_zb_h2({p, s, m, 1});
    check_split(h1, m);
    check_split(h2, m);
    CHECK(peak_in_flight(h1) <= p);
    // Qi et al.'s (2p - 1) M_B: a stage runs its oldest W before forwarding a 2p-th micro-batch.
    CHECK(peak_in_flight(h2) == 2 * p - 1);
  }
  CHECK(peak_in_flight(schedule_zb_h1({p, 0, m, 1})) == p);
  CHECK(peak_in_flight(schedule_1f1b({p, 0, m, 1})) == p);
  // Fewer micro-batches than the warm-up: everything still runs once.
  check_split(schedule_zb_h2({8, 0, 3, 1}), 3);
  CHECK(schedule_info(Schedule::zb_h1).splits_backward);
  CHECK_FALSE(schedule_info(Schedule::one_f_one_b).splits_backward);
}

// Megatron-LM's schedule table (schedules.py, its own example): PP 2, N = 3 micro-batches per
// group, M = 5, VP 2 runs forwards on (micro-batch, chunk) 0 1 2 0 1 2 3 4 3 4 / 0 0 0 1 1 1 0 0 1 1.
TEST_CASE("interleaving with micro-batch groups follows Megatron's schedule table", "[ir][schedule]") {
  ScheduleParams p{2, 0, 5, 2, 3};
  const auto tasks = schedule_interleaved(p);
  check_and_inflight(tasks, 5, 2);
  std::vector<int> mb, chunk;
  for (const auto& t : tasks)
    if (t.forward()) mb.push_back(t.microbatch), chunk.push_back(t.chunk);
  CHECK(mb == std::vector<int>{0, 1, 2, 0, 1, 2, 3, 4, 3, 4});
  CHECK(chunk == std::vector<int>{0, 0, 0, 1, 1, 1, 0, 0, 1, 1});
  // Backwards take the same entries with the chunk reversed: the first is micro-batch 0, chunk 1.
  const auto first_b = std::find_if(tasks.begin(), tasks.end(), [](const PipelineTask& t) { return !t.forward(); });
  CHECK(*first_b == PipelineTask{TaskKind::backward, 0, 1});
  // Warm-up: (p - s - 1) * 2 + (v - 1) * N forwards = 2 + 3 on stage 0, 0 + 3 on stage 1.
  CHECK(first_b - tasks.begin() == 6);  // five warm-up forwards, then one steady forward
  p.stage = 1;
  const auto last = schedule_interleaved(p);
  CHECK(std::find_if(last.begin(), last.end(), [](const PipelineTask& t) { return !t.forward(); }) - last.begin() == 4);
  // The default group (the pipeline size) is the classic order, micro-batch rounds of p.
  for (int64_t s = 0; s < 4; ++s) CHECK(schedule_interleaved({4, s, 8, 2}) == schedule_interleaved({4, s, 8, 2, 4}));
}

TEST_CASE("Megatron's rules on micro-batch groups are the interleaved schedule's", "[ir][schedule]") {
  const auto rule = schedule_info(Schedule::interleaved).rule;
  CHECK(rule({4, 0, 8, 2}).key.empty());
  CHECK(rule({4, 0, 6, 2, 6}).key.empty());  // one group of all six
  CHECK(rule({4, 0, 9, 2, 5}).key.empty());  // groups of 5 and 4
  ScheduleProblem e = rule({4, 0, 6, 2});    // default group 4 leaves 2 < 4
  CHECK(e.key == "parallel.microbatch_group_size_per_vp_stage");
  CHECK(e.problem.find("dependency bubbles") != std::string::npos);
  CHECK(e.allowed.find("N = M = 6") != std::string::npos);
  e = rule({4, 0, 8, 2, 3});  // below the pipeline
  CHECK(e.problem.find("should range in [PP=4, M=8]") != std::string::npos);
  e = rule({4, 0, 3, 2});  // fewer micro-batches than stages
  CHECK(e.key == "training.global_batch_size");
}
