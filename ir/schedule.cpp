// paralab — the schedule registry: adding a schedule is a new file and one row here.
#include "ir/schedule.hpp"

#include "ir/error.hpp"

namespace paralab {

namespace {
struct Entry {
  Schedule schedule;
  ScheduleFn fn;
};
constexpr Entry kSchedules[] = {
    {Schedule::gpipe, &schedule_gpipe},
    {Schedule::one_f_one_b, &schedule_1f1b},
    {Schedule::interleaved, &schedule_interleaved},
};
}  // namespace

ScheduleFn schedule_for(Schedule s) {
  for (const auto& e : kSchedules)
    if (e.schedule == s) return e.fn;
  throw InternalError("no pipeline schedule registered for this Schedule value");
}

}  // namespace paralab
