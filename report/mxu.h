// The MXU's busy share of a kernel, one figure for every view (`stats`, `inspect`, `import`,
// `capture`, `kernel`, `diff`, `history` and their JSON and CSV): kernel profiling's sampled
// performance counters, counted in the kernel's own cycles, where they were sampled, else the
// runtime's `mxu_busy` gauge, time-weighted over the kernel's executions (sampled around the
// kernel rather than in it). A table names the source it showed in a footnote (MxuSources).
#ifndef PODPROF_REPORT_MXU_H_
#define PODPROF_REPORT_MXU_H_

#include <ostream>
#include <string>

#include "proto/podprof_aggregator.pb.h"
#include "report/table.h"

namespace podprof::report {

enum class MxuSource { kNone, kPerfCounters, kGauge };

struct MxuFigure {
  double busy = 0;  // 0..1; meaningless when source is kNone
  MxuSource source = MxuSource::kNone;
  bool known() const { return source != MxuSource::kNone; }
};

// A kernel row's figure (its insight), and a history point's.
MxuFigure MxuOf(const v1::KernelInsight& insight);
MxuFigure MxuOf(const v1::KernelHistoryPoint& point);

// The source as JSON names it: "perf_counters", "mxu_busy_gauge"; "" for none.
const char* MxuSourceName(MxuSource source);

// Which sources the figures of one table came from, and how to mark and name them.
class MxuSources {
 public:
  void Add(const MxuFigure& f);
  // "72.0%"; "-" when unknown; where the table mixes both sources, a gauge's figure is
  // "~72.0%" (the footnote says so).
  std::string Cell(const MxuFigure& f) const;
  // "MXU: ..." naming the sources seen, for under the table; "" when no figure was known.
  std::string Footnote() const;

 private:
  bool perf_ = false, gauge_ = false;
};

// Writes `sources`' footnote, ending in "\n", under `table` when its column "MXU" is among
// those Write(out, fit) shows; nothing otherwise.
void WriteMxuFootnote(const MxuSources& sources, const TextTable& table, const TableFit& fit,
                      std::ostream& out);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_MXU_H_
