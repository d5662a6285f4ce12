// A mean over counted observations gathered in parts (distribution deltas, samples), that
// tells "none reported" (-1) from "reported, none observed" (0): what telemetry's collective
// times need in the agent (over size classes) and in the aggregator (over samples).
#ifndef PODPROF_COMMON_COUNTED_MEAN_H_
#define PODPROF_COMMON_COUNTED_MEAN_H_

#include <cstdint>

namespace podprof {

struct CountedMean {
  int64_t count = 0;
  double sum = 0;
  bool reported = false;

  // A part of `count` observations summing to `sum`.
  void Add(int64_t n, double part_sum) {
    reported = true;
    count += n;
    sum += part_sum;
  }
  // -1 when no part was added, 0 when the parts held no observation.
  double Mean() const {
    if (!reported) return -1;
    return count > 0 ? sum / static_cast<double>(count) : 0;
  }
};

}  // namespace podprof

#endif  // PODPROF_COMMON_COUNTED_MEAN_H_
