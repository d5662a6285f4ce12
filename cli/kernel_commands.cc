#include "cli/kernel_commands.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/format.h"
#include "common/clock.h"
#include "common/status_macros.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

// The response as JSON, field names as in the .proto.
absl::Status WriteProtoJson(const google::protobuf::Message& m, std::ostream& out) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  std::string json;
  auto s = google::protobuf::util::MessageToJsonString(m, &json, opts);
  if (!s.ok()) return absl::InternalError(std::string(s.message()));
  out << json;
  return absl::OkStatus();
}

// A text block indented by two spaces, cut to `max_lines` (0 = all) with a note.
void Block(const std::string& title, const std::string& text, size_t max_lines, std::ostream& out) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  out << title << " (" << lines.size() << (lines.size() == 1 ? " line" : " lines") << ")\n";
  const size_t n = max_lines == 0 ? lines.size() : std::min(lines.size(), max_lines);
  for (size_t i = 0; i < n; ++i) out << "  " << lines[i] << "\n";
  if (n < lines.size()) out << "  ... " << lines.size() - n << " more lines (--full shows all)\n";
}

// "mxu_busy 72.0%, vpu_busy 15.0%, tpu.runtime.hbm.memory.usage.bytes 2.1e+10"; busy and
// stall fractions as percentages, gauges in percent as they are, others as numbers.
std::string Gauges(const v1::KernelInsight& in) {
  std::map<std::string, double> sorted(in.utilization().begin(), in.utilization().end());
  std::vector<std::string> parts;
  for (const auto& [name, v] : sorted) {
    std::string value;
    if (absl::EndsWith(name, "_busy") || absl::StartsWith(name, "stall")) {
      value = absl::StrFormat("%.1f%%", 100 * v);
    } else if (absl::StrContains(name, "percent")) {
      value = absl::StrFormat("%.1f%%", v);
    } else {
      value = absl::StrFormat("%.4g", v);
    }
    parts.push_back(absl::StrCat(name, " ", value));
  }
  return absl::StrJoin(parts, ", ");
}

// Energy counters (nJ running totals) as energy and mean power over the covered time.
std::string Energy(const v1::KernelInsight& in) {
  std::map<std::string, double> sorted(in.totals().begin(), in.totals().end());
  std::vector<std::string> parts;
  for (const auto& [name, v] : sorted) {
    if (absl::EndsWith(name, "_nj") && in.counter_covered_ps() > 0) {
      const double watts = v / (static_cast<double>(in.counter_covered_ps()) / 1000.0);
      parts.push_back(
          absl::StrFormat("%s %.1f mJ (%.0f W)", name.substr(0, name.size() - 3), v / 1e6, watts));
    } else {
      parts.push_back(absl::StrFormat("%s %.4g", name, v));
    }
  }
  return absl::StrJoin(parts, ", ");
}

void WriteStatsLine(const v1::KernelStats& s, std::ostream& out) {
  out << "  " << s.count() << " runs on " << s.chip_count() << " chips, total "
      << FormatDurationPs(s.total_ps()) << ", mean " << FormatDurationPs(std::llround(s.mean_ps()))
      << ", p50 " << FormatDurationPs(s.p50_ps()) << ", p99 " << FormatDurationPs(s.p99_ps())
      << ", max " << FormatDurationPs(s.max_ps()) << "\n";
  const v1::KernelInsight& in = s.insight();
  if (s.kernel().flops() > 0 || s.kernel().bytes_accessed() > 0) {
    out << absl::StrFormat(
        "  %.2f TFLOP/s (%s of peak), %.1f GB/s (%s of HBM peak), %.1f flop/byte against a "
        "ridge of %.0f\n",
        s.achieved_tflops(), Percent(s.fraction_of_peak_flops()), s.achieved_hbm_gbps(),
        Percent(s.fraction_of_peak_hbm()), in.arithmetic_intensity(), in.ridge_point());
  } else {
    out << "  no cost model (flops, bytes) in the capture\n";
  }
  if (in.has_counters()) {
    out << "  counters over " << FormatDurationPs(in.counter_covered_ps()) << ": " << Gauges(in)
        << "\n";
    if (!in.totals().empty()) out << "  energy: " << Energy(in) << "\n";
  } else {
    out << "  no counters in this capture cover it\n";
  }
  if (in.wait_ps() > 0) {
    out << "  waited " << FormatDurationPs(in.wait_ps()) << " in collectives ("
        << Percent(in.wait_fraction()) << " of its time)"
        << (in.straggler().empty() ? "" : ", most often for " + in.straggler()) << "\n";
  }
  out << "  verdict: " << (in.verdict_text().empty() ? "-" : in.verdict_text()) << "\n";
}

// How much later than the next-to-last chip `c` came, on average, when it came last.
int64_t MeanLatenessPs(const v1::StragglerChip& c) {
  return c.times_last() > 0 ? c.lateness_ps() / static_cast<int64_t>(c.times_last()) : 0;
}

}  // namespace

absl::Status RunKernel(AggregatorClient& client, const KernelOptions& options, std::ostream& out) {
  v1::DescribeKernelRequest request;
  request.set_op_name(options.op_name);
  request.set_module(options.module);
  request.set_capture_id(options.capture_id);
  v1::DescribeKernelResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::DescribeKernel, request, &response));
  if (options.format == OutputFormat::kJson) {
    RETURN_IF_ERROR(WriteProtoJson(response, out));
    out << "\n";
  } else {
    WriteKernel(response, options, out);
  }
  return FlushOutput(out);
}

void WriteKernel(const v1::DescribeKernelResponse& r, const KernelOptions& options,
                 std::ostream& out) {
  const v1::KernelDef& k = r.kernel();
  out << "kernel " << k.op_name() << "  (module " << (k.module().empty() ? "-" : k.module())
      << ", program " << k.program_id() << ", category " << k.category() << ")\n";
  if (!k.custom_call_target().empty()) {
    out << "custom call  " << k.custom_call_target()
        << (k.custom_call_target() == "tpu_custom_call" ? " (Pallas/Mosaic kernel)" : "") << "\n";
  }
  if (!k.source().empty()) out << "source       " << k.source() << "\n";
  if (!k.tf_op().empty()) out << "op path      " << k.tf_op() << "\n";
  if (!k.source_stack().empty()) {
    std::vector<std::string> frames = absl::StrSplit(k.source_stack(), '\n', absl::SkipEmpty());
    out << "stack        " << absl::StrJoin(frames, " <- ") << "\n";
  }
  const size_t lines = options.full ? 0 : 12;
  if (!k.hlo_text().empty()) Block("HLO", k.hlo_text(), lines, out);
  if (!k.mlir().empty()) Block("MLIR", k.mlir(), options.full ? 0 : 20, out);
  for (const v1::KernelDef& o : r.others()) {
    out << "also named so: module " << o.module() << ", program " << o.program_id()
        << " (--module picks one)\n";
  }
  out << "\nin capture " << r.capture_id() << ":\n";
  WriteStatsLine(r.rollup(), out);
  if (r.per_chip_size() > 1) {
    out << "\nper chip:\n";
    TextTable table({{"HOST", TextTable::Align::kLeft, 24},
                     {"CHIP", TextTable::Align::kRight},
                     {"COUNT", TextTable::Align::kRight},
                     {"MEAN", TextTable::Align::kRight},
                     {"P99", TextTable::Align::kRight},
                     {"MXU", TextTable::Align::kRight},
                     {"STALL", TextTable::Align::kRight},
                     {"WAIT", TextTable::Align::kRight},
                     {"VERDICT", TextTable::Align::kLeft, 24}});
    for (const v1::KernelStats& s : r.per_chip()) {
      const v1::KernelInsight& in = s.insight();
      auto mxu = in.utilization().find("mxu_busy");
      table.AddRow({s.host_name(), absl::StrCat(s.chip_ordinal()), absl::StrCat(s.count()),
                    FormatDurationPs(std::llround(s.mean_ps())), FormatDurationPs(s.p99_ps()),
                    mxu == in.utilization().end() ? "-" : Percent(mxu->second),
                    in.has_counters() ? Percent(in.stall_fraction()) : "-",
                    Percent(in.wait_fraction()), in.verdict()});
    }
    table.Write(out);
  }
  if (!r.history().empty()) {
    std::vector<double> means;
    for (const auto& p : r.history()) means.push_back(p.mean_ps());
    out << "\nhistory over " << r.history_size() << " captures (mean): " << Sparkline(means) << "  "
        << FormatDurationPs(std::llround(means.front())) << " -> "
        << FormatDurationPs(std::llround(means.back())) << "\n";
    TextTable table({{"CAPTURE", TextTable::Align::kLeft, 32},
                     {"START", TextTable::Align::kLeft},
                     {"COUNT", TextTable::Align::kRight},
                     {"MEAN", TextTable::Align::kRight},
                     {"P99", TextTable::Align::kRight},
                     {"TFLOP/S", TextTable::Align::kRight}});
    const int first = std::max(0, r.history_size() - 8);
    for (int i = first; i < r.history_size(); ++i) {
      const auto& p = r.history(i);
      table.AddRow({p.capture_id(), FormatTimestampNs(p.capture_start_ns()),
                    absl::StrCat(p.count()), FormatDurationPs(std::llround(p.mean_ps())),
                    FormatDurationPs(p.p99_ps()),
                    p.achieved_tflops() > 0 ? absl::StrFormat("%.2f", p.achieved_tflops()) : "-"});
    }
    table.Write(out);
  }
}

absl::Status RunStragglers(AggregatorClient& client, const StragglerOptions& options,
                           std::ostream& out) {
  v1::GetStragglersRequest request;
  request.set_capture_id(options.capture_id);
  v1::GetStragglersResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::GetStragglers, request, &response));
  if (options.format == OutputFormat::kJson) {
    RETURN_IF_ERROR(WriteProtoJson(response, out));
    out << "\n";
  } else {
    WriteStragglers(response, options, out);
  }
  return FlushOutput(out);
}

void WriteStragglers(const v1::GetStragglersResponse& r, const StragglerOptions& options,
                     std::ostream& out) {
  if (options.format == OutputFormat::kCsv) {
    out << "capture,host,chip,times_last,instances,caused_wait_ps,lateness_ps,steps\n";
    for (const auto& c : r.chips()) {
      out << CsvField(r.capture_id()) << ',' << CsvField(c.host_name()) << ',' << c.chip_ordinal()
          << ',' << c.times_last() << ',' << c.instances() << ',' << c.caused_wait_ps() << ','
          << c.lateness_ps() << ',' << CsvField(absl::StrJoin(c.steps(), " ")) << "\n";
    }
    return;
  }
  if (r.chips().empty()) {
    out << "capture " << r.capture_id()
        << ": no collective joined chips that waited for each other (no all_reduce_unique_id "
           "seen on two chips)\n";
    return;
  }
  const auto& top = r.chips(0);
  out << "capture " << r.capture_id() << ": " << top.host_name() << " chip " << top.chip_ordinal()
      << " made the others wait most: last in " << top.times_last() << " of " << top.instances()
      << " collectives, " << FormatDurationPs(top.caused_wait_ps())
      << " of waiting in all, on average " << FormatDurationPs(MeanLatenessPs(top))
      << " after the next-to-last chip\n\n";
  TextTable chips({{"HOST", TextTable::Align::kLeft, 24},
                   {"CHIP", TextTable::Align::kRight},
                   {"LAST", TextTable::Align::kRight},
                   {"OF", TextTable::Align::kRight},
                   {"CAUSED WAIT", TextTable::Align::kRight},
                   {"MEAN LATENESS", TextTable::Align::kRight},
                   {"STEPS", TextTable::Align::kLeft, 40}});
  for (const auto& c : r.chips()) {
    chips.AddRow({c.host_name(), absl::StrCat(c.chip_ordinal()), absl::StrCat(c.times_last()),
                  absl::StrCat(c.instances()), FormatDurationPs(c.caused_wait_ps()),
                  FormatDurationPs(MeanLatenessPs(c)),
                  c.steps().empty() ? "-" : absl::StrJoin(c.steps(), " ")});
  }
  chips.Write(out);
  out << "\nworst collectives:\n";
  TextTable worst({{"KERNEL", TextTable::Align::kLeft, 28},
                   {"STEP", TextTable::Align::kRight},
                   {"STRAGGLER", TextTable::Align::kLeft, 28},
                   {"CHIPS", TextTable::Align::kRight},
                   {"SPREAD", TextTable::Align::kRight},
                   {"LATENESS", TextTable::Align::kRight},
                   {"CAUSED", TextTable::Align::kRight}});
  for (int i = 0; i < std::min(options.top, r.worst_size()); ++i) {
    const auto& w = r.worst(i);
    worst.AddRow({w.kernel_name(), w.step() >= 0 ? absl::StrCat(w.step()) : "-",
                  absl::StrCat(w.straggler_host(), " chip ", w.straggler_chip()),
                  absl::StrCat(w.chips()), FormatDurationPs(w.spread_ps()),
                  FormatDurationPs(w.lateness_ps()), FormatDurationPs(w.caused_wait_ps())});
  }
  worst.Write(out);
}

}  // namespace podprof::cli
