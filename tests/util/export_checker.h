// Checks an export the way the viewers' importers read it, decoding it with the published
// schemas only (Perfetto's trace proto, XLA's xplane.proto, the Trace Event Format's JSON) and
// never with podprof's writers or readers, so a writer bug cannot hide behind a matching
// reader bug. Each check returns the problems it found (empty: clean), a few of each kind
// spelled out and the rest counted, plus what it saw, for tests and for scripts/bench.sh.
#ifndef PODPROF_TESTS_UTIL_EXPORT_CHECKER_H_
#define PODPROF_TESTS_UTIL_EXPORT_CHECKER_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "proto/xplane.pb.h"

namespace podprof::testing {

struct ExportCheck {
  // "rule: example" lines, at most kExamplesPerRule per rule, then "rule: N more".
  std::vector<std::string> problems;
  uint64_t slices = 0;
  uint64_t counter_samples = 0;
  uint64_t flows = 0;  // flow ids (Perfetto), flow arrows (JSON), collective ids (XProf)
  uint64_t tracks = 0;
  std::map<std::string, uint64_t> per_rule;  // problems per rule, all of them

  bool ok() const { return problems.empty(); }
  std::string Summary() const;  // the problems, one per line
  static constexpr int kExamplesPerRule = 5;
  void Add(const std::string& rule, const std::string& example);
};

// A `.pftrace`: one packet sequence, incremental state cleared first, interned names defined
// before use, tracks declared before use with known parents, slices balanced and nested per
// track in time order, counters only on counter tracks and each with a unit, a clock snapshot
// naming the realtime clock, no unknown fields. `flows` counts flow ids joining two slices or more.
ExportCheck CheckPerfetto(const std::string& bytes);

// A Chrome JSON trace: valid JSON with traceEvents; complete ("X") events with non-negative
// whole-nanosecond ts and dur; on each thread they nest (a child never ends after its parent);
// flow events (s/t/f, bound to an enclosing slice) start before they finish and land on a
// slice; every pid and tid used is named by a metadata event.
ExportCheck CheckChromeJson(const std::string& text);

// An XProf session directory (the export's root, holding plugins/profile/<run>/): one run named
// after the session's start, one `<host>.xplane.pb` per host, each with a Task Environment
// plane; every event's metadata exists; a plane's lines have distinct ids; a performance
// counter sample (uint64 `performance_counter_id`, as XProf's Perf Counters tool reads it) has
// a `counter_value` and counts as a counter sample; no two events on a line overlap by under a ns
// (a rounding artifact: concurrent events may share a line, as on the profiler's own "Async XLA
// Ops"), each line's duration covers its events, and its timestamp is relative to the profile
// start, as the profiler's post-processing writes them (docs/INTEROP.md says why not epoch),
// placing every event inside the profile window. Fills `first_events` ("<file> <plane> <line>" ->
// the start of the line's first event in ns since the epoch) when given.
ExportCheck CheckXprofSession(const std::filesystem::path& root,
                              std::map<std::string, int64_t>* first_events = nullptr);

// The profile window an XSpace's Task Environment plane states, ns since the epoch; false when
// it states none.
bool XprofProfileWindow(const tensorflow::profiler::XSpace& space, int64_t* start, int64_t* stop);

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_EXPORT_CHECKER_H_
