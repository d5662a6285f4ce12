// `podprof capture` and `podprof snapshot`'s output (capture_command.h): a finished capture
// written as a table (with a snapshot's window and the hosts' notes, most telling first), CSV
// or JSON, and how the terminal is used. The command itself, its flags and the watch of a
// running capture are capture_command.cc.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/capture_command.h"
#include "cli/report.h"
#include "kernelprof/options.h"

namespace podprof::cli {
namespace {

using nlohmann::json;

void WriteHostsJson(const CaptureResult& result, const CaptureOptions& options,
                    const std::vector<v1::HostCaptureResult>& hosts, const json& extra,
                    std::ostream& out) {
  json hj = json::array();
  for (const auto& h : hosts) {
    json o = {{"host", h.host_name()},
              {"status", CaptureStatusName(h.status())},
              {"events", h.event_count()},
              {"bytes", h.bytes_received()},
              {"correction_ns", h.clock_offset_ns()},
              {"uncertainty_ns", h.clock_uncertainty_ns()},
              {"probe_correction_ns", h.probe_clock_offset_ns()},
              {"collectives_matched", h.collectives_matched()}};
    if (!h.error_message().empty()) o["error"] = h.error_message();
    // All of them, where the table's NOTE has room for the first only.
    o["warnings"] = std::vector<std::string>(h.warnings().begin(), h.warnings().end());
    auto it = options.host_extras.find(h.host_name());
    if (it != options.host_extras.end()) o.update(it->second);
    hj.push_back(o);
  }
  json o = {
      {"capture_id", result.capture_id},
      {"state", CaptureStatusName(result.status)},
      {"start_ns", result.summary.start_ns()},
      {"end_ns", result.summary.end_ns()},
      {"window", result.summary.window().empty() ? json(nullptr) : json(result.summary.window())},
      {"hosts", hj},
      {"top_kernels", KernelRowsJson(result.top_kernels)},
      {"options", ProtoToJson(result.summary.options())}};
  o.update(extra);
  WriteJson(o, out);
}

// How much a host's warning matters to reading the capture: 0 for the window it holds (a
// snapshot captured after its request instead of before: every figure means something else)
// and for what the capture lacks of what was asked (a figure the user asked for is not there),
// 2 for the runtime status (detail about where the chips stood), 1 for the rest (the
// profiler's own words among them).
int WarningRank(const std::string& w) {
  if (absl::StrContains(w, "flight recorder") || absl::StrContains(w, "from the request on") ||
      absl::StrContains(w, "after the request") || absl::StrContains(w, ": asked for ")) {
    return 0;
  }
  if (absl::StartsWith(w, "runtime status") || absl::StartsWith(w, "no runtime status")) return 2;
  return 1;
}

// What a snapshot's window is, for the table's head: empty for other captures.
std::string DescribeWindow(const v1::CaptureSummary& s) {
  if (s.window().empty()) return "";
  const std::string span =
      absl::StrCat(FormatTimestampNs(s.start_ns()), " to ", FormatTimestampNs(s.end_ns()));
  if (s.window() == "before-request") {
    return absl::StrCat("window: ", span, ", the seconds before the request (flight recorders)");
  }
  if (s.window() == "after-request") {
    return absl::StrCat("window: ", span,
                        ", AFTER the request: a host had no flight recorder armed, so the pod "
                        "was captured from the request on (not the seconds before it)");
  }
  return absl::StrCat("window: ", span,
                      ", mixed: some hosts hold the seconds before the request, some the "
                      "seconds after it (see each host's note)");
}

void WriteHostsCsv(const CaptureResult& result, const std::vector<v1::HostCaptureResult>& hosts,
                   std::ostream& out) {
  out << "capture,host,status,events,bytes,correction_ns,uncertainty_ns,"
         "probe_correction_ns,collectives_matched,error\n";
  for (const auto& h : hosts) {
    out << CsvField(result.capture_id) << "," << CsvField(h.host_name()) << ","
        << CaptureStatusName(h.status()) << "," << h.event_count() << "," << h.bytes_received()
        << "," << h.clock_offset_ns() << "," << h.clock_uncertainty_ns() << ","
        << h.probe_clock_offset_ns() << "," << h.collectives_matched() << ","
        << CsvField(h.error_message()) << "\n";
  }
}

void WriteCaptureTable(const CaptureResult& result, const CaptureOptions& options,
                       const std::vector<v1::HostCaptureResult>& hosts, std::ostream& out) {
  uint64_t events = 0, bytes = 0;
  int ok = 0;
  for (const auto& h : hosts) {
    events += h.event_count();
    bytes += h.bytes_received();
    ok += h.status() == v1::CAPTURE_STATUS_COMPLETE;
  }
  out << "capture " << result.capture_id << " "
      << options.display.Paint(CaptureStatusName(result.status),
                               result.status == v1::CAPTURE_STATUS_COMPLETE ? "32" : "31")
      << ": " << ok << "/" << hosts.size() << " hosts, " << events << " events, "
      << FormatBytes(bytes) << "\n";
  if (std::string w = DescribeWindow(result.summary); !w.empty()) {
    out << options.display.Paint(w, result.summary.window() == "before-request" ? "0" : "33")
        << "\n";
  }
  if (std::string o = kernelprof::DescribeOptions(result.summary.options()); !o.empty()) {
    out << "options: " << o << "\n";
  }
  out << "\n";
  using Col = TextTable::Column;
  using A = TextTable::Align;
  TextTable t({Col{"HOST"}, Col{"STATUS"}, Col{"EVENTS", A::kRight}, Col{"BYTES", A::kRight},
               Col{"CLOCK CORRECTION", A::kRight}, Col{"+-", A::kRight},
               Col{"PROBES ONLY", A::kRight}, Col{"COLLECTIVES", A::kRight},
               Col{"NOTE", A::kLeft, 60}});
  for (const auto& h : hosts) {
    const bool good = h.status() == v1::CAPTURE_STATUS_COMPLETE;
    std::vector<std::string> notes(h.warnings().begin(), h.warnings().end());
    std::stable_sort(notes.begin(), notes.end(), [](const std::string& a, const std::string& b) {
      return WarningRank(a) < WarningRank(b);
    });
    // An agent analyses its own host unless it is too old to (or its chips came apart): a
    // mixed pod says which hosts cost the aggregator their analysis.
    if (h.analysed_by() == "aggregator") notes.push_back("analysed by the aggregator");
    t.AddRow({h.host_name(), CaptureStatusName(h.status()), absl::StrCat(h.event_count()),
              FormatBytes(h.bytes_received()), good ? FormatSignedNs(h.clock_offset_ns()) : "-",
              good ? FormatSignedNs(h.clock_uncertainty_ns()) : "-",
              good ? FormatSignedNs(h.probe_clock_offset_ns()) : "-",
              good ? absl::StrCat(h.collectives_matched()) : "-",
              !h.error_message().empty() ? h.error_message() : absl::StrJoin(notes, "; ")});
  }
  t.Write(out);
  if (!result.top_kernels.empty()) {
    out << "\ntop kernels pod-wide\n";
    WriteKernelRowsTable(result.top_kernels, StatsGrouping::kKernel, out);
  }
}

}  // namespace

Display Display::ForStdout(bool no_color) {
  Display d;
  const char* term = std::getenv("TERM");
  d.live = isatty(STDOUT_FILENO) && (term == nullptr || std::string(term) != "dumb");
  d.color = d.live && !no_color && std::getenv("NO_COLOR") == nullptr;
  return d;
}

std::string Display::Paint(const std::string& text, const char* code) const {
  return color ? absl::StrCat("\x1b[", code, "m", text, "\x1b[0m") : text;
}

void WriteCaptureResult(const CaptureResult& result, const CaptureOptions& options,
                        const json& extra, std::ostream& out) {
  std::vector<v1::HostCaptureResult> hosts(result.summary.hosts().begin(),
                                           result.summary.hosts().end());
  std::sort(hosts.begin(), hosts.end(),
            [](const auto& a, const auto& b) { return a.host_name() < b.host_name(); });
  switch (options.format) {
    case OutputFormat::kJson:
      WriteHostsJson(result, options, hosts, extra, out);
      break;
    case OutputFormat::kCsv:
      WriteHostsCsv(result, hosts, out);
      break;
    case OutputFormat::kTable:
      WriteCaptureTable(result, options, hosts, out);
      break;
  }
}

}  // namespace podprof::cli
