#include "cli/capture_command.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "cli/exit_codes.h"
#include "cli/report.h"
#include "common/checked.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "kernelprof/options.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;
using nlohmann::json;

class CaptureCommand : public AggregatorCommand {
 public:
  // `snapshot`: `podprof snapshot`, the window before now from the agents' flight recorders.
  CaptureCommand(CLI::App* cmd, CliContext& context, bool snapshot = false)
      : AggregatorCommand(cmd), snapshot_(snapshot) {
    AddAggregatorFlags(cmd, context);
    CLI::Option* hosts =
        cmd->add_option("--hosts", options_.hosts, "Hosts to capture (comma-separated)")
            ->delimiter(',');
    CLI::Option* selector =
        cmd->add_option("--selector", selector_, "Hosts with this label, key=value; repeatable")
            ->allow_extra_args(false)
            ->excludes(hosts);
    CLI::Option* slices =
        cmd->add_option("--slices", options_.slices,
                        "Hosts in these slices of a multi-slice job (comma-separated, as "
                        "`podprof agents` shows them); with --hosts or --selector, both must hold")
            ->delimiter(',')
            ->check(CLI::NonNegativeNumber);
    cmd->add_flag("--all", all_, "Every online agent (the default)")
        ->excludes(hosts)
        ->excludes(selector)
        ->excludes(slices);
    if (snapshot_) {
      AddSnapshotFlags(cmd);
    } else {
      cmd->add_option("--duration", options_.duration_ns, "Length of the window, e.g. 2s")
          ->transform(PositiveDuration())
          ->option_text("DURATION (default 2s)");
      delay_ = cmd->add_option("--delay", delay_ns_, "Start the window this much later, e.g. 30s")
                   ->transform(PositiveDuration())
                   ->option_text("DURATION");
    }
    cmd->add_option("--host-tracer-level", options_.host_tracer_level,
                    "Host TraceMe verbosity 0-3 (default: the agent's, 2)");
    metric_interval_ =
        cmd->add_option("--metric-interval", metric_interval_ns_,
                        "Runtime metric sampling interval, e.g. 50ms (default: the agent's)")
            ->transform(PositiveDuration())
            ->option_text("DURATION");
    AddKernelProfilingFlags(cmd);
    cmd->add_option("--top", options_.top, "Kernels listed at the end (default 10)");
    cmd->add_option("--label", labels_, "Label stored with the capture, key=value; repeatable")
        ->allow_extra_args(false);
    if (snapshot_) return;  // its own footer
    cmd->footer(
        "Examples:\n  podprof capture --duration 2s\n"
        "  podprof capture --hosts tpu-0,tpu-1 --delay 30s --label run=baseline\n"
        "  podprof capture --selector job=llm --format json > capture.json\n"
        "  podprof capture --slices 0,2 --duration 1s\n"
        "  podprof capture --kernel-profiling --counters tc:10,11,56 --counter-interval 1us\n"
        "Exit status: 0 complete, 1 partial (some hosts failed) or failed, 2 bad usage, 3 "
        "aggregator unreachable, 4 not allowed.");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    absl::StatusOr<LabelMap> selector = ParseLabels(selector_);
    if (!selector.ok()) return Failed(err, selector.status(), kExitUsage);
    absl::StatusOr<LabelMap> labels = ParseLabels(labels_);
    if (!labels.ok()) return Failed(err, labels.status(), kExitUsage);
    options_.selector = *selector;
    options_.labels = *labels;
    if (absl::Status s = ApplyProfilingFlags(); !s.ok()) return Failed(err, s, kExitUsage);
    if (delay_ != nullptr && delay_->count() > 0) options_.delay_ns = delay_ns_;
    if (snapshot_) {
      options_.snapshot = true;
      // A --label trigger=... names the trigger, as before the cause was typed.
      auto trigger = options_.labels.find("trigger");
      options_.cause.set_trigger(trigger != options_.labels.end() ? trigger->second : "manual");
      options_.cause.set_reason(reason_);
    }
    options_.format = context.format;
    options_.display = Display::ForStdout(context.no_color);
    absl::StatusOr<CaptureResult> result = RunCapture(client, options_, out, err);
    if (!result.ok()) return Failed(err, result.status(), kExitBadInput);
    WriteCaptureResult(*result, options_, json::object(), out);
    if (absl::Status s = FlushOutput(out); !s.ok()) return Failed(err, s, kExitBadInput);
    return result->status == v1::CAPTURE_STATUS_COMPLETE ? 0 : kExitPartial;
  }

 private:
  void AddSnapshotFlags(CLI::App* cmd) {
    options_.duration_ns = 5'000'000'000;
    cmd->add_option("--window", options_.duration_ns,
                    "How far back from now, e.g. 5s (at most the agents' [recorder] window)")
        ->transform(PositiveDuration())
        ->option_text("DURATION (default 5s)");
    cmd->add_option("--reason", reason_, "Why, stored as the snapshot's label reason");
    cmd->footer(
        "Examples:\n  podprof snapshot --reason \"step 1042 took 3x\"\n"
        "  podprof snapshot --window 2s --hosts tpu-0,tpu-1 --format json\n"
        "When every chosen agent has its flight recorder armed ([recorder] enabled), each "
        "streams the window before the request from its ring (window before-request). When any "
        "has none, the aggregator's [snapshots] without_recorder decides: capture-after (the "
        "default) captures the whole pod from the request on and stores and labels it as that "
        "window (window after-request, said above the table); refuse fails, naming the hosts. "
        "Stored as a capture with source snapshot and the labels trigger=manual, reason and "
        "window.\n"
        "Exit status: 0 complete, 1 partial or failed, 2 bad usage, 3 aggregator unreachable, "
        "4 not allowed.");
  }

  // The flags of kernel profiling (issue #17) and the device and python tracers. Their values
  // are checked by the aggregator (kernelprof::ValidateCaptureOptions); here only their syntax.
  void AddKernelProfilingFlags(CLI::App* cmd) {
    cmd->add_flag("--kernel-profiling", kernel_profiling_,
                  "Sample TPU performance counters in kernels (XProf kernel profiling)");
    cmd->add_option("--counter-sets", counter_sets_,
                    "XProf counter sets to sample (tpu_perf_counter_sets, comma-separated): "
                    "TC_COMPUTATION, TC_MEMORY, SC_ACTIVITY, SC_MEMORY, HBM")
        ->delimiter(',');
    counter_interval_ =
        cmd->add_option("--counter-interval", counter_interval_ns_,
                        "Counter sampling interval, whole us, at least 1us (default: the "
                        "workload's, 10ms)")
            ->transform(PositiveDuration())
            ->option_text("DURATION");
    cmd->add_option("--counters", counters_,
                    "Counters of one component to sample, COMPONENT:INDEX,...; repeatable; "
                    "components tc, scs, sctc, sctd, cmn, icr")
        ->allow_extra_args(false)
        ->option_text("COMPONENT:INDEX,...");
    cmd->add_flag("--external-trigger", external_trigger_,
                  "Sample counters on external events (custom calls) instead of an interval");
    scaling_ = cmd->add_option("--counter-scaling", scaling_value_,
                               "Bits each counter value is shifted right by (default 0)");
    size_bits_ = cmd->add_option("--counter-size-bits", size_bits_value_,
                                 "Packed counter width 2^(n+3) bits, n 0-3 (default 3: 64 bits)");
    cmd->add_option("--profiler-option", profiler_options_,
                    "Extra profiler option passed to every workload, KEY=VALUE; repeatable")
        ->allow_extra_args(false);
    device_level_ = cmd->add_option("--device-tracer-level", device_level_value_,
                                    "Device tracing 0 off, 1 on (default 1)");
    cmd->add_option("--python-tracer-level", python_level_value_,
                    "Python function tracing 0 off, 1 on (default 0)");
  }

  absl::Status ApplyProfilingFlags() {
    v1::CaptureOptions& p = options_.profiling;
    p.set_kernel_profiling(kernel_profiling_);
    p.set_external_trigger(external_trigger_);
    for (const std::string& s : counter_sets_) p.add_counter_sets(s);
    if (counter_interval_->count() > 0) {
      p.set_counter_interval_ns(static_cast<uint64_t>(counter_interval_ns_));
    }
    for (const std::string& c : counters_) RETURN_IF_ERROR(kernelprof::ParseCountersFlag(c, &p));
    for (const std::string& o : profiler_options_) {
      RETURN_IF_ERROR(kernelprof::ParseProfilerOptionFlag(o, &p));
    }
    if (scaling_->count() > 0) p.set_counter_scaling(scaling_value_);
    if (size_bits_->count() > 0) p.set_counter_size_bits(size_bits_value_);
    if (device_level_->count() > 0) p.set_device_tracer_level(device_level_value_);
    p.set_python_tracer_level(python_level_value_);
    if (metric_interval_->count() > 0) {
      const int64_t ms = metric_interval_ns_ / 1'000'000;
      if (ms < 1 || ms > UINT32_MAX || metric_interval_ns_ % 1'000'000 != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--metric-interval ", FormatDurationPs(metric_interval_ns_ * 1000),
                         " is not a whole number of milliseconds, at least 1ms"));
      }
      options_.metric_interval_ms = static_cast<uint32_t>(ms);
    }
    return absl::OkStatus();
  }

  CaptureOptions options_;
  std::vector<std::string> selector_, labels_;
  bool all_ = false;  // the default; the flag only makes it explicit
  int64_t delay_ns_ = 0;
  CLI::Option* delay_ = nullptr;
  // Flags whose "given" matters, and the values they bind.
  CLI::Option *metric_interval_ = nullptr, *counter_interval_ = nullptr, *scaling_ = nullptr,
              *size_bits_ = nullptr, *device_level_ = nullptr;
  int64_t metric_interval_ns_ = 0, counter_interval_ns_ = 0;
  uint32_t scaling_value_ = 0, size_bits_value_ = 0, device_level_value_ = 0,
           python_level_value_ = 0;
  bool kernel_profiling_ = false, external_trigger_ = false;
  std::vector<std::string> counter_sets_, counters_, profiler_options_;
  const bool snapshot_;
  std::string reason_;
};

std::string Bar(double fraction, int width) {
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width + 0.5);
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
}

// What the live display knows of one host.
struct HostView {
  std::string stage = "waiting";
  uint64_t events = 0, bytes = 0;
  bool failed = false;
  std::string error;
};

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
    // What the aggregator and its agents say is escaped for the terminal as it arrives.
    HostView& h = hosts_[EscapeForTerminal(p.host().host_name())];
    if (!p.detail().empty()) h.stage = EscapeForTerminal(p.detail());
    h.events = std::max<uint64_t>(h.events, p.host().event_count());
    h.bytes = std::max<uint64_t>(h.bytes, p.host().bytes_received());
    h.failed = p.host().status() == v1::CAPTURE_STATUS_FAILED;
    h.error = OneLine(p.host().error_message());
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
      std::string line = absl::StrFormat("  %-16s %s", name, d_.Paint(stage, StageColor(h)));
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
  return EscapeForTerminal(line);  // host names, details and errors are the aggregator's
}

// A capture past its timeout: cancelled, so that its hosts stop working for nobody, and an
// error naming the hosts that had not finished and what they were doing.
absl::Status TimedOut(AggregatorClient& client, const std::string& capture_id, int64_t after_ns,
                      const std::map<std::string, std::string>& unfinished) {
  v1::CancelCaptureRequest cancel;
  cancel.set_capture_id(capture_id);
  v1::CancelCaptureResponse cancelled;
  const absl::Status c = client.Call(&Stub::CancelCapture, cancel, &cancelled);
  std::vector<std::string> hosts;
  for (const auto& [host, stage] : unfinished)
    hosts.push_back(absl::StrCat(host, " (", stage, ")"));
  return absl::DeadlineExceededError(absl::StrCat(
      "capture ", capture_id, " did not finish within ", FormatDurationPs(after_ns * 1000),
      " after its window", hosts.empty() ? "" : ": not done: ", absl::StrJoin(hosts, ", "),
      c.ok() ? "; it was cancelled" : absl::StrCat("; cancelling it failed: ", c.message())));
}

// Follows a started capture's progress to its end: the watch runs on its own thread while
// this one redraws the display ten times a second, so that the window's bar moves while the
// agents are silent. Fills `result`'s status and summary.
// Long: the watching thread and the redrawing loop share their state; split, it would be passed
// around.
absl::Status WatchCapture(AggregatorClient& client, const v1::StartCaptureResponse& started,
                          const CaptureOptions& options, std::ostream& out, std::ostream& err,
                          CaptureResult& result) {
  const bool live = options.display.live && options.format == OutputFormat::kTable;
  absl::Mutex mu;
  std::deque<v1::CaptureProgress> queue;
  bool finished = false;
  grpc::Status watch_status;
  grpc::ClientContext watch_ctx;
  // The window, then (by default) ten minutes for the hosts to stream and the aggregator to
  // store. Saturated: a window too long to add up has no deadline worth the name.
  const int64_t after_ns =
      options.timeout_ns > 0 ? options.timeout_ns : int64_t{600} * 1'000'000'000;
  // From the window's start as the aggregator set it (it leads the request by the time the
  // hosts need to be told), else from the delay asked for.
  const int64_t now = client.clock().NowNs();
  std::optional<int64_t> deadline = started.start_ns() > now
                                        ? std::optional<int64_t>(started.start_ns())
                                        : CheckedAdd(now, options.delay_ns);
  if (deadline) deadline = CheckedAdd(*deadline, options.duration_ns);
  if (deadline) deadline = CheckedAdd(*deadline, after_ns);
  const int64_t deadline_ns = deadline.value_or(std::numeric_limits<int64_t>::max());
  watch_ctx.set_deadline(std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(deadline_ns))));
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
  // Each host's last stage, until it is done: what a timeout reports.
  std::map<std::string, std::string> unfinished;
  for (const std::string& h : hosts) unfinished[h] = "waiting";
  bool done = false;
  for (bool over = false; !over;) {
    std::deque<v1::CaptureProgress> batch;
    {
      absl::MutexLock lock(&mu);
      mu.AwaitWithTimeout(absl::Condition(&finished), absl::Milliseconds(100));
      batch.swap(queue);
      over = finished;
    }
    for (const v1::CaptureProgress& p : batch) {
      if (p.has_host()) {
        const v1::CaptureStatus hs = p.host().status();
        if (hs == v1::CAPTURE_STATUS_COMPLETE || hs == v1::CAPTURE_STATUS_FAILED) {
          unfinished.erase(p.host().host_name());
        } else if (!p.detail().empty() && unfinished.count(p.host().host_name()) > 0) {
          unfinished[p.host().host_name()] = p.detail();
        }
      }
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
  }
  watcher.join();
  if (!done && watch_status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    if (live) out << "\n";
    return TimedOut(client, started.capture_id(), after_ns, unfinished);
  }
  if (!done) {
    RETURN_IF_ERROR(client.Check(watch_status));
    return absl::UnavailableError("the capture's progress stream ended before the capture did");
  }
  if (live) out << "\n";
  return absl::OkStatus();
}

// InvalidArgument naming --delay when it does not fit the request's 32-bit delay_ms (about
// 49.7 days): it was truncated, so --delay 50d asked for under a day.
absl::StatusOr<v1::StartCaptureRequest> StartRequest(const CaptureOptions& options) {
  constexpr int64_t kMaxDelayMs = std::numeric_limits<uint32_t>::max();
  if (options.delay_ns < 0 || options.delay_ns / 1'000'000 > kMaxDelayMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--delay must be 0..", FormatDurationPs(kMaxDelayMs * 1'000'000'000),
                     " (delay_ms is 32-bit), got ", options.delay_ns / 1'000'000, " ms"));
  }
  v1::StartCaptureRequest start;
  for (const std::string& h : options.hosts) start.add_host_names(h);
  for (const int slice : options.slices) start.add_slices(slice);
  AddLabels(options.selector, start.mutable_label_selector());
  AddLabels(options.labels, start.mutable_labels());
  start.set_duration_ms(
      static_cast<uint64_t>(std::max<int64_t>(1, options.duration_ns / 1'000'000)));
  start.set_delay_ms(static_cast<uint32_t>(options.delay_ns / 1'000'000));
  start.set_counter_interval_ms(options.metric_interval_ms);
  start.set_snapshot(options.snapshot);
  if (options.snapshot && !options.cause.trigger().empty()) *start.mutable_cause() = options.cause;
  *start.mutable_options() = options.profiling;
  start.mutable_options()->set_host_tracer_level(options.host_tracer_level);
  return start;
}

}  // namespace

std::unique_ptr<Command> AddCaptureCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<CaptureCommand>(
      app.add_subcommand("capture",
                         "Capture every chosen host at one instant and store the merged timeline"),
      context);
}

std::unique_ptr<Command> AddSnapshotCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<CaptureCommand>(
      app.add_subcommand("snapshot",
                         "Store the last seconds of every chosen host at once, from the agents' "
                         "flight recorders"),
      context, /*snapshot=*/true);
}

absl::StatusOr<CaptureResult> RunCapture(AggregatorClient& client, const CaptureOptions& options,
                                         std::ostream& out, std::ostream& err) {
  v1::StartCaptureResponse started;
  ASSIGN_OR_RETURN(const v1::StartCaptureRequest request, StartRequest(options));
  RETURN_IF_ERROR(client.Call(&Stub::StartCapture, request, &started));
  if (!options.display.live || options.format != OutputFormat::kTable) {
    err << FormatTimestampNs(client.clock().NowNs()) << " capture " << started.capture_id()
        << " of " << started.host_names_size() << " hosts starts at "
        << FormatTimestampNs(started.start_ns()) << "\n";
  }
  CaptureResult result;
  result.capture_id = started.capture_id();
  RETURN_IF_ERROR(WatchCapture(client, started, options, out, err, result));
  if (result.status == v1::CAPTURE_STATUS_COMPLETE || result.status == v1::CAPTURE_STATUS_PARTIAL) {
    v1::GetKernelStatsRequest stats;
    stats.set_capture_id(result.capture_id);
    stats.set_group_by(v1::KERNEL_GROUPING_KERNEL);
    stats.set_order(v1::KERNEL_ORDER_TOTAL_TIME);
    stats.set_top_n(static_cast<uint32_t>(std::max(options.top, 0)));
    v1::GetKernelStatsResponse top;
    RETURN_IF_ERROR(client.Call(&Stub::GetKernelStats, stats, &top));
    result.top_kernels = std::move(*top.mutable_stats());
  }
  return result;
}

}  // namespace podprof::cli
