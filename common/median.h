// The median of a few values, as the flight recorder's telemetry and triggers take it (pod
// seconds, trigger windows, the recorder's guard): the middle value, or the mean of the two
// middle ones; 0 for none.
#ifndef PODPROF_COMMON_MEDIAN_H_
#define PODPROF_COMMON_MEDIAN_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace podprof {

// Takes `v` by value: it is partly reordered (nth_element, linear time).
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  const double upper = v[static_cast<size_t>(mid)];
  if (v.size() % 2 == 1) return upper;
  return (*std::max_element(v.begin(), v.begin() + mid) + upper) / 2;
}

}  // namespace podprof

#endif  // PODPROF_COMMON_MEDIAN_H_
