#include "sim/sim_main.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "podprof_version.h"
#include "sim/capture_files.h"
#include "sim/services.h"
#include "sim/sim_host.h"

namespace podprof::sim {
namespace {

constexpr int kExitBadFlags = 2;

int Fail(const std::string& message) {
  std::cerr << "podprof-simhost: " << message << "\n";
  return kExitBadFlags;
}

// Blocks SIGTERM and SIGINT in every thread (set before gRPC starts its threads) and waits
// for one of them here, so shutdown happens on the main thread.
int WaitForTermination(const sigset_t& signals) {
  int sig = 0;
  sigwait(&signals, &sig);
  return sig;
}

}  // namespace

absl::StatusOr<Straggler> ParseStraggler(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  Straggler s;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &s.host) ||
      !absl::SimpleAtoi(parts[1], &s.chip) || !absl::SimpleAtod(parts[2], &s.factor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--straggler \"", text, "\" is not host:chip:factor (e.g. 1:3:1.5)"));
  }
  return s;
}

absl::StatusOr<Throttle> ParseThrottle(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  Throttle t;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &t.host) ||
      !absl::SimpleAtoi(parts[1], &t.chip) || !absl::SimpleAtod(parts[2], &t.fraction) ||
      !(t.fraction >= 0 && t.fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--throttle \"", text,
                     "\" is not host:chip:fraction with 0 <= fraction < 1 (e.g. 1:2:0.3)"));
  }
  return t;
}

namespace {

// "10s" past `epoch_ns`, for the timed faults; `flag` and `text` name a bad value.
absl::StatusOr<int64_t> FaultInstant(const std::string& flag, const std::string& text,
                                     const std::string& at, int64_t epoch_ns) {
  absl::StatusOr<int64_t> offset = ParseDurationNs(at);
  if (!offset.ok() || *offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " \"", text, "\": \"", at, "\" is not a duration from the start (e.g. 10s)"));
  }
  return epoch_ns + *offset;
}

}  // namespace

absl::StatusOr<Straggler> ParseSlowdown(const std::string& text, int64_t epoch_ns) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  Straggler s;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[1], &s.host) ||
      !absl::SimpleAtoi(parts[2], &s.chip) || !absl::SimpleAtod(parts[3], &s.factor) ||
      !(s.factor > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--slowdown-at \"", text, "\" is not time:host:chip:factor (e.g. 10s:2:1:1.6)"));
  }
  ASSIGN_OR_RETURN(s.from_ns, FaultInstant("--slowdown-at", text, parts[0], epoch_ns));
  return s;
}

absl::StatusOr<Stall> ParseStall(const std::string& text, int64_t epoch_ns) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stall-at \"", text, "\" is not time or time:duration (e.g. 20s:5s)"));
  }
  Stall st;
  ASSIGN_OR_RETURN(st.from_ns, FaultInstant("--stall-at", text, parts[0], epoch_ns));
  if (parts.size() == 2) {
    absl::StatusOr<int64_t> length = ParseDurationNs(parts[1]);
    if (!length.ok() || *length <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--stall-at \"", text, "\": \"", parts[1], "\" is not a positive duration"));
    }
    st.until_ns = st.from_ns + *length;
  }
  return st;
}

absl::StatusOr<StepSkip> ParseDutyDrop(const std::string& text, int64_t epoch_ns) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  StepSkip k;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[1], &k.fraction) ||
      !(k.fraction >= 0 && k.fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--duty-drop-at \"", text,
                     "\" is not time:fraction with 0 <= fraction < 1 (e.g. 20s:0.3)"));
  }
  ASSIGN_OR_RETURN(k.from_ns, FaultInstant("--duty-drop-at", text, parts[0], epoch_ns));
  return k;
}

absl::StatusOr<DcnDelay> ParseDcnDelay(const std::string& text, int64_t epoch_ns) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  DcnDelay d;
  double us = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &d.slice) ||
      !absl::SimpleAtod(parts[2], &us) || !(us >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dcn-delay-at \"", text, "\" is not time:slice:microseconds (e.g. 10s:1:500)"));
  }
  d.extra_ns = static_cast<int64_t>(us * 1000);
  ASSIGN_OR_RETURN(d.from_ns, FaultInstant("--dcn-delay-at", text, parts[0], epoch_ns));
  return d;
}

absl::StatusOr<SlowSlice> ParseSlowSlice(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  SlowSlice s;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &s.slice) ||
      !absl::SimpleAtod(parts[1], &s.factor) || !(s.factor > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slow-slice \"", text, "\" is not slice:factor (e.g. 2:1.5)"));
  }
  return s;
}

absl::StatusOr<SlowSlice> ParseSlowSliceAt(const std::string& text, int64_t epoch_ns) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slow-slice-at \"", text, "\" is not time:slice:factor (e.g. 10s:2:1.5)"));
  }
  absl::StatusOr<SlowSlice> s = ParseSlowSlice(text.substr(colon + 1));
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slow-slice-at \"", text, "\" is not time:slice:factor (e.g. 10s:2:1.5)"));
  }
  ASSIGN_OR_RETURN(s->from_ns,
                   FaultInstant("--slow-slice-at", text, text.substr(0, colon), epoch_ns));
  return s;
}

// Each value of a repeatable flag, parsed by `parse` onto `out`; the first bad one's error.
template <typename T, typename Parse>
absl::Status ParseEach(const std::vector<std::string>& texts, Parse parse, std::vector<T>& out) {
  for (const std::string& text : texts) {
    ASSIGN_OR_RETURN(T value, parse(text));
    out.push_back(std::move(value));
  }
  return absl::OkStatus();
}

namespace {

// --write-captures: every host's capture of one window written to `dir`, then exit.
int WriteCapturesMode(const PodConfig& pod, const std::string& dir, const std::string& window_text,
                      int64_t true_start_ns, bool counters) {
  absl::StatusOr<int64_t> window = ParseDurationNs(window_text);
  if (!window.ok() || *window <= 0) {
    return Fail(absl::StrCat("--capture-window \"", window_text,
                             "\" is not a positive duration (e.g. 200ms)"));
  }
  CaptureFilesOptions files;
  files.dir = dir;
  files.true_start_ns = true_start_ns;
  files.duration_ns = *window;
  files.counters = counters;
  absl::StatusOr<std::vector<std::string>> written = WritePodCaptures(pod, files);
  if (!written.ok()) return Fail(std::string(written.status().message()));
  for (const std::string& path : *written) std::cout << path << "\n";
  return 0;
}

// Serves the profiler and the runtime metric service until SIGTERM or SIGINT, writing the
// ready file once both listen (with the workload's MEGASCALE_SLICE_ID when `slice` >= 0).
int Serve(const SimHostOptions& options, const std::string& bind, int profiler_port,
          int metrics_port, const std::string& ready_file, int slice) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  RealClock clock;
  absl::StatusOr<std::unique_ptr<SimHost>> host = SimHost::Create(options, clock);
  if (!host.ok()) return Fail(std::string(host.status().message()));

  ProfilerServiceImpl profiler(host->get());
  MetricServiceImpl metrics(host->get());
  int bound_profiler = 0, bound_metrics = 0;
  grpc::ServerBuilder profiler_builder, metrics_builder;
  // Two servers, as in a real workload: the profiler and libtpu's metrics are separate.
  profiler_builder.AddListeningPort(absl::StrCat(bind, ":", profiler_port),
                                    grpc::InsecureServerCredentials(), &bound_profiler);
  profiler_builder.RegisterService(&profiler);
  profiler_builder.SetMaxReceiveMessageSize(4 << 20);
  metrics_builder.AddListeningPort(absl::StrCat(bind, ":", metrics_port),
                                   grpc::InsecureServerCredentials(), &bound_metrics);
  metrics_builder.RegisterService(&metrics);
  std::unique_ptr<grpc::Server> profiler_server = profiler_builder.BuildAndStart();
  if (profiler_server == nullptr || bound_profiler == 0) {
    return Fail(absl::StrCat("cannot listen on ", bind, ":", profiler_port, " (profiler)"));
  }
  std::unique_ptr<grpc::Server> metrics_server = metrics_builder.BuildAndStart();
  if (metrics_server == nullptr || bound_metrics == 0) {
    return Fail(absl::StrCat("cannot listen on ", bind, ":", metrics_port, " (metrics)"));
  }
  PODPROF_LOG(INFO) << "simulated " << (*host)->model().generation().device_type << " host "
                    << options.host_name << " (" << (*host)->model().chips() << " chips, host "
                    << options.pod.host_index << " of " << options.pod.hosts << "): profiler on "
                    << bind << ":" << bound_profiler << ", metrics on " << bind << ":"
                    << bound_metrics;
  if (!ready_file.empty()) {
    nlohmann::json j = {{"profiler_port", bound_profiler},
                        {"metrics_port", bound_metrics},
                        {"pid", static_cast<int64_t>(getpid())}};
    // What a multi-slice workload's environment says of the host, for its agent to read.
    if (slice >= 0) j["environment"] = {{"MEGASCALE_SLICE_ID", std::to_string(slice)}};
    std::string tmp = ready_file + ".tmp";
    std::ofstream(tmp) << j.dump() << "\n";
    std::rename(tmp.c_str(), ready_file.c_str());
  }

  int sig = WaitForTermination(signals);
  PODPROF_LOG(INFO) << "signal " << sig << ": stopping";
  (*host)->Shutdown();
  // In-flight sessions were just stopped; give handlers 2 s to write their answers.
  const auto deadline = DeadlineAt(clock.NowNs(), 2'000'000'000);
  profiler_server->Shutdown(deadline);
  metrics_server->Shutdown(deadline);
  return 0;
}

}  // namespace

// Long: one declaration per flag, then each flag checked, in the order --help lists them.
int SimHostMain(int argc, char** argv) {
  CLI::App app{
      "podprof-simhost: a simulated TPU host. Serves tensorflow.ProfilerService (Profile writes "
      "a modelled XSpace) and tpu.monitoring.runtime.RuntimeMetricService, as a JAX/libtpu "
      "workload does."};
  app.name("podprof-simhost");
  app.set_version_flag("--version", std::string("podprof-simhost ") + kVersion);
  SimHostOptions options;
  int profiler_port = 9999, metrics_port = 8431;
  std::string bind = "127.0.0.1", clock_offset = "0", device_offset = "0", ready_file;
  std::vector<std::string> stragglers, throttles, slowdowns, stalls, drops;
  std::vector<std::string> dcn_delays, slow_slices, slow_slices_at;
  std::string write_captures, capture_window = "200ms";
  int64_t capture_start_ns = 0;
  int64_t fault_epoch_ns = 0;
  app.add_option("--profiler-port", profiler_port, "Port of the profiler service (0 = any)");
  app.add_option("--metrics-port", metrics_port, "Port of the runtime metric service (0 = any)");
  app.add_option("--bind", bind, "Address to listen on");
  app.add_option("--generation", options.pod.generation, "TPU generation: v4, v5e, v5p, v6e, v7x");
  app.add_option("--chips", options.pod.chips, "Chips on this host (default: the generation's)");
  app.add_option("--hosts", options.pod.hosts, "Hosts in the pod");
  app.add_option("--host-index", options.pod.host_index, "This host's index in the pod");
  app.add_option("--slices", options.pod.slices,
                 "Slices of a multi-slice job; the hosts split evenly, host index = slice x "
                 "hosts per slice + worker (sets --slice)");
  app.add_option("--pod-seed", options.pod.pod_seed, "Seed shared by every host of the pod");
  app.add_option("--straggler", stragglers, "A slow chip, host:chip:factor (repeatable)");
  app.add_option("--throttle", throttles,
                 "A throttled chip, host:chip:fraction of clocks skipped (repeatable)");
  app.add_option("--slowdown-at", slowdowns,
                 "A chip that turns slow at a time, T:host:chip:factor, e.g. 10s:2:1:1.6 "
                 "(repeatable)");
  app.add_option("--stall-at", stalls,
                 "The job stops issuing steps at T (or for a while: T:duration), e.g. 20s "
                 "(repeatable)");
  app.add_option("--duty-drop-at", drops,
                 "From T on, a fraction of the steps is not issued (duty cycle falls), "
                 "T:fraction, e.g. 20s:0.3 (repeatable)");
  app.add_option("--dcn-delay-at", dcn_delays,
                 "From T on, the DCN data a slice sends arrives late, T:slice:us, e.g. "
                 "10s:1:500 (repeatable)");
  app.add_option("--slow-slice", slow_slices,
                 "A slice whose chips compute slower, slice:factor, e.g. 2:1.5 (repeatable)");
  app.add_option("--slow-slice-at", slow_slices_at,
                 "A slice that turns slow at a time, T:slice:factor, e.g. 10s:2:1.5 "
                 "(repeatable)");
  app.add_option("--write-captures", write_captures,
                 "Write every host's capture of one window to DIR/<host>.xplane.pb (and "
                 "DIR/truth.json), then exit, instead of serving");
  app.add_option("--capture-window", capture_window,
                 "With --write-captures: the window's length, e.g. 200ms");
  app.add_option("--capture-start-ns", capture_start_ns,
                 "With --write-captures: the window's true start, ns since the Unix epoch "
                 "(default: the fault epoch)");
  app.add_option("--continuous-overhead", options.continuous_overhead,
                 "Steps run this fraction longer while continuous profiling is on, as the "
                 "metric service reports them, e.g. 0.2");
  app.add_option("--fault-epoch-ns", fault_epoch_ns,
                 "True time (ns since the Unix epoch) the timed faults count from; default: "
                 "start-up. Give every host of the pod the same");
  app.add_flag("--counters,!--no-counters", options.counters,
               "Emit _counters_ hardware counters: unit busy and stall fractions, energy "
               "(default on)");
  app.add_option("--clock-offset", clock_offset, "Host clock error, e.g. -37.5ms");
  app.add_option("--clock-drift-ppm", options.clock_drift_ppm, "Host clock drift, ppm");
  app.add_option("--clock-epoch-ns", options.clock_epoch_ns,
                 "True time (ns since the Unix epoch) the drift counts from; default: start-up. "
                 "Give the host's agent the same");
  app.add_option("--device-clock-offset", device_offset,
                 "Extra error of device timestamps only, e.g. 120us");
  int slice = -1;
  app.add_option("--slice", slice,
                 "This host's slice of a multi-slice job: its ready file's \"environment\" then "
                 "holds MEGASCALE_SLICE_ID, for the host's agent (podprof's pod launcher starts "
                 "the agent with it)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--host-name", options.host_name, "Host name written into captures");
  app.add_option("--truth-file", options.truth_file, "Write the ground truth here as JSON");
  app.add_option("--replay", options.replay_path, "Answer Profile with this recorded capture");
  app.add_option("--ready-file", ready_file,
                 "Once listening, write {\"profiler_port\", \"metrics_port\", \"pid\"} here "
                 "(and \"environment\" with --slice)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadFlags;
  }
  absl::StatusOr<int64_t> offset = ParseDurationNs(clock_offset);
  if (!offset.ok()) return Fail(absl::StrCat("--clock-offset: ", offset.status().message()));
  absl::StatusOr<int64_t> dev = ParseDurationNs(device_offset);
  if (!dev.ok()) return Fail(absl::StrCat("--device-clock-offset: ", dev.status().message()));
  options.clock_offset_ns = *offset;
  options.device_clock_offset_ns = *dev;
  if (std::abs(options.clock_drift_ppm) > 1e5) {
    return Fail(absl::StrCat("--clock-drift-ppm ", options.clock_drift_ppm, " is not plausible"));
  }
  if (fault_epoch_ns == 0) fault_epoch_ns = RealClock().NowNs();
  const auto at_epoch = [fault_epoch_ns](auto parse) {
    return [parse, fault_epoch_ns](const std::string& text) { return parse(text, fault_epoch_ns); };
  };
  PodConfig& pod = options.pod;
  for (const absl::Status& s :
       {ParseEach(stragglers, ParseStraggler, pod.stragglers),
        ParseEach(throttles, ParseThrottle, pod.throttles),
        ParseEach(slowdowns, at_epoch(ParseSlowdown), pod.stragglers),
        ParseEach(stalls, at_epoch(ParseStall), pod.stalls),
        ParseEach(drops, at_epoch(ParseDutyDrop), pod.skips),
        ParseEach(dcn_delays, at_epoch(ParseDcnDelay), pod.dcn_delays),
        ParseEach(slow_slices, ParseSlowSlice, pod.slow_slices),
        ParseEach(slow_slices_at, at_epoch(ParseSlowSliceAt), pod.slow_slices)}) {
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  if (pod.slices > 1 && pod.slices <= pod.hosts && pod.hosts % pod.slices == 0) {
    // The workload's environment names the host's slice: it follows from the host index.
    const int own = pod.host_index / (pod.hosts / pod.slices);
    if (slice >= 0 && slice != own) {
      return Fail(absl::StrCat("--slice ", slice, " disagrees with --slices ", pod.slices,
                               ": host ", pod.host_index, " of ", pod.hosts, " is in slice ", own));
    }
    slice = own;
  }
  if (!write_captures.empty()) {
    return WriteCapturesMode(pod, write_captures, capture_window,
                             capture_start_ns > 0 ? capture_start_ns : fault_epoch_ns,
                             options.counters);
  }
  if (options.host_name.empty())
    options.host_name = absl::StrCat("simhost-", options.pod.host_index);

  return Serve(options, bind, profiler_port, metrics_port, ready_file, slice);
}

}  // namespace podprof::sim
