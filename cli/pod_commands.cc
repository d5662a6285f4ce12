#include "cli/pod_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace podprof::cli {
namespace {

namespace fs = std::filesystem;
using Stub = v1::Aggregator::StubInterface;
using nlohmann::json;

const char* StateName(v1::AgentState s) {
  switch (s) {
    case v1::AGENT_STATE_ONLINE:
      return "online";
    case v1::AGENT_STATE_STALE:
      return "stale";
    case v1::AGENT_STATE_OFFLINE:
      return "offline";
    default:
      return "unknown";
  }
}

std::string Labels(const google::protobuf::Map<std::string, std::string>& labels) {
  std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  std::vector<std::string> parts;
  for (const auto& [k, v] : sorted) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, ";");
}

// What the live display knows of one host.
struct HostView {
  std::string stage = "waiting";
  uint64_t events = 0, bytes = 0;
  bool failed = false;
  std::string error;
};

std::string Bar(double fraction, int width) {
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width + 0.5);
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
}

std::string Paint(const Display& d, const std::string& text, const char* code) {
  return d.color ? absl::StrCat("\x1b[", code, "m", text, "\x1b[0m") : text;
}

const char* StageColor(const HostView& h) {
  if (h.failed) return "31";
  if (h.stage == "done") return "32";
  if (h.stage == "streaming") return "36";
  return "0";
}

// The per-host display while a capture runs: redrawn in place on a terminal.
class LiveView {
 public:
  static constexpr size_t kMaxHostLines = 24;
  LiveView(const Display& d, std::ostream& out, const std::vector<std::string>& hosts,
           int64_t start_ns, int64_t duration_ns)
      : d_(d), out_(out), start_ns_(start_ns), duration_ns_(duration_ns) {
    for (const std::string& h : hosts) hosts_[h];
  }
  void Update(const v1::CaptureProgress& p) {
    if (!p.has_host()) return;
    HostView& h = hosts_[p.host().host_name()];
    if (!p.detail().empty()) h.stage = p.detail();
    h.events = std::max<uint64_t>(h.events, p.host().event_count());
    h.bytes = std::max<uint64_t>(h.bytes, p.host().bytes_received());
    h.failed = p.host().status() == v1::CAPTURE_STATUS_FAILED;
    h.error = p.host().error_message();
  }
  void Draw(int64_t now_ns) {
    std::vector<std::string> lines;
    const double f = static_cast<double>(now_ns - start_ns_) / static_cast<double>(duration_ns_);
    std::string window = now_ns < start_ns_
                             ? absl::StrFormat("starts in %.1f s", (start_ns_ - now_ns) / 1e9)
                         : f < 1 ? "capturing"
                                 : "window over";
    lines.push_back(absl::StrCat("window ", Bar(f, 30), " ", window));
    size_t shown = 0;
    std::map<std::string, int> rest;
    for (const auto& [name, h] : hosts_) {
      if (shown++ >= kMaxHostLines) {
        ++rest[h.failed ? "failed" : h.stage];
        continue;
      }
      std::string stage = absl::StrFormat("%-10s", h.failed ? "failed" : h.stage);
      std::string line = absl::StrFormat("  %-16s %s", name, Paint(d_, stage, StageColor(h)));
      if (h.events > 0 || h.bytes > 0) {
        absl::StrAppend(&line, absl::StrFormat(" %10s  %9s events", FormatBytes(h.bytes),
                                               absl::StrCat(h.events)));
      }
      if (h.failed) absl::StrAppend(&line, "  ", h.error);
      lines.push_back(line);
    }
    if (!rest.empty()) {
      std::vector<std::string> parts;
      for (const auto& [stage, n] : rest) parts.push_back(absl::StrCat(n, " ", stage));
      lines.push_back(
          absl::StrCat("  ... and ", shown - kMaxHostLines, " more: ", absl::StrJoin(parts, ", ")));
    }
    if (drawn_ > 0) out_ << "\x1b[" << drawn_ << "A";
    for (const std::string& l : lines) out_ << "\x1b[2K" << l << "\n";
    out_.flush();
    drawn_ = lines.size();
  }

 private:
  const Display d_;
  std::ostream& out_;
  const int64_t start_ns_, duration_ns_;
  std::map<std::string, HostView> hosts_;
  size_t drawn_ = 0;
};

// One progress event as a log line (for logs and pipes).
std::string ProgressLine(const v1::CaptureProgress& p) {
  std::string line = FormatTimestampNs(p.time_ns());
  if (p.has_host()) {
    absl::StrAppend(&line, " ", p.host().host_name(), " ", p.detail());
    if (p.host().event_count() > 0) {
      absl::StrAppend(&line, " events=", p.host().event_count(),
                      " bytes=", p.host().bytes_received());
    }
    if (!p.host().error_message().empty())
      absl::StrAppend(&line, " error=", p.host().error_message());
  } else {
    absl::StrAppend(&line, " ", p.detail());
  }
  if (p.done()) absl::StrAppend(&line, " capture ", CaptureStatusName(p.status()));
  return line;
}

}  // namespace

Display Display::ForStdout(bool no_color) {
  Display d;
  const char* term = std::getenv("TERM");
  d.live = isatty(STDOUT_FILENO) && (term == nullptr || std::string(term) != "dumb");
  d.color = d.live && !no_color && std::getenv("NO_COLOR") == nullptr;
  return d;
}

absl::Status RunAgents(AggregatorClient& client, const AgentsOptions& options, std::ostream& out) {
  v1::ListAgentsRequest request;
  for (const auto& [k, v] : options.selector) (*request.mutable_label_selector())[k] = v;
  v1::ListAgentsResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::ListAgents, request, &response));
  const int64_t now = client.clock().NowNs();
  switch (options.format) {
    case OutputFormat::kJson: {
      json agents = json::array();
      for (const auto& a : response.agents()) {
        agents.push_back({{"host", a.host().host_name()},
                          {"address", a.host().agent_address()},
                          {"state", StateName(a.state())},
                          {"chips", a.host().chips_size()},
                          {"labels", std::map<std::string, std::string>(a.host().labels().begin(),
                                                                        a.host().labels().end())},
                          {"last_heartbeat_ns", a.last_heartbeat_ns()},
                          {"clock_offset_ns", a.clock().offset_ns()},
                          {"clock_uncertainty_ns", a.clock().uncertainty_ns()},
                          {"clock_drift_ppb", a.clock().drift_ppb()},
                          {"min_rtt_ns", a.clock().min_rtt_ns()},
                          {"probe_count", a.clock().probe_count()},
                          {"active_capture_id", a.active_capture_id()}});
      }
      out << json{{"agents", agents}}.dump(2) << "\n";
      break;
    }
    case OutputFormat::kCsv:
      out << "host,address,state,chips,labels,last_heartbeat_ns,clock_offset_ns,"
             "clock_uncertainty_ns,clock_drift_ppb,min_rtt_ns,probe_count,active_capture_id\n";
      for (const auto& a : response.agents()) {
        out << CsvField(a.host().host_name()) << "," << CsvField(a.host().agent_address()) << ","
            << StateName(a.state()) << "," << a.host().chips_size() << ","
            << CsvField(Labels(a.host().labels())) << "," << a.last_heartbeat_ns() << ","
            << a.clock().offset_ns() << "," << a.clock().uncertainty_ns() << ","
            << a.clock().drift_ppb() << "," << a.clock().min_rtt_ns() << ","
            << a.clock().probe_count() << "," << CsvField(a.active_capture_id()) << "\n";
      }
      break;
    case OutputFormat::kTable: {
      using Col = TextTable::Column;
      using A = TextTable::Align;
      TextTable t({Col{"HOST"}, Col{"ADDRESS"}, Col{"STATE"}, Col{"CHIPS", A::kRight},
                   Col{"LABELS", A::kLeft, 32}, Col{"HEARTBEAT", A::kRight},
                   Col{"CLOCK OFFSET", A::kRight}, Col{"+-", A::kRight}, Col{"DRIFT", A::kRight},
                   Col{"RTT", A::kRight}, Col{"CAPTURE"}});
      for (const auto& a : response.agents()) {
        t.AddRow({a.host().host_name(), a.host().agent_address(), StateName(a.state()),
                  absl::StrCat(a.host().chips_size()), Labels(a.host().labels()),
                  absl::StrFormat("%.1f s ago", (now - a.last_heartbeat_ns()) / 1e9),
                  a.clock().probe_count() > 0 ? FormatSignedNs(a.clock().offset_ns()) : "-",
                  a.clock().probe_count() > 0 ? FormatSignedNs(a.clock().uncertainty_ns()) : "-",
                  a.clock().probe_count() > 1
                      ? absl::StrFormat("%+.2f ppm", a.clock().drift_ppb() / 1e3)
                      : "-",
                  a.clock().probe_count() > 0 ? FormatSignedNs(a.clock().min_rtt_ns()) : "-",
                  a.active_capture_id().empty() ? "-" : a.active_capture_id()});
      }
      out << response.agents_size() << " agents\n";
      if (t.rows() > 0) {
        out << "\n";
        t.Write(out);
      }
      break;
    }
  }
  return FlushOutput(out);
}

absl::StatusOr<CaptureResult> RunCapture(AggregatorClient& client, const CaptureOptions& options,
                                         std::ostream& out, std::ostream& err) {
  v1::StartCaptureRequest start;
  for (const std::string& h : options.hosts) start.add_host_names(h);
  for (const auto& [k, v] : options.selector) (*start.mutable_label_selector())[k] = v;
  for (const auto& [k, v] : options.labels) (*start.mutable_labels())[k] = v;
  start.set_duration_ms(
      static_cast<uint64_t>(std::max<int64_t>(1, options.duration_ns / 1'000'000)));
  start.set_delay_ms(static_cast<uint32_t>(options.delay_ns / 1'000'000));
  start.set_counter_interval_ms(options.counter_interval_ms);
  start.mutable_options()->set_host_tracer_level(options.host_tracer_level);
  v1::StartCaptureResponse started;
  RETURN_IF_ERROR(client.Call(&Stub::StartCapture, start, &started));

  const bool live = options.display.live && options.format == OutputFormat::kTable;
  if (!live) {
    err << FormatTimestampNs(client.clock().NowNs()) << " capture " << started.capture_id()
        << " of " << started.host_names_size() << " hosts starts at "
        << FormatTimestampNs(started.start_ns()) << "\n";
  }
  // The watch runs on its own thread; this one redraws the display ten times a second, so the
  // window's bar moves while the agents are silent.
  absl::Mutex mu;
  std::deque<v1::CaptureProgress> queue;
  bool finished = false;
  grpc::Status watch_status;
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::nanoseconds(options.delay_ns + options.duration_ns) +
                         std::chrono::minutes(10));
  std::thread watcher([&] {
    v1::WatchCaptureRequest w;
    w.set_capture_id(started.capture_id());
    auto reader = client.stub().WatchCapture(&watch_ctx, w);
    v1::CaptureProgress p;
    while (reader->Read(&p)) {
      absl::MutexLock lock(&mu);
      queue.push_back(p);
    }
    grpc::Status s = reader->Finish();
    absl::MutexLock lock(&mu);
    watch_status = s;
    finished = true;
  });
  std::vector<std::string> hosts(started.host_names().begin(), started.host_names().end());
  LiveView view(options.display, out, hosts, started.start_ns(), options.duration_ns);
  CaptureResult result;
  result.capture_id = started.capture_id();
  bool done = false;
  while (true) {
    std::deque<v1::CaptureProgress> batch;
    bool over;
    {
      absl::MutexLock lock(&mu);
      mu.AwaitWithTimeout(absl::Condition(
                              +[](bool* f) { return *f; }, &finished),
                          absl::Milliseconds(100));
      batch.swap(queue);
      over = finished;
    }
    for (const v1::CaptureProgress& p : batch) {
      if (live) {
        view.Update(p);
      } else {
        err << ProgressLine(p) << "\n";
      }
      if (p.done()) {
        done = true;
        result.status = p.status();
        result.summary = p.summary();
      }
    }
    if (live) view.Draw(client.clock().NowNs());
    if (over) break;
  }
  watcher.join();
  if (!done) {
    RETURN_IF_ERROR(client.Check(watch_status));
    return absl::UnavailableError("the capture's progress stream ended before the capture did");
  }
  if (live) out << "\n";

  v1::GetKernelStatsRequest stats;
  stats.set_capture_id(result.capture_id);
  stats.set_group_by(v1::KERNEL_GROUPING_KERNEL);
  stats.set_order(v1::KERNEL_ORDER_TOTAL_TIME);
  stats.set_top_n(static_cast<uint32_t>(std::max(options.top, 0)));
  v1::GetKernelStatsResponse top;
  if (result.status == v1::CAPTURE_STATUS_COMPLETE || result.status == v1::CAPTURE_STATUS_PARTIAL) {
    RETURN_IF_ERROR(client.Call(&Stub::GetKernelStats, stats, &top));
    result.top_kernels.assign(top.stats().begin(), top.stats().end());
  }
  return result;
}

void WriteCaptureResult(const CaptureResult& result, const CaptureOptions& options,
                        const json& extra, std::ostream& out) {
  std::vector<v1::HostCaptureResult> hosts(result.summary.hosts().begin(),
                                           result.summary.hosts().end());
  std::sort(hosts.begin(), hosts.end(),
            [](const auto& a, const auto& b) { return a.host_name() < b.host_name(); });
  switch (options.format) {
    case OutputFormat::kJson: {
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
        auto it = options.host_extras.find(h.host_name());
        if (it != options.host_extras.end()) o.update(it->second);
        hj.push_back(o);
      }
      json kj = json::array();
      for (const auto& k : result.top_kernels) {
        kj.push_back({{"name", k.kernel().op_name()},
                      {"category", k.kernel().category()},
                      {"count", k.count()},
                      {"total_ps", k.total_ps()},
                      {"p50_ps", k.p50_ps()},
                      {"p99_ps", k.p99_ps()}});
      }
      json o = {{"capture_id", result.capture_id},
                {"state", CaptureStatusName(result.status)},
                {"hosts", hj},
                {"top_kernels", kj}};
      o.update(extra);
      out << o.dump(2) << "\n";
      return;
    }
    case OutputFormat::kCsv:
      out << "capture,host,status,events,bytes,correction_ns,uncertainty_ns,"
             "probe_correction_ns,collectives_matched,error\n";
      for (const auto& h : hosts) {
        out << CsvField(result.capture_id) << "," << CsvField(h.host_name()) << ","
            << CaptureStatusName(h.status()) << "," << h.event_count() << "," << h.bytes_received()
            << "," << h.clock_offset_ns() << "," << h.clock_uncertainty_ns() << ","
            << h.probe_clock_offset_ns() << "," << h.collectives_matched() << ","
            << CsvField(h.error_message()) << "\n";
      }
      return;
    case OutputFormat::kTable:
      break;
  }
  uint64_t events = 0, bytes = 0;
  int ok = 0;
  for (const auto& h : hosts) {
    events += h.event_count();
    bytes += h.bytes_received();
    ok += h.status() == v1::CAPTURE_STATUS_COMPLETE;
  }
  out << "capture " << result.capture_id << " "
      << Paint(options.display, CaptureStatusName(result.status),
               result.status == v1::CAPTURE_STATUS_COMPLETE ? "32" : "31")
      << ": " << ok << "/" << hosts.size() << " hosts, " << events << " events, "
      << FormatBytes(bytes) << "\n\n";
  using Col = TextTable::Column;
  using A = TextTable::Align;
  TextTable t({Col{"HOST"}, Col{"STATUS"}, Col{"EVENTS", A::kRight}, Col{"BYTES", A::kRight},
               Col{"CLOCK CORRECTION", A::kRight}, Col{"+-", A::kRight},
               Col{"PROBES ONLY", A::kRight}, Col{"COLLECTIVES", A::kRight},
               Col{"NOTE", A::kLeft, 60}});
  for (const auto& h : hosts) {
    const bool good = h.status() == v1::CAPTURE_STATUS_COMPLETE;
    t.AddRow({h.host_name(), CaptureStatusName(h.status()), absl::StrCat(h.event_count()),
              FormatBytes(h.bytes_received()), good ? FormatSignedNs(h.clock_offset_ns()) : "-",
              good ? FormatSignedNs(h.clock_uncertainty_ns()) : "-",
              good ? FormatSignedNs(h.probe_clock_offset_ns()) : "-",
              good ? absl::StrCat(h.collectives_matched()) : "-",
              !h.error_message().empty() ? h.error_message() : absl::StrJoin(h.warnings(), "; ")});
  }
  t.Write(out);
  if (!result.top_kernels.empty()) {
    out << "\ntop kernels pod-wide\n";
    TextTable k({Col{"KERNEL", A::kLeft, 40}, Col{"CATEGORY", A::kLeft, 24},
                 Col{"COUNT", A::kRight}, Col{"TOTAL", A::kRight}, Col{"MEAN", A::kRight},
                 Col{"P99", A::kRight}, Col{"CHIPS", A::kRight}, Col{"VERDICT", A::kLeft, 24}});
    for (const auto& s : result.top_kernels) {
      k.AddRow({s.kernel().op_name(), s.kernel().category(), absl::StrCat(s.count()),
                FormatDurationPs(s.total_ps()), FormatDurationPs(std::llround(s.mean_ps())),
                FormatDurationPs(s.p99_ps()), absl::StrCat(s.chip_count()),
                s.insight().verdict().empty() ? "-" : s.insight().verdict()});
    }
    k.Write(out);
  }
}

absl::StatusOr<std::string> RunExport(AggregatorClient& client, const ExportOptions& options,
                                      std::ostream& err) {
  v1::ExportCaptureRequest request;
  request.set_capture_id(options.capture_id);
  const char* ext = ".pftrace";
  switch (options.kind) {
    case ExportKind::kPerfetto:
      request.set_format(v1::EXPORT_FORMAT_PERFETTO);
      break;
    case ExportKind::kChrome:
      request.set_format(v1::EXPORT_FORMAT_CHROME_JSON);
      ext = ".json";
      break;
    case ExportKind::kXprof:
      request.set_format(v1::EXPORT_FORMAT_XSPACE_DIR);
      ext = "";
      break;
  }
  const std::string path = options.path.empty() ? options.capture_id + ext : options.path;
  if (options.kind == ExportKind::kChrome) {
    // Viewers of JSON traces struggle past about a million events: say so before writing one.
    v1::GetKernelStatsRequest sr;
    sr.set_capture_id(options.capture_id);
    sr.set_group_by(v1::KERNEL_GROUPING_KERNEL);
    v1::GetKernelStatsResponse stats;
    RETURN_IF_ERROR(client.Call(&Stub::GetKernelStats, sr, &stats));
    uint64_t events = 0;
    for (const auto& s : stats.stats()) events += s.count();
    if (events > 1'000'000) {
      err << "podprof export: warning: " << events
          << " kernel events; Chrome JSON viewers struggle past about 1 M events, the "
             "perfetto format opens in ui.perfetto.dev at any size\n";
    }
  }
  // Every file goes to a temporary name first and is renamed when complete, so a failed
  // export leaves no half file behind.
  const std::string suffix = absl::StrCat(".partial-", getpid());
  std::ofstream file;
  std::string current;  // the file being written, relative to the export's root
  std::vector<std::string> written;
  absl::Status failure;
  auto target_of = [&](const std::string& rel) {
    return options.kind == ExportKind::kXprof ? (fs::path(path) / rel).string() : path;
  };
  auto finish_file = [&]() -> absl::Status {
    if (current.empty()) return absl::OkStatus();
    file.close();
    const std::string final_path = target_of(current);
    if (!file) return absl::DataLossError(absl::StrCat("writing ", final_path, " failed"));
    std::error_code ec;
    fs::rename(final_path + suffix, final_path, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", final_path, ": ", ec.message()));
    }
    written.push_back(final_path);
    current.clear();
    return absl::OkStatus();
  };
  grpc::ClientContext ctx;
  client.SetDeadline(ctx);
  auto reader = client.stub().ExportCapture(&ctx, request);
  v1::ExportChunk chunk;
  while (failure.ok() && reader->Read(&chunk)) {
    if (chunk.path() != current) {
      failure = finish_file();
      if (!failure.ok()) break;
      // The aggregator names the files; never let a name leave the export's directory.
      const fs::path rel(chunk.path());
      bool safe = !chunk.path().empty() && rel.is_relative();
      for (const auto& part : rel) safe = safe && part != "..";
      if (!safe) {
        failure = absl::DataLossError(
            absl::StrCat("the aggregator sent a bad file name \"", chunk.path(), "\""));
        break;
      }
      current = chunk.path();
      const std::string target = target_of(current);
      std::error_code ec;
      if (options.kind == ExportKind::kXprof) {
        fs::create_directories(fs::path(target).parent_path(), ec);
      }
      file.clear();
      file.open(target + suffix, std::ios::binary | std::ios::trunc);
      if (!file) failure = absl::InvalidArgumentError(absl::StrCat("cannot write ", target));
    }
    if (failure.ok()) {
      file.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    }
  }
  if (!failure.ok()) ctx.TryCancel();
  grpc::Status s = reader->Finish();
  if (failure.ok()) failure = client.Check(s);
  if (failure.ok()) failure = finish_file();
  if (!failure.ok()) {
    if (file.is_open()) file.close();
    std::error_code ec;
    if (!current.empty()) fs::remove(target_of(current) + suffix, ec);
    return failure;
  }
  if (written.empty()) return absl::NotFoundError("the capture has nothing to export");
  return path;
}

}  // namespace podprof::cli
