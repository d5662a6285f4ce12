// Clock alignment of a simulated pod against its ground truth, in one run: N hosts (default 8),
// each a podprof-simhost and a podprof-agent sharing a wrong clock (offsets up to +-50 ms, drift
// up to +-50 ppm; device offsets up to +-200 us on every other host), one podprof-aggregator, one
// pod-wide capture. Prints each host's correction error for no correction, probes only, and
// probes refined by collectives (p50/p99/max), the spread of every collective's merged end
// times, the start skew, and last `alignment_max_error_us=<x>`.
//
//   bench_alignment [--hosts 8] [--duration-ms 1000] [--seed 1]
// Before the last line, `agent_analysis_cpu_s_per_host_s=<x>` (what analysing its own host adds
// to an agent, per second of capture) and `ingest_over_receive=<x>`: the aggregator's events
// per CPU-second over those of only receiving every host's stream over gRPC at once (how far
// ingest is from the floor).
#include <grpcpp/grpcpp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/host_summary.h"
#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "harness/capture_watch.h"
#include "harness/wait.h"
#include "launch/pod_launcher.h"
#include "nlohmann/json.hpp"
#include "proto/podprof_agent.grpc.pb.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "storage/store.h"
#include "stream/capture_decoder.h"
#include "trace/columns.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;

// The machine's own floor for start skew: `n` bare processes, pinned like the simhosts, each
// sleeping until one absolute instant and reading the clock. Returns the spread of their
// wake-ups, ns. On a machine with fewer cores than hosts the wake-ups queue, and no profiler
// can start its hosts closer together than this.
int64_t WakeFloorNs(int n, int ncpu) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t at = (int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec) + 300'000'000;
  // Forked without exec: a bare process, nothing of a program's start-up in its wake-up, so not
  // a common/subprocess child (that runs a program). It only makes async-signal-safe calls,
  // lives well under a second, and dies with the benchmark like every child.
  std::vector<pid_t> sleepers;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid > 0) sleepers.push_back(pid);
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(i % ncpu, &set);
      sched_setaffinity(0, sizeof(set), &set);
      timespec ts{static_cast<time_t>(at / 1'000'000'000), static_cast<long>(at % 1'000'000'000)};
      clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr);
      timespec woke;
      clock_gettime(CLOCK_REALTIME, &woke);
      const int64_t t = int64_t{woke.tv_sec} * 1'000'000'000 + woke.tv_nsec;
      usleep(100'000);  // report after the others have woken, not in their way
      if (write(fds[1], &t, sizeof(t)) != sizeof(t)) _exit(1);
      _exit(0);
    }
  }
  close(fds[1]);
  int64_t lo = INT64_MAX, hi = INT64_MIN, t;
  while (read(fds[0], &t, sizeof(t)) == sizeof(t)) {
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  close(fds[0]);
  for (pid_t pid : sleepers) waitpid(pid, nullptr, 0);
  return hi >= lo ? hi - lo : -1;
}

double ProcessCpuS() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

// Events per CPU-second of this process for the two references ingest is measured against.
struct IngestReferences {
  // Every host's stream received over gRPC at once (HTTP/2 over loopback, each chunk parsed by
  // gRPC's codec) and nothing done with it: the floor under any aggregator that receives them.
  double receive = 0;
  // The same chunks, already in memory, only decoded: parsed, and their events and counter
  // samples unpacked from their column encoding (trace/columns.h), as any reader of them must.
  double decode = 0;
  // The analysis an agent adds to a capture (analysis::SummariseHost over the host's decoded
  // capture, its counters attributed), CPU-seconds per second of capture.
  double analysis_s_per_host_s = -1;
};

// The events of a stream's block, in columns (an analysing agent's) or fields.
uint64_t BlockEvents(const v1::EventBlock& e) {
  if (e.columns().empty()) return static_cast<uint64_t>(e.duration_ps_size());
  absl::StatusOr<uint64_t> n = trace::EncodedCount(e.columns(), "timeline block");
  return n.ok() ? *n : 0;
}

// CPU-seconds of analysing the host of `chunks` (a whole stream) as an agent does, or -1.
double AnalysisCpuS(const std::vector<v1::CaptureChunk>& chunks) {
  stream::CaptureDecoder decoder;
  for (const v1::CaptureChunk& c : chunks) {
    if (!decoder.Add(c).ok()) return -1;
  }
  trace::HostCapture& capture = decoder.capture();
  if (!trace::DecodeEncodedSeries(&capture).ok() || !trace::DecodeEncodedBlocks(&capture).ok()) {
    return -1;
  }
  const double t0 = ProcessCpuS();
  const analysis::HostSummary summary = analysis::SummariseHost(capture);
  const double s = ProcessCpuS() - t0;
  return summary.stats.empty() ? -1 : s;
}

// One agent's whole Capture stream, every chunk kept as an aggregator keeps them until the
// host is merged, or empty if the stream failed.
std::vector<v1::CaptureChunk> ReceiveStream(v1::Agent::Stub& stub, int duration_ms) {
  grpc::ClientContext ctx;
  v1::CaptureRequest req;
  req.set_capture_id("bench-receive-baseline");
  req.set_duration_ms(duration_ms);
  // The stream an aggregator gets: the agent's summary in it.
  req.set_analysis_version(analysis::kAnalysisVersion);
  std::vector<v1::CaptureChunk> received;
  auto reader = stub.Capture(&ctx, req);
  v1::CaptureChunk chunk;
  while (reader->Read(&chunk)) received.push_back(std::move(chunk));
  if (!reader->Finish().ok()) received.clear();
  return received;
}

// Every agent's chunks for a window like the pod capture's, taken straight from their Capture
// streams at once, a thread each as the aggregator's streams run (timed: `receive`, this
// process's CPU over the whole, as the aggregator's is timed over its capture); then the first
// host's chunks decoded until `events` events have been (timed: `decode`).
IngestReferences MeasureReferences(const std::vector<int>& agent_ports, int duration_ms,
                                   uint64_t events) {
  std::vector<std::unique_ptr<v1::Agent::Stub>> stubs;
  for (int port : agent_ports) {
    auto channel =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    // Connected before the clock starts: the aggregator's channels are long open.
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      return {};
    }
    stubs.push_back(v1::Agent::NewStub(channel));
  }
  std::vector<std::vector<v1::CaptureChunk>> streams(stubs.size());
  const double t0 = ProcessCpuS();
  {
    std::vector<std::thread> readers;
    for (size_t i = 0; i < stubs.size(); ++i) {
      readers.emplace_back([&, i] { streams[i] = ReceiveStream(*stubs[i], duration_ms); });
    }
    for (std::thread& t : readers) t.join();
  }
  const double receive_s = ProcessCpuS() - t0;
  uint64_t received_events = 0;
  for (const auto& stream : streams) {
    if (stream.empty()) return {};
    for (const v1::CaptureChunk& c : stream) received_events += BlockEvents(c.event_block());
  }
  const std::vector<v1::CaptureChunk>& received = streams[0];
  std::vector<std::string> chunks;
  uint64_t per_pass = 0, bytes = 0, samples = 0;
  for (const v1::CaptureChunk& c : received) {
    chunks.push_back(c.SerializeAsString());
    bytes += chunks.back().size();
    per_pass += BlockEvents(c.event_block());
    if (c.has_counter_series()) {
      samples += trace::EncodedCount(c.counter_series().samples(), "counter series").value_or(0);
    }
  }
  std::printf(
      "decode reference: one host's stream of %zu chunks, %.1f MB, %llu events, %llu "
      "counter samples\n",
      chunks.size(), bytes / 1e6, static_cast<unsigned long long>(per_pass),
      static_cast<unsigned long long>(samples));
  if (per_pass == 0) return {};
  IngestReferences r;
  r.receive = receive_s > 0 ? received_events / receive_s : 0;
  if (const double a = AnalysisCpuS(received); a >= 0) {
    r.analysis_s_per_host_s = a / (duration_ms / 1000.0);
  }
  const double decode_t0 = ProcessCpuS();
  uint64_t decoded = 0;
  while (decoded < events) {
    // A chip's series decode together, as the aggregator's do: some take their times from
    // another of the chip's.
    trace::HostCapture series;
    for (const std::string& c : chunks) {
      v1::CaptureChunk parsed;
      if (!parsed.ParseFromString(c)) return {};
      decoded += parsed.event_block().duration_ps_size();
      if (!parsed.event_block().columns().empty()) {
        trace::EventBlock b;
        if (!trace::DecodeTimeline(parsed.event_block().columns(), &b).ok()) return {};
        decoded += b.size();
      }
      if (!parsed.counter_series().samples().empty()) {
        trace::CounterSeries s;
        s.chip = parsed.counter_series().chip_ordinal();
        s.name = parsed.counter_series().name();
        s.encoded = std::move(*parsed.mutable_counter_series()->mutable_samples());
        series.counters.push_back(std::move(s));
      }
    }
    if (!trace::DecodeEncodedSeries(&series).ok()) return {};
  }
  const double decode_s = ProcessCpuS() - decode_t0;
  r.decode = decode_s > 0 ? decoded / decode_s : 0;
  return r;
}

// The merged timelines' events (into `events`) and, per collective, how far apart its ends on
// every chip of every host lie, us.
std::vector<double> CollectiveSpreads(const std::string& dir, const std::string& capture_id,
                                      uint64_t* events) {
  auto store = storage::Store::Open(dir + "/podprof.db");
  std::map<uint64_t, std::pair<int64_t, int64_t>> range;
  if (store.ok()) {
    auto blocks = (*store)->captures().Timelines(capture_id);
    if (blocks.ok()) {
      for (const auto& b : *blocks) {
        *events += b.size();
        if (b.line != "XLA Ops") continue;
        for (size_t i = 0; i < b.size(); ++i) {
          if (!b.collective[i]) continue;
          int64_t e = b.base_ns * 1000 + b.start_ps[i] + b.duration_ps[i];
          auto [it, fresh] = range.try_emplace(b.collective[i], e, e);
          it->second.first = std::min(it->second.first, e);
          it->second.second = std::max(it->second.second, e);
        }
      }
    }
  }
  std::vector<double> spread;
  for (const auto& [id, r] : range) spread.push_back((r.second - r.first) / 1e6);
  return spread;
}

// The pod: the aggregator, and per host a simulated host and its agent sharing a wrong clock
// drawn from `seed` (a device offset on every other host).
launch::PodOptions AlignmentPod(const std::string& bin, const std::string& dir, int hosts,
                                uint64_t seed) {
  launch::PodOptions pod;
  pod.bin_dir = bin;
  pod.dir = dir;
  pod.hosts = hosts;
  pod.chips = 4;
  pod.generation = "v5p";
  pod.seed = 3;
  pod.aggregator_config = "[agents]\nheartbeat_interval = \"1s\"\nprobe_interval = \"2s\"\n";
  pod.agent_http_listen = "off";
  pod.log_files = false;
  // Milliseconds to 3 decimals, ppm to 3, microseconds to 1, as the benchmark has always drawn
  // them from its seed.
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> offset_ms(-50, 50), drift(-50, 50), dev_us(-200, 200);
  for (int h = 0; h < hosts; ++h) {
    launch::HostOptions host;
    host.clock_offset_ns = std::llround(offset_ms(rng) * 1e3) * 1000;
    host.clock_drift_ppm = std::round(drift(rng) * 1000) / 1000;
    if (h % 2) host.device_clock_offset_ns = std::llround(dev_us(rng) * 10) * 100;
    host.workload_metrics = "none";
    pod.host.push_back(host);
  }
  // Each simulated host on a core of its own, round robin, as real hosts have their own: left
  // to the scheduler, the wake-ups at the start instant pile onto one core's queue.
  const int ncpu = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  pod.adjust = [ncpu](const std::string& name, int host, SubprocessOptions* o) {
    if (name.rfind("podprof-simhost", 0) == 0) o->cpu = host % ncpu;
  };
  return pod;
}

constexpr char kUsage[] = "usage: bench_alignment [--hosts 8] [--duration-ms 1000] [--seed 1]\n";

// Long: the benchmark's steps in the order it prints them, each a few lines over the same pod.
int Main(int argc, char** argv) {
  int hosts = 8, duration_ms = 1000;
  uint64_t seed = 1;
  if (const int stop = bench::ParseFlags(
          argc, argv, kUsage,
          {{"--hosts", [&](const char* v) { hosts = std::atoi(v); }},
           {"--duration-ms", [&](const char* v) { duration_ms = std::atoi(v); }},
           {"--seed", [&](const char* v) { seed = std::strtoull(v, nullptr, 10); }}});
      stop >= 0) {
    return stop;
  }
  const std::string bin = fs::read_symlink("/proc/self/exe").parent_path().string();
  const std::string dir = "/tmp/bench_alignment_" + std::to_string(getpid());
  launch::Pod pod(AlignmentPod(bin, dir, hosts, seed));
  if (absl::Status s = pod.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  const int ncpu = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  std::vector<int> agent_ports;
  for (int h = 0; h < hosts; ++h) agent_ports.push_back(pod.agent_ready(h).value("agent_port", 0));
  auto stub = v1::Aggregator::NewStub(
      grpc::CreateChannel(pod.aggregator_address(), grpc::InsecureChannelCredentials()));
  // Two probe bursts apart, so every clock model has a drift.
  testing::WaitFor([&] { return testing::ProbedAgents(*stub, 2) == hosts; }, absl::Seconds(20),
                   absl::Milliseconds(50));
  RealClock clock;
  const pid_t agg = pod.aggregator_pid();
  // What the aggregator spends with no capture (probing its agents, their heartbeats), per
  // second: not ingest, and taken out of the capture's CPU below.
  const long idle_ticks0 = bench::CpuTicks(agg);
  const int64_t idle_t0 = clock.NowNs();
  absl::SleepFor(absl::Seconds(3));
  const double idle_cpu_per_s = (bench::CpuTicks(agg) - idle_ticks0) /
                                static_cast<double>(sysconf(_SC_CLK_TCK)) /
                                ((clock.NowNs() - idle_t0) / 1e9);
  const int64_t capture_t0 = clock.NowNs();
  const long agg_ticks0 = bench::CpuTicks(agg);
  const int64_t store_ns0 = bench::ThreadCpuNs(agg, storage::kWriterThreadName);
  absl::StatusOr<testing::WatchedCapture> watched = testing::StartAndWatchCapture(
      *stub, duration_ms, absl::Milliseconds(duration_ms) + absl::Minutes(5));
  if (!watched.ok()) {
    std::fprintf(stderr, "%s\n", watched.status().ToString().c_str());
    return 1;
  }
  const v1::StartCaptureResponse& started = watched->started;
  const v1::CaptureProgress& last = watched->last;
  const int64_t window_end = started.start_ns() + int64_t{duration_ms} * 1'000'000;
  const double finish_s = (clock.NowNs() - window_end) / 1e9;
  const double agg_total_cpu_s =
      (bench::CpuTicks(agg) - agg_ticks0) / static_cast<double>(sysconf(_SC_CLK_TCK));
  const double store_cpu_s =
      (bench::ThreadCpuNs(agg, storage::kWriterThreadName) - store_ns0) / 1e9;
  const double idle_cpu_s = idle_cpu_per_s * (clock.NowNs() - capture_t0) / 1e9;
  const double agg_cpu_s = std::max(agg_total_cpu_s - idle_cpu_s, 0.0);

  // Errors against the ground truth at the window's middle.
  const int64_t mid = started.start_ns() + int64_t{duration_ms} * 500'000;
  std::vector<double> none, probes, refined;
  std::vector<int64_t> starts, aimed;
  std::vector<double> late;
  for (const auto& h : last.summary().hosts()) {
    const std::string n = h.host_name().substr(5);
    nlohmann::json t = nlohmann::json::parse(
        ReadFile(launch::TruthFile(pod.options(), std::stoi(n))).value_or(""));
    const double truth =
        t["clock_offset_ns"].get<double>() +
        t["clock_drift_ppm"].get<double>() * 1e-6 * (mid - t["clock_epoch_ns"].get<double>()) +
        t["device_clock_offset_ns"].get<double>();
    none.push_back(std::abs(truth) / 1000);
    probes.push_back(std::abs(h.probe_clock_offset_ns() - truth) / 1000);
    refined.push_back(std::abs(h.clock_offset_ns() - truth) / 1000);
    const auto& session = t["sessions"][0];
    starts.push_back(session["true_start_ns"]);
    // Where each host was told to start, in true time: the clock model's share of the skew;
    // the rest is how late the workload woke up.
    const int64_t late_ns =
        session["host_start_ns"].get<int64_t>() - session["requested_start_host_ns"].get<int64_t>();
    aimed.push_back(session["true_start_ns"].get<int64_t>() - late_ns);
    late.push_back(late_ns / 1e6);
  }
  uint64_t events = 0;
  const std::vector<double> spread = CollectiveSpreads(dir, started.capture_id(), &events);
  const IngestReferences ref = MeasureReferences(agent_ports, duration_ms, events);
  pod.StopAll();
  fs::remove_all(dir);

  std::printf(
      "%d hosts x 4 chips, %d ms capture: status %s, %llu events, finished %.2f s after "
      "the window\n",
      hosts, duration_ms, v1::CaptureStatus_Name(last.status()).c_str(),
      static_cast<unsigned long long>(events), finish_s);
  if (events > 0 && finish_s > 0 && agg_cpu_s > 0 && ref.decode > 0) {
    const double per_cpu_s = static_cast<double>(events) / agg_cpu_s;
    std::printf(
        "ingest %.0f events/s (all events stored within the %.2f s after the window); aggregator "
        "CPU %.2f s, %.0f events per CPU-second; receiving every host's stream over gRPC and "
        "nothing else %.0f events per CPU-second (receive_over_decode=%.2f); decoding the same "
        "host's chunks alone %.0f events per CPU-second; ingest_over_decode=%.2f\n",
        static_cast<double>(events) / finish_s, finish_s, agg_cpu_s, per_cpu_s, ref.receive,
        ref.receive / ref.decode, ref.decode, per_cpu_s / ref.decode);
  }
  auto row = [](const char* what, const std::vector<double>& v) {
    std::printf("%-26s p50 %10.2f us  p99 %10.2f us  max %10.2f us\n", what,
                bench::Percentile(v, 0.5), bench::Percentile(v, 0.99),
                v.empty() ? 0 : *std::max_element(v.begin(), v.end()));
  };
  row("no correction", none);
  row("probes only", probes);
  row("probes + collectives", refined);
  row("collective end spread", spread);
  if (starts.empty() || refined.empty()) {
    std::printf("no host delivered: nothing to compare\nalignment_max_error_us=-1\n");
    return 1;
  }
  auto range_ms = [](const std::vector<int64_t>& v) {
    return (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / 1e6;
  };
  std::printf(
      "start instants aimed within %.3f ms; workloads woke late by p50 %.3f ms, max %.3f ms\n",
      range_ms(aimed), bench::Percentile(late, 0.5), *std::max_element(late.begin(), late.end()));
  const double floor_ms = WakeFloorNs(hosts, ncpu) / 1e6;
  std::printf(
      "start skew %.3f ms over %zu hosts (for scale: %d bare processes woken at one instant: %.3f "
      "ms)\n",
      range_ms(starts), starts.size(), hosts, floor_ms);
  std::printf(
      "aggregator CPU during the capture %.2f s, of which %.2f s it spends idle over as long "
      "(probes, heartbeats); ingest is the rest, of which its store's writer thread %.2f s "
      "(the index rows in SQLite, the blobs appended to segment files)\n",
      agg_total_cpu_s, idle_cpu_s, store_cpu_s);
  if (events > 0 && store_cpu_s > 0 && ref.receive > 0) {
    // What storing alone leaves of the ratio below: receiving plus storing, nothing else.
    const double receive_s = static_cast<double>(events) / ref.receive;
    std::printf("receive_and_store_over_receive=%.2f\n", receive_s / (receive_s + store_cpu_s));
  }
  if (ref.analysis_s_per_host_s >= 0) {
    std::printf("agent_analysis_cpu_s_per_host_s=%.4f\n", ref.analysis_s_per_host_s);
  }
  // The aggregator's whole ingest against only receiving the same streams (#37's figure).
  if (events > 0 && agg_cpu_s > 0 && ref.receive > 0) {
    std::printf("ingest_over_receive=%.2f\n",
                static_cast<double>(events) / agg_cpu_s / ref.receive);
  }
  std::printf("alignment_max_error_us=%.2f\n",
              refined.empty() ? -1 : *std::max_element(refined.begin(), refined.end()));
  return last.status() == v1::CAPTURE_STATUS_COMPLETE ? 0 : 1;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
