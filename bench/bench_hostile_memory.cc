// podprof-aggregator's memory under the memory attacks of docs/RELIABILITY.md's hostile-agents
// table, played against a real daemon over gRPC on loopback: telemetry naming chips the host
// never registered, registrations of 100,000 chips or 12.6 MB of labels, 64 unread exports,
// 600 watch streams and 64 idle imports from one client. Before each attack the daemon's peak
// (VmHWM) is reset to its current RSS (/proc/<pid>/clear_refs), so each line's peak is that
// attack's own. Each line says whether the daemon refused or bounded the attack as documented,
// its VmRSS before and after, the peak, the ratio of the peak to the idle baseline of the same
// run, the bound the documentation states, and whether the daemon still answered ListCaptures.
// The baselines: the daemon idle after start-up, and after a normal import of the v6e fixture.
// Last line: `aggregator_peak_rss_mib=<the largest peak over the attacks>`.
//
// A capture stream that never ends (an agent streaming past ingest.max_host_stream_bytes) is
// not played here: it needs an agent answering the aggregator's Capture call with valid chunks
// without end (HostileAgentTest.AStreamPastTheHostLimitFailsTheHost plays it in-process).
//
//   bench_hostile_memory [--reports 4] [--report-mb 9]
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "common/file_util.h"
#include "launch/pod_launcher.h"
#include "proto/grpc_status.h"
#include "proto/podprof_agent.grpc.pb.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "stream/capture_encoder.h"
#include "trace/xspace_reader.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;

constexpr char kUsage[] =
    "usage: bench_hostile_memory [--reports 4] [--report-mb 9]\n"
    "Plays the memory attacks of docs/RELIABILITY.md against a real podprof-aggregator and\n"
    "prints its peak RSS under each; last line aggregator_peak_rss_mib=<max over attacks>.\n";
constexpr char kFixture[] = PODPROF_FIXTURES_DIR "/tpu_v6e_4chip_host_offload.xplane.pb";
// The service's bounds on long calls (aggregator/api/service.h), as the documentation states them.
constexpr int kSlotsPerClient = 8;
// Streams of each attack; every one comes from 127.0.0.1, one client.
constexpr int kExports = 64, kWatches = 600, kImports = 64;
// Streams opened on one connection, under the daemon's limits.max_concurrent_streams (100): past
// it the client's transport queues them unsent, and the daemon never sees them.
constexpr int kStreamsPerConnection = 50;
// How long the streams are held before the peak is read: under the 20 s the service allows a
// chunk left untaken, and the 60 s it allows an import sending nothing.
constexpr auto kHold = std::chrono::seconds(3);
constexpr int64_t kS = 1'000'000'000;
// Each stream's deadline: what the service has not answered by then it did not admit (a
// stream it admitted and that got no message yet ends there). Under the 20 s the service
// allows a chunk left untaken, so that the deadline, not the service, ends an export.
constexpr int64_t kStreamDeadlineNs = 15 * kS;
// A watch stream's: 600 calls at once take the daemon many seconds to answer on two busy cores,
// and an admitted watch of a pending capture gets no message before it.
constexpr int64_t kWatchDeadlineNs = 30 * kS;

int64_t NowNs() { return absl::GetCurrentTimeNanos(); }

struct Memory {
  double rss_mib = 0;
  double peak_mib = 0;
};

Memory MemoryOf(pid_t pid) {
  return {bench::StatusKb(pid, "VmRSS:") / 1024.0, bench::StatusKb(pid, "VmHWM:") / 1024.0};
}

// Sets the process's VmHWM back to its current RSS (proc(5), clear_refs "5").
void ResetPeak(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

// The daemon's threads (a sync gRPC server runs each call on one).
long ThreadsOf(pid_t pid) { return bench::StatusKb(pid, "Threads:"); }

// Waits up to 30 s for the daemon's threads to fall back to `threads`: the calls an attack
// left have ended, and their slots are free for the next.
void AwaitCallsEnded(pid_t pid, long threads) {
  for (int i = 0; i < 300 && ThreadsOf(pid) > threads; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// One attack's outcome.
struct Outcome {
  bool held = false;   // refused or bounded as documented
  std::string detail;  // what the daemon answered
};

// The daemon's cap on one host's stream for this run ([ingest] max_host_stream_bytes), lower
// than the shipped 1 GiB so that the endless stream reaches it in seconds.
constexpr int64_t kHostStreamBytes = int64_t{256} << 20;

// A host's agent that answers the aggregator's probes and plays its capture's chunks, then its
// timeline blocks again and again without end: the stream that was once held whole until its
// deadline (2.5 GB in 8 s). Stops when the aggregator cancels the call.
class EndlessAgent final : public v1::Agent::Service {
 public:
  explicit EndlessAgent(std::vector<v1::CaptureChunk> chunks) : chunks_(std::move(chunks)) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~EndlessAgent() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  uint64_t sent() const { return sent_; }

  grpc::Status Ping(grpc::ServerContext*, const v1::PingRequest* req,
                    v1::PingResponse* resp) override {
    resp->set_client_send_ns(req->client_send_ns());
    resp->set_agent_receive_ns(NowNs());
    resp->set_agent_send_ns(NowNs());
    return grpc::Status::OK;
  }
  grpc::Status Capture(grpc::ServerContext* ctx, const v1::CaptureRequest*,
                       grpc::ServerWriter<v1::CaptureChunk>* out) override {
    std::vector<const v1::CaptureChunk*> blocks;
    for (const v1::CaptureChunk& c : chunks_) {
      if (c.has_trailer()) break;
      if (c.has_event_block()) blocks.push_back(&c);
      if (!Write(c, out)) return grpc::Status::OK;
    }
    // Four times the cap at most, should the aggregator never cancel.
    while (!ctx->IsCancelled() && sent_ < 4 * static_cast<uint64_t>(kHostStreamBytes)) {
      for (const v1::CaptureChunk* c : blocks) {
        if (!Write(*c, out)) return grpc::Status::OK;
      }
    }
    return grpc::Status::OK;
  }

 private:
  bool Write(const v1::CaptureChunk& c, grpc::ServerWriter<v1::CaptureChunk>* out) {
    sent_ += c.ByteSizeLong();
    return out->Write(c);
  }
  const std::vector<v1::CaptureChunk> chunks_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<uint64_t> sent_{0};
};

class HostileMemoryBench {
 public:
  HostileMemoryBench(launch::Pod* pod, int reports, int report_mb)
      : pod_(pod), reports_(reports), report_mb_(report_mb) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    stub_ = v1::Aggregator::NewStub(grpc::CreateCustomChannel(
        pod->aggregator_address(), grpc::InsecureChannelCredentials(), args));
  }

  int Main();

 private:
  // Plays `attack` and prints its line; false if the daemon did not hold it or stopped
  // answering.
  bool Play(const std::string& name, const std::string& bound,
            const std::function<Outcome()>& attack);
  bool Alive();
  std::string Import();
  Outcome Telemetry();
  Outcome Registrations();
  Outcome Exports();
  Outcome Watches();
  Outcome IdleImports();
  Outcome EndlessStream();
  grpc::Status Register(const std::string& host, int chips, size_t label_bytes);

  launch::Pod* const pod_;
  const int reports_, report_mb_;
  // The stub of the i-th stream of an attack: a connection of its own for each
  // kStreamsPerConnection streams, all from 127.0.0.1 (one client to the daemon).
  v1::Aggregator::Stub& StreamStub(int i);

  std::unique_ptr<v1::Aggregator::Stub> stub_;
  std::vector<std::unique_ptr<v1::Aggregator::Stub>> stream_stubs_;
  std::string capture_id_;
  double baseline_mib_ = 0;
  double max_peak_mib_ = 0;
};

v1::Aggregator::Stub& HostileMemoryBench::StreamStub(int i) {
  const size_t n = static_cast<size_t>(i / kStreamsPerConnection);
  while (stream_stubs_.size() <= n) {
    grpc::ChannelArguments args;
    // Channels of equal arguments would share one connection.
    args.SetInt("podprof.bench.connection", static_cast<int>(stream_stubs_.size()));
    stream_stubs_.push_back(v1::Aggregator::NewStub(grpc::CreateCustomChannel(
        pod_->aggregator_address(), grpc::InsecureChannelCredentials(), args)));
  }
  return *stream_stubs_[n];
}

bool HostileMemoryBench::Alive() {
  if (!pod_->Exited().empty()) return false;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(NowNs(), 10 * kS));
  v1::ListCapturesResponse list;
  return stub_->ListCaptures(&ctx, v1::ListCapturesRequest(), &list).ok();
}

bool HostileMemoryBench::Play(const std::string& name, const std::string& bound,
                              const std::function<Outcome()>& attack) {
  const pid_t pid = pod_->aggregator_pid();
  const Memory before = MemoryOf(pid);
  const long threads = ThreadsOf(pid);
  ResetPeak(pid);
  const Outcome out = attack();
  AwaitCallsEnded(pid, threads);
  const Memory after = MemoryOf(pid);
  const bool alive = Alive();
  max_peak_mib_ = std::max(max_peak_mib_, after.peak_mib);
  std::printf(
      "%-34s held=%-3s RSS %.1f -> %.1f MiB, peak %.1f MiB (%.2fx idle), alive=%s | bound: %s "
      "| %s\n",
      name.c_str(), out.held ? "yes" : "no", before.rss_mib, after.rss_mib, after.peak_mib,
      after.peak_mib / baseline_mib_, alive ? "yes" : "no", bound.c_str(), out.detail.c_str());
  std::fflush(stdout);
  return out.held && alive;
}

// Imports the fixture through ImportXSpace, as `podprof import` does; the capture's id, or "".
std::string HostileMemoryBench::Import() {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(NowNs(), 60 * kS));
  v1::ImportXSpaceResponse resp;
  auto writer = stub_->ImportXSpace(&ctx, &resp);
  v1::ImportXSpaceChunk chunk;
  chunk.set_host_name("bench-host");
  chunk.set_data(ReadFile(kFixture).value_or(""));
  writer->Write(chunk);
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  if (!s.ok()) std::fprintf(stderr, "import of %s: %s\n", kFixture, s.error_message().c_str());
  return s.ok() ? resp.capture_id() : "";
}

// Registers `host` at a dead address with `chips` chips and `label_bytes` of labels (in labels
// of 12 kB).
grpc::Status HostileMemoryBench::Register(const std::string& host, int chips, size_t label_bytes) {
  v1::RegisterRequest req;
  v1::HostInfo* h = req.mutable_host();
  h->set_host_name(host);
  h->set_agent_address("127.0.0.1:1");
  h->set_agent_version("0.0.0");
  for (int c = 0; c < chips; ++c) {
    v1::ChipInfo* chip = h->add_chips();
    chip->set_ordinal(c);
    chip->set_global_chip_id(c);
    chip->set_generation("v6e");
    chip->set_device_type_string("TPU v6 Lite");
  }
  constexpr size_t kLabel = 12'000;
  for (size_t i = 0; i * kLabel < label_bytes; ++i) {
    (*h->mutable_labels())[absl::StrCat("k", i)] = std::string(kLabel, 'v');
  }
  req.set_agent_start_ns(NowNs());
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(NowNs(), 30 * kS));
  v1::RegisterResponse resp;
  return stub_->Register(&ctx, req, &resp);
}

// A registered host of 4 chips reports `reports_` times about `report_mb_` MB of samples that
// name chips 4 and up (the attack that once grew the daemon from 23 to 1,561 MiB).
Outcome HostileMemoryBench::Telemetry() {
  Outcome out;
  const grpc::Status reg = Register("bench-telemetry", 4, 0);
  if (!reg.ok()) return {false, "the honest registration failed: " + reg.error_message()};
  v1::ReportTelemetryRequest r;
  r.set_host_name("bench-telemetry");
  constexpr int kSamples = 3000;  // under the 3,600 a report may carry
  const int chips = std::max(1, report_mb_ * 1'000'000 / kSamples / 40);
  r.set_sent_ns(NowNs());
  for (int n = 0; n < kSamples; ++n) {
    v1::TelemetrySample* s = r.add_samples();
    s->set_time_ns(r.sent_ns() - int64_t{kSamples - n} * 1'000'000);
    s->set_interval_ns(1'000'000);
    for (int c = 0; c < chips; ++c) {
      v1::ChipTelemetry* t = s->add_chips();
      t->set_chip(4 + c);
      t->set_steps(3);
      t->set_step_mean_us(900.5);
      t->set_step_max_us(910.5);
      t->set_duty_cycle_percent(80);
      t->set_hbm_used_bytes(int64_t{1} << 30);
    }
  }
  int refused = 0;
  std::string said;
  for (int i = 0; i < reports_; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(NowNs(), 60 * kS));
    v1::ReportTelemetryResponse resp;
    const grpc::Status s = stub_->ReportTelemetry(&ctx, r, &resp);
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
        s.error_message().find("did not register") != std::string::npos) {
      ++refused;
    }
    said = s.error_message();
  }
  out.held = refused == reports_;
  out.detail = absl::StrCat(refused, "/", reports_, " reports of ", r.ByteSizeLong() / 1e6,
                            " MB refused: ", said);
  return out;
}

// One host registers with 100,000 chips, another with 12.6 MB of labels, each twice.
Outcome HostileMemoryBench::Registrations() {
  int refused = 0;
  std::string said;
  for (int i = 0; i < 2; ++i) {
    for (const grpc::Status& s : {Register(absl::StrCat("bench-chips-", i), 100'000, 0),
                                  Register(absl::StrCat("bench-labels-", i), 1, 12'600'000)}) {
      if (!s.ok()) ++refused;
      said = s.error_message();
    }
  }
  grpc::ClientContext ctx;
  v1::ListAgentsResponse agents;
  stub_->ListAgents(&ctx, v1::ListAgentsRequest(), &agents).ok();
  const int kept = static_cast<int>(
      std::count_if(agents.agents().begin(), agents.agents().end(), [](const v1::AgentStatus& a) {
        return a.host().host_name().rfind("bench-chips", 0) == 0 ||
               a.host().host_name().rfind("bench-labels", 0) == 0;
      }));
  return {refused == 4 && kept == 0, absl::StrCat(refused, "/4 refused, ", kept, " kept: ", said)};
}

// A long call held open and never read from; `Tally` says whether the service admitted it.
template <typename Stream>
struct Held {
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream;
};

// Whether a held stream's first message came (the service admitted it); if none did, the
// status it ended with.
template <typename Message, typename Reader>
bool FirstCame(Held<Reader>& h, grpc::Status* end) {
  Message m;
  if (h.stream->Read(&m)) return true;
  *end = h.stream->Finish();
  return false;
}

// Cancels a stream whose first message came.
template <typename Message, typename Reader>
void Cancel(Held<Reader>& h) {
  Message m;
  h.ctx.TryCancel();
  while (h.stream->Read(&m)) {
  }
  h.stream->Finish().ok();
}

// Of streams held unread: how many the service admitted (its first message came, or none was
// refused) and how many it refused with RESOURCE_EXHAUSTED. Each is read on a thread of its
// own: a refusal read after an admitted stream's deadline would pass its own deadline first
// and read as DEADLINE_EXCEEDED.
template <typename Message, typename Reader>
std::string Tally(std::vector<std::unique_ptr<Held<Reader>>>& held, int* admitted, int* refused) {
  std::vector<grpc::Status> ends(held.size());
  std::vector<char> came(held.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < held.size(); ++i) {
    readers.emplace_back([&, i] { came[i] = FirstCame<Message>(*held[i], &ends[i]); });
  }
  for (std::thread& t : readers) t.join();
  // Only now, every answer in: a slot given back earlier would admit a call the service had
  // not yet answered.
  for (size_t i = 0; i < held.size(); ++i) {
    if (came[i]) Cancel<Message>(*held[i]);
  }
  std::string said;
  std::map<int, int> others;  // the status codes of those admitted without a first message
  for (const grpc::Status& s : ends) {
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++*refused;
      said = s.error_message();
    } else {
      ++*admitted;
      if (!s.ok()) ++others[s.error_code()];
    }
  }
  for (const auto& [code, n] : others)
    absl::StrAppend(&said, "; ", n, " admitted ended with code ", code);
  return said;
}

// The daemon while an attack's streams are held.
struct WhileHeld {
  double rss_mib;
  long threads;
};
WhileHeld HoldThenRead(pid_t pid) {
  std::this_thread::sleep_for(kHold);
  return {MemoryOf(pid).rss_mib, ThreadsOf(pid)};
}

// What a line of held streams says: admitted, refused, the daemon while they were held.
Outcome Bounded(const std::string& what, int n, int admitted, int refused, WhileHeld held,
                const std::string& said) {
  return {
      admitted >= 1 && admitted <= kSlotsPerClient && admitted + refused == n,
      absl::StrCat(n, " ", what, ": ", admitted, " admitted, ", refused,
                   " RESOURCE_EXHAUSTED; while held: RSS ", absl::StrFormat("%.1f", held.rss_mib),
                   " MiB, ", held.threads, " threads: ", said)};
}

// One client opens kExports Chrome JSON exports of the imported capture and reads none.
Outcome HostileMemoryBench::Exports() {
  using Reader = grpc::ClientReader<v1::ExportChunk>;
  std::vector<std::unique_ptr<Held<Reader>>> held;
  v1::ExportCaptureRequest req;
  req.set_capture_id(capture_id_);
  req.set_format(v1::EXPORT_FORMAT_CHROME_JSON);
  for (int i = 0; i < kExports; ++i) {
    held.push_back(std::make_unique<Held<Reader>>());
    held.back()->ctx.set_deadline(DeadlineAt(NowNs(), kStreamDeadlineNs));
    held.back()->stream = StreamStub(i).ExportCapture(&held.back()->ctx, req);
  }
  const WhileHeld held_state = HoldThenRead(pod_->aggregator_pid());
  int admitted = 0, refused = 0;
  const std::string said = Tally<v1::ExportChunk>(held, &admitted, &refused);
  return Bounded("unread exports", kExports, admitted, refused, held_state, said);
}

// A capture of a registered host at a dead address, 60 s ahead: pending while one client
// opens kWatches WatchCapture streams on it.
Outcome HostileMemoryBench::Watches() {
  const grpc::Status reg = Register("bench-watch", 1, 0);
  v1::StartCaptureResponse started;
  {
    grpc::ClientContext ctx;
    v1::StartCaptureRequest req;
    req.add_host_names("bench-watch");
    req.set_duration_ms(1000);
    req.set_delay_ms(60'000);
    const grpc::Status s = stub_->StartCapture(&ctx, req, &started);
    if (!reg.ok() || !s.ok()) {
      return {false, "no capture to watch: " + reg.error_message() + s.error_message()};
    }
  }
  using Reader = grpc::ClientReader<v1::CaptureProgress>;
  std::vector<std::unique_ptr<Held<Reader>>> held;
  v1::WatchCaptureRequest req;
  req.set_capture_id(started.capture_id());
  for (int i = 0; i < kWatches; ++i) {
    held.push_back(std::make_unique<Held<Reader>>());
    held.back()->ctx.set_deadline(DeadlineAt(NowNs(), kWatchDeadlineNs));
    held.back()->stream = StreamStub(i).WatchCapture(&held.back()->ctx, req);
  }
  const WhileHeld held_state = HoldThenRead(pod_->aggregator_pid());
  int admitted = 0, refused = 0;
  const std::string said = Tally<v1::CaptureProgress>(held, &admitted, &refused);
  grpc::ClientContext ctx;
  v1::CancelCaptureRequest cancel;
  cancel.set_capture_id(started.capture_id());
  v1::CancelCaptureResponse cancelled;
  stub_->CancelCapture(&ctx, cancel, &cancelled).ok();
  return Bounded("watch streams", kWatches, admitted, refused, held_state, said);
}

// One client opens kImports ImportXSpace streams and sends nothing; each ends at its deadline
// (before the service's own 60 s) unless refused.
Outcome HostileMemoryBench::IdleImports() {
  struct Import {
    grpc::ClientContext ctx;
    v1::ImportXSpaceResponse resp;
    std::unique_ptr<grpc::ClientWriter<v1::ImportXSpaceChunk>> stream;
  };
  std::vector<std::unique_ptr<Import>> held;
  for (int i = 0; i < kImports; ++i) {
    held.push_back(std::make_unique<Import>());
    held.back()->ctx.set_deadline(DeadlineAt(NowNs(), kStreamDeadlineNs));
    held.back()->stream = StreamStub(i).ImportXSpace(&held.back()->ctx, &held.back()->resp);
  }
  const WhileHeld held_state = HoldThenRead(pod_->aggregator_pid());
  int admitted = 0, refused = 0;
  std::string said;
  for (auto& h : held) {
    // Ends an admitted import (with no file) at once; a refused one says so.
    h->stream->WritesDone();
    const grpc::Status s = h->stream->Finish();
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      said = s.error_message();
    } else {
      ++admitted;
    }
  }
  return Bounded("idle imports", kImports, admitted, refused, held_state, said);
}

// The fixture's chunks as its host's agent sends them (blocks in the store's encoding), and the
// host's registration.
std::vector<v1::CaptureChunk> FixtureChunks(v1::HostInfo* host) {
  class Collect final : public stream::ChunkSink {
   public:
    bool Write(const v1::CaptureChunk& c) override {
      chunks.push_back(c);
      return true;
    }
    std::vector<v1::CaptureChunk> chunks;
  } sink;
  absl::StatusOr<trace::HostCapture> capture = trace::ReadXSpaceFile(kFixture);
  if (!capture.ok()) return {};
  for (const trace::Chip& c : capture->host.chips) *host->add_chips() = stream::ChipInfoOf(c);
  stream::ChunkCounts counts;
  if (!stream::StreamCapture(*capture, *host, {}, 1 << 20, &sink, &counts, /*columns=*/true).ok()) {
    return {};
  }
  return std::move(sink.chunks);
}

// A registered host whose agent streams without end; the capture of it runs until the host
// fails at the daemon's cap.
Outcome HostileMemoryBench::EndlessStream() {
  v1::RegisterRequest reg;
  v1::HostInfo* host = reg.mutable_host();
  host->set_host_name("bench-endless");
  host->set_agent_version("0.0.0");
  EndlessAgent agent(FixtureChunks(host));
  host->set_agent_address(agent.address());
  reg.set_agent_start_ns(NowNs());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(NowNs(), 30 * kS));
    v1::RegisterResponse resp;
    if (grpc::Status s = stub_->Register(&ctx, reg, &resp); !s.ok()) {
      return {false, "the registration failed: " + s.error_message()};
    }
  }
  v1::StartCaptureRequest start;
  start.add_host_names("bench-endless");
  start.set_duration_ms(1000);
  v1::StartCaptureResponse started;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(NowNs(), 30 * kS));
    if (grpc::Status s = stub_->StartCapture(&ctx, start, &started); !s.ok()) {
      return {false, "the capture did not start: " + s.error_message()};
    }
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(NowNs(), 120 * kS));
  v1::WatchCaptureRequest watch;
  watch.set_capture_id(started.capture_id());
  auto reader = stub_->WatchCapture(&ctx, watch);
  v1::CaptureProgress p;
  std::string error;
  while (reader->Read(&p)) {
    if (p.has_host() && !p.host().error_message().empty()) error = p.host().error_message();
  }
  reader->Finish().IgnoreError();
  const bool held = error.find("ingest.max_host_stream_bytes") != std::string::npos;
  return {held, absl::StrFormat("the agent sent %.0f MB; the host failed: %s", agent.sent() / 1e6,
                                error.empty() ? "(no error)" : error)};
}

int HostileMemoryBench::Main() {
  const pid_t pid = pod_->aggregator_pid();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const Memory idle = MemoryOf(pid);
  baseline_mib_ = idle.rss_mib;
  ResetPeak(pid);
  capture_id_ = Import();
  const Memory imported = MemoryOf(pid);
  std::printf(
      "baseline: idle RSS %.1f MiB (peak at start-up %.1f); normal import of %s: "
      "peak %.1f MiB (%.2fx idle), RSS after %.1f MiB\n",
      idle.rss_mib, idle.peak_mib, fs::path(kFixture).filename().c_str(), imported.peak_mib,
      imported.peak_mib / baseline_mib_, imported.rss_mib);
  std::fflush(stdout);
  if (capture_id_.empty()) return 1;
  bool ok = true;
  ok &= Play("telemetry for unregistered chips",
             "refused; a host holds one roll-up and 30 s of samples per registered chip",
             [&] { return Telemetry(); });
  ok &= Play("Register 100,000 chips / 12.6 MB", "refused; a registration holds <= 64 KiB",
             [&] { return Registrations(); });
  ok &= Play("64 unread ExportCapture", "8 a client, 32 in all; ~0.5 GiB for 32 streams",
             [&] { return Exports(); });
  ok &= Play("600 WatchCapture", "8 a client, 32 in all", [&] { return Watches(); });
  ok &= Play("64 idle ImportXSpace", "8 a client, 32 in all; cancelled after 60 s idle",
             [&] { return IdleImports(); });
  ok &= Play("a capture stream without end",
             absl::StrCat("ingest.max_host_stream_bytes (", kHostStreamBytes >> 20,
                          " MiB here) a host, max_stream_bytes in all"),
             [&] { return EndlessStream(); });
  std::printf("unit bound: MemoryMax=4G (4096 MiB); largest peak %.1f MiB (%.2fx idle)\n",
              max_peak_mib_, max_peak_mib_ / baseline_mib_);
  std::printf("aggregator_peak_rss_mib=%.1f\n", max_peak_mib_);
  return ok ? 0 : 1;
}

int Main(int argc, char** argv) {
  int reports = 4, report_mb = 9;
  if (const int stop =
          bench::ParseFlags(argc, argv, kUsage,
                            {{"--reports", [&](const char* v) { reports = std::atoi(v); }},
                             {"--report-mb", [&](const char* v) { report_mb = std::atoi(v); }}});
      stop >= 0) {
    return stop;
  }
  const std::string bin = fs::path(fs::read_symlink("/proc/self/exe")).parent_path().string();
  launch::PodOptions options;
  options.bin_dir = bin;
  options.dir = "/tmp/bench_hostile_memory_" + std::to_string(getpid());
  options.hosts = 0;
  options.agents = false;
  options.aggregator_config =
      absl::StrCat("[ingest]\nmax_host_stream_bytes = ", kHostStreamBytes, "\n");
  launch::Pod pod(options);
  if (absl::Status s = pod.StartAggregator(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const int rc = HostileMemoryBench(&pod, reports, report_mb).Main();
  pod.StopAll();
  fs::remove_all(options.dir);
  return rc;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
