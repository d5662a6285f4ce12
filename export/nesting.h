// Slices on one timeline must nest: every viewer (Perfetto, Chrome's trace viewer, XProf)
// draws a track as a stack, and one that starts inside another and outlasts it has no place in
// it. Recorded times break this by a hair (clock mapping and rounding leave a scope 1 ps past
// its neighbour, or 1 ns past its kernel), so every writer puts its spans through one rule.
#ifndef PODPROF_EXPORT_NESTING_H_
#define PODPROF_EXPORT_NESTING_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace podprof::exporter {

// Floor division (C++ division truncates toward zero): ps -> ns rounding that keeps the order
// of any two instants, so spans nested in ps stay nested in ns.
inline int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// The most a span may be cut to make a track nest, in the spans' unit per ns: overlaps up to a
// nanosecond are rounding and clock-mapping artifacts; longer ones are real concurrency (an
// async copy whose device-measured duration runs past the next op's start), which cutting
// would falsify.
inline constexpr int64_t kMaxTrimNs = 1;

// Makes the spans of one track nest by moving ends only (begins are what a reader matches
// on), by at most `max_trim`. `spans` holds elements with int64 `begin` and `end` members,
// sorted by begin, longer first at equal begins. Where a span starts inside an open one and
// outlasts it, the smaller of the two cuts wins if it is within `max_trim`: the open span ends
// where the new one begins (neighbours that overlap by a rounding step stay siblings), or the
// new one ends with the open span (a child that overruns its parent by a rounding step stays
// its child). A span that would need a longer cut is left whole and returned, in order, for
// the caller to place elsewhere (an overlap track) or to keep as is; the rest nest.
template <typename Span>
std::vector<Span> NestSpans(std::vector<Span>* spans, int64_t max_trim) {
  std::vector<Span> kept, overlapping;
  kept.reserve(spans->size());
  std::vector<size_t> open;  // indices into `kept` of the spans enclosing the current one
  for (Span& s : *spans) {
    while (!open.empty() && kept[open.back()].end <= s.begin) open.pop_back();
    bool fits = true;
    while (!open.empty() && s.end > kept[open.back()].end) {
      Span& outer = kept[open.back()];
      const int64_t cut_outer = outer.end - s.begin, cut_new = s.end - outer.end;
      if (std::min(cut_outer, cut_new) > max_trim) {
        fits = false;
        break;
      }
      if (cut_outer < cut_new) {
        // Every descendant of `outer` has ended by now (it is the innermost open span), so
        // ending it earlier keeps them inside it.
        outer.end = s.begin;
        open.pop_back();
      } else {
        s.end = outer.end;
        break;
      }
    }
    if (!fits) {
      overlapping.push_back(s);
      continue;
    }
    open.push_back(kept.size());
    kept.push_back(s);
  }
  *spans = std::move(kept);
  return overlapping;
}

// The spans as lanes that each nest: lane 0 what NestSpans keeps, lane 1 what it returned,
// nested in turn, and so on. For viewers that draw one stack per track (Perfetto, Chrome).
template <typename Span>
std::vector<std::vector<Span>> NestInLanes(std::vector<Span> spans, int64_t max_trim) {
  std::vector<std::vector<Span>> lanes;
  while (!spans.empty()) {
    std::vector<Span> rest = NestSpans(&spans, max_trim);
    lanes.push_back(std::move(spans));
    spans = std::move(rest);
  }
  return lanes;
}

}  // namespace podprof::exporter

#endif  // PODPROF_EXPORT_NESTING_H_
