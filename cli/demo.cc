#include "cli/demo.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/dcn_command.h"
#include "cli/demo_pod.h"
#include "cli/demo_recorder.h"
#include "cli/exit_codes.h"
#include "cli/export_command.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "launch/pod_launcher.h"
#include "nlohmann/json.hpp"

namespace podprof::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Each host's clock error at the window's middle, from the simulated hosts' ground truth, next
// to the correction the aggregator found, as the hosts' extra output fields.
void AddClockErrors(const CaptureResult& result,
                    const std::map<std::string, std::string>& truth_files,
                    CaptureOptions* capture) {
  const int64_t mid =
      result.summary.start_ns() + (result.summary.end_ns() - result.summary.start_ns()) / 2;
  for (const auto& h : result.summary.hosts()) {
    auto file = truth_files.find(h.host_name());
    if (file == truth_files.end()) continue;
    json t = json::parse(ReadFile(file->second).value_or(""), nullptr, false);
    if (t.is_discarded() || !t.contains("clock_offset_ns")) continue;
    const double truth = t["clock_offset_ns"].get<double>() +
                         t["clock_drift_ppm"].get<double>() * 1e-6 *
                             (static_cast<double>(mid) - t["clock_epoch_ns"].get<double>()) +
                         t["device_clock_offset_ns"].get<double>();
    const int64_t injected = std::llround(truth);
    capture->host_extras[h.host_name()] = {
        {"injected_offset_ns", injected},
        {"error_ns",
         h.status() == v1::CAPTURE_STATUS_COMPLETE ? h.clock_offset_ns() - injected : 0}};
  }
}

// The clock errors given to the simulated hosts next to what the aggregator recovered.
void WriteClockTable(const CaptureResult& result, const CaptureOptions& capture,
                     std::ostream& out) {
  out << "\nclock errors given to the simulated hosts and what the aggregator recovered\n";
  TextTable t({{"HOST"},
               {"GIVEN", TextTable::Align::kRight},
               {"CORRECTION", TextTable::Align::kRight},
               {"ERROR", TextTable::Align::kRight},
               {"+-", TextTable::Align::kRight}});
  for (const auto& h : result.summary.hosts()) {
    auto it = capture.host_extras.find(h.host_name());
    if (it == capture.host_extras.end() || h.status() != v1::CAPTURE_STATUS_COMPLETE) continue;
    t.AddRow({h.host_name(), FormatSignedNs(it->second["injected_offset_ns"].get<int64_t>()),
              FormatSignedNs(h.clock_offset_ns()),
              FormatSignedNs(it->second["error_ns"].get<int64_t>()),
              FormatSignedNs(h.clock_uncertainty_ns())});
  }
  t.Write(out);
}

// What to try when the pod could not deliver a capture in time: it shares this machine's
// cores with the aggregator and the agents, and a host's work grows with the window, the
// chips and, under kernel profiling, the sampling rate.
std::string Advice(const DemoOptions& options, const std::string& dir) {
  std::string a =
      absl::StrCat("  the ", options.hosts,
                   " simulated hosts, their agents and the aggregator share this "
                   "machine's ",
                   std::max(1u, std::thread::hardware_concurrency()), " cores; what to try:\n");
  if (options.duration_ns >= 2'000'000) {
    absl::StrAppend(&a, "    a shorter window:  --duration ", options.duration_ns / 2'000'000,
                    "ms\n");
  }
  if (options.slices > 1 && options.hosts > options.slices) {
    absl::StrAppend(&a, "    fewer hosts:       --hosts ", options.slices, " (one per slice)\n");
  } else if (options.hosts > 1 && options.slices <= 1) {
    absl::StrAppend(&a, "    fewer hosts:       --hosts ", options.hosts / 2, "\n");
  }
  absl::StrAppend(&a, "    more time:         --timeout ",
                  std::max<int64_t>(1, options.timeout_ns / 1'000'000'000) * 2, "s (now ",
                  FormatDurationPs(options.timeout_ns * 1000), ")\n  each process's log is in ",
                  dir, "\n");
  return a;
}

// A capture that brought no data: each host's outcome (the table names every host's error),
// why, and what to try, and nothing that needs data (no trace, no clock table, no queries).
int WriteFailedCapture(const CaptureResult& result, const CaptureOptions& capture,
                       const DemoOptions& options, const std::string& dir, std::ostream& out,
                       std::ostream& err) {
  WriteCaptureResult(result, capture, {{"dir", dir}}, out);
  std::vector<std::string> failed;
  for (const auto& h : result.summary.hosts()) {
    if (h.status() != v1::CAPTURE_STATUS_COMPLETE) failed.push_back(h.host_name());
  }
  err << "podprof demo: capture " << result.capture_id << " " << CaptureStatusName(result.status)
      << ": no host delivered its data (failed: " << absl::StrJoin(failed, ", ") << ")\n"
      << Advice(options, dir);
  return kExitPartial;
}

// The merged timeline. Under kernel profiling only its first part: every kernel execution
// carries its counters (over a hundred per execution on v7x), and the whole window of 4 hosts
// is too much Perfetto trace to open in a browser or to write quickly on 2 cores.
constexpr int64_t kKernelProfilingTraceNs = 200'000'000;
absl::StatusOr<ExportResult> ExportTrace(AggregatorClient& client, const DemoOptions& options,
                                         const std::string& capture_id, const std::string& dir) {
  ExportOptions exp;
  exp.capture_id = capture_id;
  exp.path = (fs::path(dir) / (capture_id + ".pftrace")).string();
  if (options.kernel_profiling && options.duration_ns > kKernelProfilingTraceNs) {
    exp.from_ns = 0;
    exp.to_ns = kKernelProfilingTraceNs;
  }
  return RunExport(client, exp);
}

// The table mode's text after the capture's rows: the clock table, where the trace is, the web
// page and, with --keep, what to try and how to stop the pod.
void WriteDemoTail(const DemoOptions& options, const CaptureResult& result,
                   const CaptureOptions& capture, const absl::StatusOr<ExportResult>& trace,
                   const std::string& page, const std::string& agg_addr,
                   const std::vector<pid_t>& pids, std::ostream& out) {
  WriteClockTable(result, capture, out);
  if (trace.ok()) {
    out << "\nmerged timeline: " << trace->path << " (" << FormatBytes(trace->bytes) << ")\n"
        << "  open it at https://ui.perfetto.dev\n";
    if (options.kernel_profiling && options.duration_ns > kKernelProfilingTraceNs) {
      out << "  its first " << FormatDurationPs(kKernelProfilingTraceNs * 1000)
          << " only, each kernel execution with its counters (with --keep, podprof export "
          << result.capture_id << " writes the whole window)\n";
    }
  } else {
    out << "\nno trace written: " << trace.status().message() << "\n";
  }
  out << "\nweb page: " << page
      << (options.keep ? "" : "  (it stops with the demo: add --keep to browse it)") << "\n";
  if (options.keep) {
    std::vector<std::string> pid_names;
    for (pid_t pid : pids) pid_names.push_back(absl::StrCat(pid));
    out << "\nstill running (--keep): try\n  podprof agents --aggregator " << agg_addr
        << "\n  podprof captures --aggregator " << agg_addr << "\n  podprof stats "
        << result.capture_id << " --aggregator " << agg_addr << "\n  podprof stragglers "
        << result.capture_id << " --aggregator " << agg_addr
        << "\n  podprof kernel flash_attention --aggregator " << agg_addr;
    if (options.slices > 1)
      out << "\n  podprof dcn " << result.capture_id << " --aggregator " << agg_addr;
    out << "\nstop them with\n  kill " << absl::StrJoin(pid_names, " ") << "\n";
  }
}

// The multi-slice flags, checked before anything starts (a simulated host refusing them says
// only that it exited); the error's text, or "".
std::string CheckSlices(const DemoOptions& options) {
  if (options.slices == 0) {
    if (!options.dcn_delays.empty() || !options.slow_slices.empty()) {
      return "--dcn-delay-at and --slow-slice need --slices (a multi-slice job)";
    }
    return "";
  }
  if (options.slices < 2 || options.slices > 64) return "--slices must be 2..64";
  if (options.hosts % options.slices != 0) {
    const int up = (options.hosts + options.slices - 1) / options.slices * options.slices;
    return absl::StrCat("--hosts ", options.hosts, ": ", options.hosts,
                        " hosts do not split evenly into ", options.slices,
                        " slices; give a multiple of ", options.slices, " (e.g. --hosts ",
                        up <= 64 ? up : options.slices, ")");
  }
  // The slice each fault names: SLICE of "T:SLICE:US" and of "SLICE:FACTOR".
  auto slice_ok = [&](absl::string_view text) {
    int slice = -1;
    return absl::SimpleAtoi(text, &slice) && slice >= 0 && slice < options.slices;
  };
  for (const std::string& d : options.dcn_delays) {
    std::vector<std::string> f = absl::StrSplit(d, ':');
    double us = -1;
    auto from_start = [](absl::string_view text) {
      absl::StatusOr<int64_t> at = ParseDurationNs(text);
      return at.ok() && *at >= 0;
    };
    if (f.size() != 3 || !from_start(f[0]) || !slice_ok(f[1]) || !absl::SimpleAtod(f[2], &us) ||
        !(us >= 0)) {
      return absl::StrCat("--dcn-delay-at \"", d, "\" is not T:SLICE:US with SLICE in 0..",
                          options.slices - 1, " (e.g. 0s:1:300: from the start, the data slice 1 ",
                          "sends arrives 300 us late)");
    }
  }
  for (const std::string& s : options.slow_slices) {
    std::vector<std::string> f = absl::StrSplit(s, ':');
    double factor = 0;
    if (f.size() != 2 || !slice_ok(f[0]) || !absl::SimpleAtod(f[1], &factor) || !(factor > 0)) {
      return absl::StrCat("--slow-slice \"", s, "\" is not SLICE:FACTOR with SLICE in 0..",
                          options.slices - 1, " (e.g. 2:1.3: slice 2 computes 1.3x slower)");
    }
  }
  return "";
}

// The capture's cross-slice view, by the code path of `podprof dcn CAPTURE`: its table (table
// mode) or its JSON (json mode); its error's text in either when the aggregator could not
// answer.
struct DcnView {
  std::string text;
  absl::Status status;
};
DcnView GetDcnView(AggregatorClient& client, const std::string& capture_id, OutputFormat format) {
  DcnOptions dcn;
  dcn.capture_id = capture_id;
  dcn.format = format == OutputFormat::kJson ? OutputFormat::kJson : OutputFormat::kTable;
  std::ostringstream text;
  absl::Status s = RunDcn(client, dcn, text);
  return {text.str(), s};
}

// The demo's one capture, as `podprof capture` would be asked for it.
CaptureOptions DemoCapture(const DemoOptions& options) {
  CaptureOptions c;
  c.duration_ns = options.duration_ns;
  c.labels = {{"source", "demo"}};
  c.format = options.format;
  c.display = options.display;
  c.top = 10;
  if (options.kernel_profiling) {
    // XProf's standard kernel profiling: each execution's own counts, as a TPU7x writes them
    // (a `counters_<kernel>` line per execution), not periodic samples.
    c.profiling.set_kernel_profiling(true);
  }
  c.timeout_ns = options.timeout_ns;
  return c;
}

// A multi-slice demo's DCN view (none for one slice or csv): in json under "dcn" in `extra`.
std::optional<DcnView> DemoDcnView(AggregatorClient& client, const DemoOptions& options,
                                   const std::string& capture_id, json* extra) {
  if (options.slices <= 1 || options.format == OutputFormat::kCsv) return std::nullopt;
  DcnView dcn = GetDcnView(client, capture_id, options.format);
  if (options.format != OutputFormat::kTable) {
    (*extra)["dcn"] = dcn.status.ok() ? json::parse(dcn.text, nullptr, false)
                                      : json{{"error", std::string(dcn.status.message())}};
  }
  return dcn;
}

// The DCN view's table after the capture's, as podprof dcn prints it.
void WriteDemoDcn(const DcnView& dcn, const std::string& capture_id, std::ostream& out) {
  out << "\ncross-slice (DCN) transfers, as podprof dcn " << capture_id << " shows them\n";
  if (dcn.status.ok()) {
    out << dcn.text;
  } else {
    out << "no DCN view: " << dcn.status.message() << "\n";
  }
}

}  // namespace

int RunDemo(const DemoOptions& options, std::ostream& out, std::ostream& err) {
  if (options.recorder) return RunRecorderDemo(options, out, err);
  auto fail = [&](const std::string& message) {
    err << "podprof demo: " << message << "\n";
    return kExitBadInput;
  };
  if (options.hosts < 1 || options.hosts > 64) return fail("--hosts must be 1..64");
  if (std::string bad = CheckSlices(options); !bad.empty()) return fail(bad);
  absl::StatusOr<std::string> bin = BinDir(options);
  if (!bin.ok()) return fail(std::string(bin.status().message()));
  absl::StatusOr<std::string> made = DemoDir(options);
  if (!made.ok()) return fail(std::string(made.status().message()));
  const std::string dir = *made;

  const bool table = options.format == OutputFormat::kTable;
  auto say = [&](const std::string& line) {
    // Status lines go to the terminal in table mode and to stderr otherwise, so json output
    // stays one object.
    (table ? out : err) << line << "\n";
    (table ? out : err).flush();
  };
  RealClock real_clock;
  Clock& clock = options.clock != nullptr ? *options.clock : real_clock;
  launch::Pod pod(DemoPod(options, *bin, dir, clock));
  StopOnSignal stop_on_signal(options.keep, pod);
  if (absl::Status s = pod.Start(); !s.ok()) return fail(std::string(s.message()));
  const std::string agg_addr = pod.aggregator_address();
  const std::string web =
      absl::StrCat("http://127.0.0.1:", pod.aggregator_ready().value("http_port", 0), "/");
  // Host name -> its simulated host's ground truth.
  std::map<std::string, std::string> truth_files;
  for (int i = 0; i < options.hosts; ++i) {
    truth_files[launch::HostAt(pod.options(), i).name] = launch::TruthFile(pod.options(), i);
  }
  say(absl::StrCat("podprof demo: aggregator on ", agg_addr, ", ", options.hosts, " simulated TPU ",
                   options.generation, " hosts",
                   options.slices > 1 ? absl::StrCat(" in ", options.slices, " slices") : "",
                   " with agents; files in ", dir));

  // Every agent registered, with two probe bursts behind it (so its clock model has a drift).
  AggregatorTarget target;
  target.address = agg_addr;
  AggregatorClient client(target, clock);
  if (absl::Status s = WaitForAgents(client, clock, options.hosts, dir); !s.ok()) {
    return fail(std::string(s.message()));
  }

  CaptureOptions capture = DemoCapture(options);
  absl::StatusOr<CaptureResult> result = RunCapture(client, capture, out, err);
  // Without data there is nothing for --keep to keep: the children stop as they otherwise do.
  if (!result.ok() && absl::IsDeadlineExceeded(result.status())) {
    pod.StopAll();
    err << "podprof demo: " << result.status().message() << "\n" << Advice(options, dir);
    return kExitPartial;
  }
  if (!result.ok()) return fail(std::string(result.status().message()));
  if (result->status != v1::CAPTURE_STATUS_COMPLETE &&
      result->status != v1::CAPTURE_STATUS_PARTIAL) {
    pod.StopAll();
    return WriteFailedCapture(*result, capture, options, dir, out, err);
  }

  AddClockErrors(*result, truth_files, &capture);
  absl::StatusOr<ExportResult> trace = ExportTrace(client, options, result->capture_id, dir);
  const std::string page = web + "captures/" + result->capture_id;
  json extra = {{"trace_path", trace.ok() ? trace->path : ""}, {"dir", dir}, {"web_url", page}};
  if (options.keep) {
    extra["aggregator"] = agg_addr;
    extra["pids"] = pod.Pids();
  }
  const std::optional<DcnView> dcn = DemoDcnView(client, options, result->capture_id, &extra);
  WriteCaptureResult(*result, capture, extra, out);
  if (table && dcn) WriteDemoDcn(*dcn, result->capture_id, out);
  if (table) WriteDemoTail(options, *result, capture, trace, page, agg_addr, pod.Pids(), out);
  out.flush();
  return result->status == v1::CAPTURE_STATUS_COMPLETE ? 0 : kExitPartial;
}

}  // namespace podprof::cli
