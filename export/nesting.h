// Slices on one timeline must nest: every viewer (Perfetto, Chrome's trace viewer, XProf)
// draws a track as a stack, and one that starts inside another and outlasts it has no place in
// it. Recorded times break this by a hair (clock mapping and rounding leave a scope 1 ps past
// its neighbour, or 1 ns past its kernel), so every writer puts its spans through one rule.
#ifndef PODPROF_EXPORT_NESTING_H_
#define PODPROF_EXPORT_NESTING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace podprof::exporter {

// Floor division (C++ division truncates toward zero): ps -> ns rounding that keeps the order
// of any two instants, so spans nested in ps stay nested in ns.
inline int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Makes the spans of one track nest by moving ends only (begins are what a reader matches
// on). `spans` holds elements with int64 `begin` and `end` members, sorted by begin, longer
// first at equal begins. Where a span starts inside an open one and outlasts it, the smaller
// of the two cuts wins: the open span ends where the new one begins (neighbours that overlap
// by a rounding step stay siblings), or the new one ends with the open span (a child that
// overruns its parent by a rounding step stays its child).
template <typename Span>
void NestSpans(std::vector<Span>* spans) {
  std::vector<size_t> open;  // indices of the spans enclosing the current one, innermost last
  for (size_t i = 0; i < spans->size(); ++i) {
    Span& s = (*spans)[i];
    while (!open.empty() && (*spans)[open.back()].end <= s.begin) open.pop_back();
    while (!open.empty() && s.end > (*spans)[open.back()].end) {
      Span& outer = (*spans)[open.back()];
      if (outer.end - s.begin < s.end - outer.end) {
        // Every descendant of `outer` has ended by now (it is the innermost open span), so
        // ending it earlier keeps them inside it.
        outer.end = s.begin;
        open.pop_back();
      } else {
        s.end = outer.end;
        break;
      }
    }
    open.push_back(i);
  }
}

}  // namespace podprof::exporter

#endif  // PODPROF_EXPORT_NESTING_H_
