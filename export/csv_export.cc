// The CSV writer of export/trace_export.h.
#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "export/nesting.h"
#include "export/trace_export.h"
#include "export/tracks.h"
#include "report/format.h"

namespace podprof::exporter {

namespace {

// Rows are written in pieces of about this size: one write per row costs more than the row.
constexpr size_t kCsvWriteBytes = 64 << 10;

// A count or id as a CSV field: empty for 0 (none, or unknown).
template <typename T>
std::string NonZero(T v) {
  return v == 0 ? std::string() : absl::StrCat(v);
}

// The fields of a kernel that every row of it repeats, escaped once rather than per row:
// "kernel,module" and "category,program_id,flops,bytes_accessed".
struct CsvKernel {
  std::string names, cost;
};

// The host's kernels' fields, with one more entry last for an event whose kernel it lacks.
std::vector<CsvKernel> CsvKernels(const std::vector<trace::KernelDef>& kernels) {
  std::vector<CsvKernel> out;
  out.reserve(kernels.size() + 1);
  for (const trace::KernelDef& k : kernels) {
    out.push_back({absl::StrCat(report::CsvField(k.name), ",", report::CsvField(k.module)),
                   absl::StrCat(report::CsvField(k.category), ",", NonZero(k.program_id), ",",
                                NonZero(k.flops), ",", NonZero(k.bytes_accessed))});
  }
  out.push_back({",", ",,,"});
  return out;
}

int ChipOrdinal(const trace::HostCapture& capture, int chip) {
  return chip >= 0 && chip < static_cast<int>(capture.host.chips.size())
             ? capture.host.chips[chip].ordinal
             : chip;
}

// (chip ordinal, chip index, line rank, line): the CSV's row order within a host. The index
// keeps apart two devices of one ordinal (the CPU device beside a chip 0).
using CsvGroup = std::tuple<int, int, int, std::string>;

// The blocks of each (chip, line) of a host, in row order.
std::map<CsvGroup, std::vector<uint32_t>> CsvGroups(const trace::HostCapture& capture) {
  std::map<CsvGroup, std::vector<uint32_t>> out;
  for (uint32_t i = 0; i < capture.blocks.size(); ++i) {
    const trace::EventBlock& b = capture.blocks[i];
    out[{ChipOrdinal(capture, b.chip), b.chip, LineRank(b.line), b.line}].push_back(i);
  }
  return out;
}

// One event of a (chip, line), for ordering: its start as the Perfetto trace places it (whole
// ns) and the ps past that, so that the order is the exact instants' even across blocks of
// different bases.
struct CsvEvent {
  int64_t begin_ns, past_ns_ps, duration_ps;
  uint32_t block, index;
};

// The events of `blocks` by start, longer first at equal starts, then as stored: a
// deterministic order for any capture.
std::vector<CsvEvent> CsvOrder(const trace::HostCapture& capture,
                               const std::vector<uint32_t>& blocks) {
  std::vector<CsvEvent> out;
  for (uint32_t bi : blocks) {
    const trace::EventBlock& b = capture.blocks[bi];
    for (uint32_t i = 0; i < b.size(); ++i) {
      const int64_t ns = FloorDiv(b.start_ps[i], 1000);
      // A negative duration (none is recorded) counts as 0, as the viewers' exports take it.
      out.push_back({b.base_ns + ns, b.start_ps[i] - ns * 1000,
                     std::max<int64_t>(b.duration_ps[i], 0), bi, i});
    }
  }
  std::sort(out.begin(), out.end(), [](const CsvEvent& a, const CsvEvent& b) {
    return std::tie(a.begin_ns, a.past_ns_ps, b.duration_ps, a.block, a.index) <
           std::tie(b.begin_ns, b.past_ns_ps, a.duration_ps, b.block, b.index);
  });
  return out;
}

}  // namespace

CsvWriter::CsvWriter(std::ostream* out) : out_(out) { *out_ << kCsvHeader << "\n"; }

void CsvWriter::AddHost(const trace::HostCapture& capture) {
  ++counts_.hosts;
  const std::vector<CsvKernel> kernels = CsvKernels(capture.kernels);
  const std::string host = report::CsvField(capture.host.name);
  std::string rows;
  auto write = [&] {
    out_->write(rows.data(), static_cast<std::streamsize>(rows.size()));
    rows.clear();
  };
  for (const auto& [group, blocks] : CsvGroups(capture)) {
    const std::string prefix =
        absl::StrCat(host, ",", std::get<0>(group), ",", report::CsvField(std::get<3>(group)), ",");
    for (const CsvEvent& e : CsvOrder(capture, blocks)) {
      const trace::EventBlock& b = capture.blocks[e.block];
      const CsvKernel& k = kernels[std::min<size_t>(b.kernel[e.index], capture.kernels.size())];
      absl::StrAppend(&rows, prefix, k.names, ",", e.begin_ns, ",", e.duration_ps, ",",
                      NonZero(b.collective[e.index]), ",", k.cost, "\n");
      ++counts_.slices;
      if (rows.size() >= kCsvWriteBytes) write();
    }
  }
  write();
}

absl::Status CsvWriter::Finish() {
  out_->flush();
  if (!*out_) return absl::DataLossError("writing the CSV failed");
  return absl::OkStatus();
}

}  // namespace podprof::exporter
