// Pod scale: one podprof-aggregator and one podprof-loadgen emulating a whole pod (default
// 2,240 hosts of 4 chips, the size of a v5p pod), pod-wide captures, and what they cost the
// aggregator: hosts complete, events stored, its CPU-seconds and events per CPU-second, how
// long after the last host's stream ended the capture was stored and queryable
// (`land_after_last_stream_s`), its peak RSS, and the latency of queries made during ingest
// against the same queries on the idle aggregator afterwards (`query_p99_ms`, and the ratio),
// and the bytes each host-second of capture costs on the wire and on disk.
// Last line `pod_scale_events_per_cpu_s=<n>`. Everything listens on loopback only.
//
//   bench_pod_scale [--agents 2240] [--chips 4] [--duration-ms 1000] [--captures 1]
//                   [--counters 1] [--slices 1]
// With --slices S > 1 the pod is an S-slice job (the agents split evenly), and after the
// captures the last one's cross-slice analysis (GetDcn) is asked for and timed (`dcn_query_s`).
#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"
#include "proto/grpc_status.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "storage/database.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;

constexpr char kUsage[] =
    "usage: bench_pod_scale [--agents N (2240)] [--chips C (4)] [--duration-ms D (1000)]\n"
    "                       [--captures K (1)] [--counters 0|1 (1)] [--slices S (1)]\n"
    "Starts podprof-aggregator --insecure and one podprof-loadgen emulating N agents on\n"
    "loopback, runs K pod-wide captures of D ms and prints the aggregator's cost; the last\n"
    "line is pod_scale_events_per_cpu_s=<events stored per aggregator CPU-second>.\n";

// Longest waits, so that every loop ends.
constexpr int64_t kRegisterTimeoutNs = 300'000'000'000;
constexpr int64_t kCaptureTimeoutNs = 1'800'000'000'000;
constexpr int64_t kRpcDeadlineNs = 10'000'000'000;
constexpr int kMaxQueries = 100'000;

struct Options {
  int agents = 2240, chips = 4, duration_ms = 1000, captures = 1, counters = 1, slices = 1;
};

// Parses the flags; false (after printing why, or the usage for --help) to stop.
bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n%s", a.c_str(), kUsage);
      return false;
    }
    const int v = std::atoi(argv[++i]);
    if (a == "--agents")
      o->agents = v;
    else if (a == "--chips")
      o->chips = v;
    else if (a == "--duration-ms")
      o->duration_ms = v;
    else if (a == "--captures")
      o->captures = v;
    else if (a == "--counters")
      o->counters = v;
    else if (a == "--slices")
      o->slices = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n%s", a.c_str(), kUsage);
      return false;
    }
  }
  if (o->agents < 1 || o->chips < 1 || o->duration_ms < 1 || o->captures < 1 || o->slices < 1) {
    std::fprintf(stderr, "every value must be at least 1\n%s", kUsage);
    return false;
  }
  if (o->agents % o->slices != 0) {
    std::fprintf(stderr, "--agents must split evenly into --slices\n%s", kUsage);
    return false;
  }
  return true;
}

// Latency of one call, ms.
template <typename F>
double TimedMs(Clock& clock, F call) {
  const int64_t t0 = clock.MonotonicNs();
  call();
  return (clock.MonotonicNs() - t0) / 1e6;
}

double ListCapturesMs(v1::Aggregator::Stub& stub, Clock& clock) {
  return TimedMs(clock, [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(clock.NowNs(), kRpcDeadlineNs));
    v1::ListCapturesResponse r;
    stub.ListCaptures(&ctx, v1::ListCapturesRequest(), &r);
  });
}

// GetKernelStats of `capture` (top 20 kernels); `rows` gets how many came back.
double KernelStatsMs(v1::Aggregator::Stub& stub, Clock& clock, const std::string& capture,
                     int* rows = nullptr) {
  return TimedMs(clock, [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(clock.NowNs(), kRpcDeadlineNs));
    v1::GetKernelStatsRequest req;
    req.set_capture_id(capture);
    req.set_top_n(20);
    v1::GetKernelStatsResponse r;
    grpc::Status s = stub.GetKernelStats(&ctx, req, &r);
    if (rows != nullptr) *rows = s.ok() ? r.stats_size() : 0;
  });
}

// Agents online with a probed clock, or -1 when the aggregator does not answer.
int OnlineAgents(v1::Aggregator::Stub& stub, Clock& clock) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock.NowNs(), kRpcDeadlineNs));
  v1::ListAgentsResponse resp;
  if (!stub.ListAgents(&ctx, v1::ListAgentsRequest(), &resp).ok()) return -1;
  int online = 0;
  for (const auto& a : resp.agents()) {
    online += a.state() == v1::AGENT_STATE_ONLINE && a.clock().probe_count() > 0;
  }
  return online;
}

// Queries made in a loop while a capture is ingested (every 100 ms, each kind timed apart).
class Querier {
 public:
  Querier(v1::Aggregator::Stub& stub, Clock& clock) : stub_(stub), clock_(clock) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Querier() { Stop(); }
  void SetCapture(const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    capture_ = id;
  }
  void SetActive(bool on) { active_ = on; }
  void Stop() {
    if (!stop_.HasBeenNotified()) stop_.Notify();
    if (thread_.joinable()) thread_.join();
  }
  // After Stop().
  const std::vector<double>& latencies() const { return ms_; }

 private:
  void Loop() {
    for (int i = 0; i < kMaxQueries && !stop_.HasBeenNotified(); ++i) {
      if (active_) {
        std::string c;
        {
          std::lock_guard<std::mutex> l(mu_);
          c = capture_;
        }
        ms_.push_back(ListCapturesMs(stub_, clock_));
        ms_.push_back(KernelStatsMs(stub_, clock_, c));
      }
      clock_.SleepUntilNs(clock_.NowNs() + 100'000'000, &stop_);
    }
  }
  v1::Aggregator::Stub& stub_;
  Clock& clock_;
  std::mutex mu_;
  std::string capture_;
  std::atomic<bool> active_{false};
  absl::Notification stop_;
  std::vector<double> ms_;  // the querier thread's until Stop()
  std::thread thread_;
};

struct CaptureResult {
  int hosts_complete = 0, hosts_total = 0;
  uint64_t events = 0;
  uint64_t wire_bytes = 0;  // the hosts' capture streams, as received
  bool stored = false;
  std::string id;
  double land_s = -1;  // last stream's end to queryable
  std::map<std::string, int> failures;
};

// Runs one capture to its end: StartCapture, WatchCapture (noting when each host's stream
// ended), then GetKernelStats until it answers with rows.
CaptureResult RunCapture(v1::Aggregator::Stub& stub, Clock& clock, const Options& o,
                         Querier& querier) {
  CaptureResult r;
  grpc::ClientContext sctx;
  sctx.set_deadline(DeadlineAt(clock.NowNs(), 60'000'000'000));
  v1::StartCaptureRequest req;
  req.set_duration_ms(o.duration_ms);
  v1::StartCaptureResponse started;
  if (grpc::Status s = stub.StartCapture(&sctx, req, &started); !s.ok()) {
    ++r.failures["StartCapture: " + s.error_message()];
    return r;
  }
  querier.SetCapture(started.capture_id());
  r.id = started.capture_id();
  const int64_t window_end = started.start_ns() + int64_t{o.duration_ms} * 1'000'000;
  grpc::ClientContext wctx;
  wctx.set_deadline(DeadlineAt(clock.NowNs(), kCaptureTimeoutNs));
  v1::WatchCaptureRequest w;
  w.set_capture_id(started.capture_id());
  auto reader = stub.WatchCapture(&wctx, w);
  v1::CaptureProgress p, last;
  int64_t last_stream_end = 0;
  while (reader->Read(&p)) {
    last = p;
    if (p.has_host() && (p.detail() == "done" || p.detail() == "failed")) {
      last_stream_end = std::max(last_stream_end, p.time_ns());
    }
    if (clock.NowNs() >= window_end) querier.SetActive(true);
  }
  reader->Finish();
  r.hosts_total = last.summary().hosts_size();
  for (const auto& h : last.summary().hosts()) {
    r.events += h.event_count();
    r.wire_bytes += h.bytes_received();
    if (h.status() == v1::CAPTURE_STATUS_COMPLETE) {
      ++r.hosts_complete;
    } else {
      ++r.failures[h.error_message().substr(0, 120)];
    }
  }
  if (!last.summary().error_message().empty()) ++r.failures[last.summary().error_message()];
  // Stored and queryable: GetKernelStats answers with rows (bounded by the capture timeout).
  for (int i = 0; i < 2400 && r.hosts_complete > 0; ++i) {
    int rows = 0;
    KernelStatsMs(stub, clock, started.capture_id(), &rows);
    if (rows > 0) {
      r.stored = true;
      r.land_s = last_stream_end > 0 ? (clock.NowNs() - last_stream_end) / 1e9 : -1;
      break;
    }
    clock.SleepUntilNs(clock.NowNs() + 50'000'000, nullptr);
  }
  querier.SetActive(false);
  return r;
}

// The queries the Querier makes during ingest, made on the same data with nothing ingesting:
// the baseline of query_p99_over_idle. Their latencies, ms.
std::vector<double> IdleLatencies(v1::Aggregator::Stub& stub, Clock& clock) {
  std::string last;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(clock.NowNs(), kRpcDeadlineNs));
    v1::ListCapturesResponse r;
    if (stub.ListCaptures(&ctx, v1::ListCapturesRequest(), &r).ok() && r.captures_size() > 0) {
      last = r.captures(0).capture_id();
    }
  }
  std::vector<double> idle;
  for (int i = 0; i < 50; ++i) {
    idle.push_back(ListCapturesMs(stub, clock));
    idle.push_back(KernelStatsMs(stub, clock, last));
  }
  return idle;
}

// What the aggregator spends per second with no capture running (probing its agents, their
// heartbeats), measured over 3 s: not ingest, and told apart from it.
double IdleCpuPerS(pid_t agg, Clock& clock) {
  const long ticks0 = bench::CpuTicks(agg);
  const int64_t t0 = clock.NowNs();
  clock.SleepUntilNs(t0 + 3'000'000'000, nullptr);
  return (bench::CpuTicks(agg) - ticks0) / static_cast<double>(sysconf(_SC_CLK_TCK)) /
         ((clock.NowNs() - t0) / 1e9);
}

// A multi-slice capture's cross-slice analysis, asked for once the pod is idle: how long the
// aggregator takes to read every host's XLA Ops and pair the transfers, and what it found.
void ReportDcn(v1::Aggregator::Stub& stub, Clock& clock, const std::string& capture, pid_t agg) {
  v1::GetDcnRequest req;
  req.set_capture_id(capture);
  v1::GetDcnResponse resp;
  grpc::Status status;
  const double ms = TimedMs(clock, [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(clock.NowNs(), 10 * kRpcDeadlineNs));
    status = stub.GetDcn(&ctx, req, &resp);
  });
  if (!status.ok()) {
    std::printf("dcn: %s\n", status.error_message().c_str());
    return;
  }
  std::printf(
      "dcn: %llu transfers between %d slices; %s\ndcn_query_s=%.2f "
      "aggregator_peak_rss_mb after it=%ld\n",
      static_cast<unsigned long long>(resp.transfers()), resp.slices(), resp.verdict().c_str(),
      ms / 1e3, bench::StatusKb(agg, "VmHWM:") / 1024);
}

// Waits for the pod, runs the captures, prints the figures; returns the exit code. Long: the
// report's lines in the order it prints them, each over figures measured just before.
int RunAndReport(const Options& o, Clock& clock, int port, pid_t agg, pid_t loadgen, int64_t t0,
                 const std::string& db, const std::function<void()>& cleanup) {
  auto stub = v1::Aggregator::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  int online = 0;
  while (online < o.agents && clock.NowNs() - t0 < kRegisterTimeoutNs) {
    clock.SleepUntilNs(clock.NowNs() + 500'000'000, nullptr);
    online = OnlineAgents(*stub, clock);
  }
  std::printf(
      "%d agents x %d chips emulated by one podprof-loadgen; %d online and probed after "
      "%.1f s\n",
      o.agents, o.chips, online, (clock.NowNs() - t0) / 1e9);
  if (online < o.agents) {
    std::printf("not every agent came online; giving up\npod_scale_events_per_cpu_s=0\n");
    cleanup();
    return 1;
  }
  const double idle_per_s = IdleCpuPerS(agg, clock);
  const int64_t busy_t0 = clock.NowNs();
  const long ticks0 = bench::CpuTicks(agg);
  const int64_t store_ns0 = bench::ThreadCpuNs(agg, storage::kWriterThreadName);
  Querier querier(*stub, clock);
  uint64_t events = 0, wire_bytes = 0;
  int complete = 0, total = 0;
  double worst_land = -1;
  std::string last_id;
  for (int c = 0; c < o.captures; ++c) {
    CaptureResult r = RunCapture(*stub, clock, o, querier);
    last_id = r.id;
    std::printf(
        "capture %d: hosts_complete=%d/%d events_stored=%llu stored=%s "
        "land_after_last_stream_s=%.2f\n",
        c, r.hosts_complete, r.hosts_total, static_cast<unsigned long long>(r.events),
        r.stored ? "yes" : "no", r.land_s);
    for (const auto& [why, n] : r.failures) std::printf("  %d x %s\n", n, why.c_str());
    if (r.stored) events += r.events;
    wire_bytes += r.wire_bytes;
    complete += r.hosts_complete;
    total += r.hosts_total;
    worst_land = std::max(worst_land, r.land_s);
  }
  querier.Stop();
  const double cpu_s = (bench::CpuTicks(agg) - ticks0) / static_cast<double>(sysconf(_SC_CLK_TCK));
  const double store_s = (bench::ThreadCpuNs(agg, storage::kWriterThreadName) - store_ns0) / 1e9;
  const std::vector<double> idle = IdleLatencies(*stub, clock);
  const std::vector<double>& busy = querier.latencies();
  const double events_per_cpu_s = cpu_s > 0 ? events / cpu_s : 0;
  std::printf("hosts_complete=%d/%d events_stored=%llu\n", complete, total,
              static_cast<unsigned long long>(events));
  std::printf("aggregator_cpu_s=%.2f events_per_cpu_s=%.0f\n", cpu_s, events_per_cpu_s);
  const double idle_s = idle_per_s * (clock.NowNs() - busy_t0) / 1e9;
  std::printf(
      "aggregator_ingest_cpu_s=%.2f (of those, %.2f CPU-s it spends idle over as long: "
      "probes, heartbeats; and store_thread_cpu_s=%.2f, its store's writer thread: index rows, "
      "segment appends)\n",
      std::max(cpu_s - idle_s, 0.0), idle_s, store_s);
  std::printf("land_after_last_stream_s=%.2f\n", worst_land);
  std::printf("aggregator_peak_rss_mb=%ld (loadgen peak %ld MB)\n",
              bench::StatusKb(agg, "VmHWM:") / 1024, bench::StatusKb(loadgen, "VmHWM:") / 1024);
  auto size_of = [](const std::string& path) {
    std::error_code ec;
    const uintmax_t n = fs::file_size(path, ec);
    return ec ? 0.0 : static_cast<double>(n);
  };
  // The segment files beside the database hold the timelines' and counters' bytes.
  double segments_bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(storage::SegmentFolder(db), ec)) {
    segments_bytes += size_of(e.path().string());
  }
  const double sqlite_mb = (size_of(db) + size_of(db + "-wal")) / 1e6;
  const double db_mb = sqlite_mb + segments_bytes / 1e6;
  std::printf(
      "store_mb=%.1f (the SQLite file and its write-ahead log %.1f MB, the segment files %.1f "
      "MB; %d captures)\n",
      db_mb, sqlite_mb, segments_bytes / 1e6, o.captures);
  // Per host-second of capture: what each host costs the network and the aggregator's disk.
  const double host_s = static_cast<double>(total) * o.duration_ms / 1000.0;
  if (host_s > 0) {
    std::printf("wire_kb_per_host_s=%.1f disk_kb_per_host_s=%.1f\n", wire_bytes / host_s / 1e3,
                db_mb * 1e3 / host_s);
  }
  std::printf(
      "queries during ingest: %zu, p50 %.1f ms, query_p99_ms=%.1f; idle: p50 %.1f ms, "
      "p99 %.1f ms; query_p99_over_idle=%.1f\n",
      busy.size(), bench::Percentile(busy, 0.5), bench::Percentile(busy, 0.99),
      bench::Percentile(idle, 0.5), bench::Percentile(idle, 0.99),
      bench::Percentile(idle, 0.99) > 0
          ? bench::Percentile(busy, 0.99) / bench::Percentile(idle, 0.99)
          : 0);
  if (o.slices > 1) ReportDcn(*stub, clock, last_id, agg);
  cleanup();
  std::printf("pod_scale_events_per_cpu_s=%.0f\n", events_per_cpu_s);
  return complete == total && total > 0 ? 0 : 1;
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure out as soon as it is known
  Options o;
  if (!ParseOptions(argc, argv, &o)) {
    return argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") ? 0 : 2;
  }
  // Two sockets per emulated agent in the loadgen, a connection per agent in the aggregator.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < static_cast<rlim_t>(4 * o.agents + 1000)) {
    std::printf("note: %llu open files allowed; %d agents need about %d\n",
                static_cast<unsigned long long>(files.rlim_cur), o.agents, 4 * o.agents + 1000);
  }
  const std::string bin = fs::read_symlink("/proc/self/exe").parent_path().string();
  std::string dir = (fs::temp_directory_path() / "bench_pod_scale_XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  std::ofstream(dir + "/agg.toml") << "[agents]\nheartbeat_interval = \"5s\"\n"
                                      "probe_interval = \"10s\"\n[limits]\n"
                                      "max_capture_duration = \"60s\"\n";
  RealClock clock;
  Subprocess agg =
      bench::StartChild({bin + "/podprof-aggregator", "--insecure", "--config=" + dir + "/agg.toml",
                         "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                         "--db=" + dir + "/pod.db", "--ready-file=" + dir + "/agg.json"});
  std::optional<Subprocess> loadgen;
  auto cleanup = [&] {
    if (loadgen) loadgen->Terminate(absl::Seconds(10));
    agg.Terminate(absl::Seconds(10));
    fs::remove_all(dir);
  };
  if (!bench::WaitForFile(dir + "/agg.json")) {
    std::printf("the aggregator did not start\n");
    cleanup();
    return 1;
  }
  const int port = nlohmann::json::parse(ReadFile(dir + "/agg.json").value_or(""))["port"];
  const int64_t t0 = clock.NowNs();
  loadgen = bench::StartChild(
      {bin + "/podprof-loadgen", "--insecure", absl::StrCat("--aggregator=127.0.0.1:", port),
       absl::StrCat("--agents=", o.agents), absl::StrCat("--chips=", o.chips),
       absl::StrCat("--counters=", o.counters), absl::StrCat("--slices=", o.slices),
       "--exit-after=2h", "--ready-file=" + dir + "/loadgen.json"});
  if (!bench::WaitForFile(dir + "/loadgen.json")) {
    std::printf("podprof-loadgen did not start\n");
    cleanup();
    return 1;
  }
  return RunAndReport(o, clock, port, agg.pid(), loadgen->pid(), t0, dir + "/pod.db", cleanup);
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
