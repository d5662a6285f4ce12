// Hostile and broken agents against the real Orchestrator, Registry and Store (SQLite in a temp
// folder), over real gRPC on loopback: a scripted agent plays back a real capture (the v6e
// fixture) with its own summary, as an agent that analyses its host streams it, after one
// tampering of what it sends. Each attack ends in that host failing with a named reason while
// an honest agent's host of the same capture is stored and readable, and the aggregator goes
// on: the next capture of both hosts works.
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "aggregator/api/queries.h"
#include "aggregator/api/service.h"
#include "aggregator/capture/orchestrator.h"
#include "aggregator/capture/registry.h"
#include "analysis/host_summary.h"
#include "common/clock.h"
#include "common/zstd_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/podprof_agent.grpc.pb.h"
#include "storage/store.h"
#include "stream/capture_encoder.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"
#include "tests/util/trace_fixtures.h"
#include "trace/xspace_reader.h"

namespace podprof::aggregator {
namespace {

namespace v1 = podprof::v1;
using ::testing::HasSubstr;

constexpr int64_t kHeartbeatNs = int64_t{3600} * 1'000'000'000;  // nobody goes stale here
constexpr size_t kChunkBytes = 1 << 20;

// How one attack changes what an agent sends: its summary before it is encoded, then the
// encoded chunks.
struct Tampering {
  std::function<void(analysis::HostSummary*)> summary = [](analysis::HostSummary*) {};
  std::function<void(std::vector<v1::CaptureChunk>*)> chunks = [](std::vector<v1::CaptureChunk>*) {
  };
};

class Collect final : public stream::ChunkSink {
 public:
  bool Write(const v1::CaptureChunk& c) override {
    chunks.push_back(c);
    return true;
  }
  std::vector<v1::CaptureChunk> chunks;
};

// The fixture's capture, as the agent of host `name` describes and streams it.
struct Recorded {
  v1::HostInfo host;
  trace::HostCapture capture;
};

Recorded Record(const std::string& name) {
  Recorded r;
  auto capture =
      trace::ReadXSpaceFile(testing::FixturePath("tpu_v6e_4chip_host_offload.xplane.pb"));
  EXPECT_OK(capture);
  if (!capture.ok()) return r;
  r.capture = std::move(*capture);
  r.host.set_host_name(name);
  for (const trace::Chip& c : r.capture.host.chips) *r.host.add_chips() = stream::ChipInfoOf(c);
  return r;
}

// The chunks an agent that analyses its host sends: the capture with its blocks encoded as
// the store keeps them, its summary, a trailer; `t` applied.
std::vector<v1::CaptureChunk> Chunks(const Recorded& r, const Tampering& t) {
  Collect sink;
  stream::ChunkCounts counts;
  EXPECT_OK(stream::StreamCapture(r.capture, r.host, {}, kChunkBytes, &sink, &counts,
                                  /*columns=*/true));
  analysis::HostSummary summary = analysis::SummariseHost(r.capture);
  t.summary(&summary);
  absl::StatusOr<uint64_t> rows =
      stream::StreamSummary(summary, r.capture.host.chips, kChunkBytes, &sink, &counts);
  EXPECT_OK(rows);
  v1::CaptureTrailer trailer;
  trailer.set_event_count(counts.events);
  trailer.set_kernel_count(counts.kernels);
  trailer.set_summary_rows(rows.ok() ? *rows : 0);
  sink.chunks.push_back(stream::EncodeTrailer(trailer, kChunkBytes));
  t.chunks(&sink.chunks);
  return sink.chunks;
}

// An agent's gRPC surface that answers probes on the test's clock and plays back the chunks it
// is given to every Capture call.
class ScriptedAgent final : public v1::Agent::Service {
 public:
  explicit ScriptedAgent(Clock& clock) : clock_(clock) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~ScriptedAgent() override {
    if (server_ != nullptr) {
      server_->Shutdown();  // the orchestrator went first: no call is left to wait for
      server_->Wait();
    }
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  void Play(std::vector<v1::CaptureChunk> chunks) {
    absl::MutexLock lock(&mu_);
    chunks_ = std::move(chunks);
  }

  grpc::Status Ping(grpc::ServerContext*, const v1::PingRequest* req,
                    v1::PingResponse* resp) override {
    resp->set_client_send_ns(req->client_send_ns());
    resp->set_agent_receive_ns(clock_.NowNs());
    resp->set_agent_send_ns(clock_.NowNs());
    return grpc::Status::OK;
  }
  grpc::Status Capture(grpc::ServerContext*, const v1::CaptureRequest*,
                       grpc::ServerWriter<v1::CaptureChunk>* out) override {
    absl::MutexLock lock(&mu_);
    for (const v1::CaptureChunk& c : chunks_) {
      if (!out->Write(c)) break;
    }
    return grpc::Status::OK;
  }

 private:
  Clock& clock_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  std::vector<v1::CaptureChunk> chunks_ ABSL_GUARDED_BY(mu_);
};

class HostileAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = storage::Store::Open(db_.path());
    ASSERT_OK(store);
    store_ = std::move(*store);
    for (auto [name, agent] : {std::pair{"honest", &honest_}, std::pair{"hostile", &hostile_}}) {
      v1::RegisterRequest r;
      *r.mutable_host() = Record(name).host;
      r.mutable_host()->set_agent_address(agent->address());
      ASSERT_OK(registry_.Register(r));
    }
    honest_.Play(Chunks(Record("honest"), {}));
    OrchestratorLimits limits;
    orchestrator_ = std::make_unique<Orchestrator>(&registry_, &store_->writer(), clock_, limits);
  }
  void TearDown() override {
    orchestrator_.reset();
    store_.reset();
  }

  // A capture of both hosts, run to its end: the clock moves on while the real streams flow.
  storage::CaptureRow CaptureBoth() {
    v1::StartCaptureRequest req;
    req.add_host_names("honest");
    req.add_host_names("hostile");
    req.set_duration_ms(1000);
    absl::StatusOr<v1::StartCaptureResponse> started = orchestrator_->Start(req);
    EXPECT_OK(started);
    if (!started.ok()) return {};
    absl::Notification done;
    std::thread watcher([&] {
      EXPECT_OK(orchestrator_->Watch(
          started->capture_id(), [](const v1::CaptureProgress&) { return true; },
          [] { return false; }));
      done.Notify();
    });
    // The orchestrator sleeps on the clock until the window's start, then its end: each time
    // it is found asleep the clock moves a second; then the streams flow and the capture ends.
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
      if (clock_.Sleepers() > 0) clock_.AdvanceNs(1'000'000'000);
    }
    watcher.join();
    absl::StatusOr<storage::CaptureRow> row = store_->captures().Get(started->capture_id());
    EXPECT_OK(row);
    return row.ok() ? *row : storage::CaptureRow();
  }

  // The attack's capture: the honest host stored and its kernels readable, the hostile one
  // failed saying `says`; then a capture of both honest agents is whole.
  void ExpectRefused(const Tampering& t, const std::string& says) {
    hostile_.Play(Chunks(Record("hostile"), t));
    storage::CaptureRow row = CaptureBoth();
    EXPECT_EQ(row.status, storage::CaptureState::kPartial);
    ASSERT_EQ(row.host_rows.size(), 2u);
    for (const storage::HostRow& h : row.host_rows) {
      if (h.host == "honest") {
        EXPECT_EQ(h.status, storage::HostOutcome::kComplete) << h.error;
        EXPECT_GT(h.events, 0);
      } else {
        EXPECT_EQ(h.status, storage::HostOutcome::kFailed);
        EXPECT_THAT(h.error, HasSubstr(says));
      }
    }
    storage::StatsQuery q;
    q.capture_id = row.id;
    q.group_by = storage::Grouping::kCategory;
    absl::StatusOr<std::vector<storage::StatRow>> stats = store_->kernels().Stats(q);
    ASSERT_OK(stats);
    EXPECT_FALSE(stats->empty());
    // The daemon goes on: the same agent, honest again, is stored whole.
    hostile_.Play(Chunks(Record("hostile"), {}));
    EXPECT_EQ(CaptureBoth().status, storage::CaptureState::kComplete);
  }

  // Far ahead of the real time: the gRPC deadlines the orchestrator and the registry take from
  // it never pass, so only the test moves time.
  FakeClock clock_{4'000'000'000'000'000'000};
  podprof::testing::TempDatabase db_{"hostile"};
  std::unique_ptr<storage::Store> store_;
  Registry registry_{clock_, kHeartbeatNs, /*probe_interval_ns=*/10'000'000'000};
  ScriptedAgent honest_{clock_};
  ScriptedAgent hostile_{clock_};
  std::unique_ptr<Orchestrator> orchestrator_;  // last: goes first
};

// Two sketches of one kernel far apart (bucket -2^31 and 1701) passed every check, and the
// pod's roll-up merged them into 2^31 buckets: std::length_error, every running capture lost.
TEST_F(HostileAgentTest, ASketchFarFromItsRowFailsTheHost) {
  Tampering t;
  t.summary = [](analysis::HostSummary* s) {
    trace::KernelStats& row = s->stats.front();
    row.sketch = trace::DDSketch();
    row.sketch.Add(static_cast<double>(row.max_ps) * 1e6, static_cast<uint64_t>(row.count));
  };
  ExpectRefused(t, "sketch holds durations outside");
}

// One NaN in a host's counter attribution failed the whole capture, left `running`.
TEST_F(HostileAgentTest, ANaNAttributionFailsTheHostNotTheCapture) {
  Tampering t;
  t.summary = [](analysis::HostSummary* s) {
    // The fixture's chips sample no counter: the attribution a broken agent adds.
    trace::KernelCounter a;
    a.chip = s->stats.front().chip;
    a.kernel = s->stats.front().kernel;
    a.counter = "hbm_bandwidth";
    a.integral = std::nan("");
    a.covered_ps = s->stats.front().total_ps;
    a.executions = s->stats.front().count;
    s->attributions.push_back(a);
  };
  ExpectRefused(t, "is not a measurement");
}

// Events of 100 us were stored as an hour each; two rows of 2^62 ps wrapped the roll-up.
TEST_F(HostileAgentTest, DurationsBeyondTheWindowFailTheHost) {
  Tampering t;
  t.summary = [](analysis::HostSummary* s) {
    trace::KernelStats& row = s->stats.front();
    row.max_ps = int64_t{3600} * 1'000'000'000'000;
    row.total_ps = row.max_ps * row.count;
    row.sketch = trace::DDSketch();
    row.sketch.Add(static_cast<double>(row.min_ps), static_cast<uint64_t>(row.count - 1));
    row.sketch.Add(static_cast<double>(row.max_ps));
  };
  ExpectRefused(t, "longer than the capture allows");
}

// The same blocks over and over where blocks go, five times in all: valid chunks, as a stream
// that never ends sends them.
Tampering BlocksRepeated() {
  Tampering t;
  t.chunks = [](std::vector<v1::CaptureChunk>* chunks) {
    std::vector<v1::CaptureChunk> blocks;
    size_t after = 0;
    for (size_t i = 0; i < chunks->size(); ++i) {
      if (!(*chunks)[i].has_event_block()) continue;
      blocks.push_back((*chunks)[i]);
      after = i + 1;
    }
    for (int i = 0; i < 4; ++i)
      chunks->insert(chunks->begin() + after, blocks.begin(), blocks.end());
  };
  return t;
}

// A block's header count was trusted: one event was stored as 10^15.
// A stream that never ends was held whole until its deadline (2.5 GB in 8 s): past
// ingest.max_host_stream_bytes its host fails, and what it sent is let go.
TEST_F(HostileAgentTest, AStreamPastTheHostLimitFailsTheHost) {
  size_t honest_bytes = 0;
  for (const v1::CaptureChunk& c : Chunks(Record("honest"), {})) honest_bytes += c.ByteSizeLong();
  OrchestratorLimits limits;
  limits.max_host_stream_bytes = static_cast<int64_t>(honest_bytes) + (64 << 10);
  orchestrator_ = std::make_unique<Orchestrator>(&registry_, &store_->writer(), clock_, limits);
  ExpectRefused(BlocksRepeated(), "ingest.max_host_stream_bytes");
}

// Each host's cap alone let max_active_hosts streams hold 16 GiB at once, past the unit's
// MemoryMax=4G: past ingest.max_stream_bytes, the stream holding the most fails, and the honest
// host streaming beside it is stored.
TEST_F(HostileAgentTest, StreamsPastTheBudgetOfAllHostsFailTheLargest) {
  size_t honest_bytes = 0;
  for (const v1::CaptureChunk& c : Chunks(Record("honest"), {})) honest_bytes += c.ByteSizeLong();
  OrchestratorLimits limits;
  limits.max_stream_bytes = static_cast<int64_t>(honest_bytes) * 2 + (64 << 10);
  orchestrator_ = std::make_unique<Orchestrator>(&registry_, &store_->writer(), clock_, limits);
  ExpectRefused(BlocksRepeated(), "ingest.max_stream_bytes");
}

// A stream let go keeps its bytes counted until it sees so and leaves; meanwhile they do not
// count against the others (an honest host was failed because of them, under load).
TEST(StreamBudgetTest, AStreamLetGoDoesNotCrowdOutTheOthersBeforeItLeaves) {
  StreamBudget budget(100);
  const int64_t honest = budget.Join(), hostile = budget.Join();
  EXPECT_TRUE(budget.Take(honest, 30));
  EXPECT_FALSE(budget.Take(hostile, 80)) << "past the limit, and the largest: let go";
  EXPECT_FALSE(budget.Take(hostile, 1));
  EXPECT_TRUE(budget.Take(honest, 40)) << "70 held by the streams still held";
  EXPECT_EQ(budget.used(), 151);
  EXPECT_FALSE(budget.Take(honest, 31)) << "past the limit on its own";
  budget.Leave(hostile);
  budget.Leave(honest);
  EXPECT_EQ(budget.used(), 0);
}

TEST(StreamBudgetTest, PastTheLimitTheLargestStreamGoes) {
  StreamBudget budget(100);
  const int64_t small = budget.Join(), large = budget.Join();
  EXPECT_TRUE(budget.Take(small, 30));
  EXPECT_TRUE(budget.Take(large, 60));
  // The small stream's chunk passes the limit: the large one goes, at its next chunk.
  EXPECT_TRUE(budget.Take(small, 20));
  EXPECT_FALSE(budget.Take(large, 1));
  EXPECT_EQ(budget.used(), 111);
  budget.Leave(large);
  EXPECT_EQ(budget.used(), 50);
  EXPECT_TRUE(budget.Take(small, 50));
  // Alone past the limit, the taker itself goes.
  EXPECT_FALSE(budget.Take(small, 1));
  budget.Leave(small);
  EXPECT_EQ(budget.used(), 0);
}

TEST_F(HostileAgentTest, ABlockClaimingMoreEventsThanItHoldsFailsTheHost) {
  Tampering t;
  t.chunks = [](std::vector<v1::CaptureChunk>* chunks) {
    for (v1::CaptureChunk& c : *chunks) {
      if (!c.has_event_block() || c.event_block().columns().empty()) continue;
      std::string raw = std::string("\x80\x80\x80\x80\x80\x80\x80\xe3\x01", 9);  // ~10^15
      raw += std::string("\x02\x0a\x01\x00", 4);
      c.mutable_event_block()->set_columns(ZstdCompress(raw, 1, 10));
      return;
    }
    ADD_FAILURE() << "no encoded block to tamper with";
  };
  ExpectRefused(t, "timeline block claims");
}

// Long calls are bounded as HTTP's downloads are: an import whose client sends nothing is
// cancelled after 60 s of the service's clock (it held a thread and a spool file for good), and
// one client holds at most 8 long calls at once; others are served meanwhile.
TEST_F(HostileAgentTest, IdleImportsAreCancelledAndOneClientHoldsAtMostEight) {
  Queries queries(*store_, registry_);
  AccessControl access;
  access.operators.plaintext = true;
  AccessRules rules(access);
  AggregatorService service(&queries, StoreReads(*store_), &store_->writer(), &registry_,
                            orchestrator_.get(), &clock_, ImportLimits{}, &rules);
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  auto stub = v1::Aggregator::NewStub(channel);

  struct Held {
    grpc::ClientContext context;
    v1::ImportXSpaceResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::ImportXSpaceChunk>> writer;
  };
  std::vector<std::unique_ptr<Held>> held;
  const int sleepers = clock_.Sleepers();
  for (int i = 0; i < kMaxLongCallsPerClient; ++i) {
    held.push_back(std::make_unique<Held>());
    held.back()->writer = stub->ImportXSpace(&held.back()->context, &held.back()->response);
  }
  // Each held import's watchdog waits on the clock.
  ASSERT_TRUE(clock_.AwaitSleepers(sleepers + kMaxLongCallsPerClient, absl::Seconds(20)));
  {
    Held ninth;
    ninth.writer = stub->ImportXSpace(&ninth.context, &ninth.response);
    ninth.writer->WritesDone();
    grpc::Status s = ninth.writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("the most one client may"));
  }
  // A read is served meanwhile.
  {
    grpc::ClientContext ctx;
    v1::ListCapturesResponse list;
    EXPECT_TRUE(stub->ListCaptures(&ctx, v1::ListCapturesRequest(), &list).ok());
  }
  clock_.AdvanceNs(kImportReadLimitNs + 1'000'000'000);
  for (auto& h : held) {
    grpc::Status s = h->writer->Finish();
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::CANCELLED ||
                s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
        << s.error_code() << " " << s.error_message();
  }
  // Every slot was given back.
  held.clear();
  auto again = std::make_unique<Held>();
  again->writer = stub->ImportXSpace(&again->context, &again->response);
  again->writer->WritesDone();
  grpc::Status s = again->writer->Finish();
  EXPECT_NE(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  server->Shutdown();  // every import above has ended
}

}  // namespace
}  // namespace podprof::aggregator
