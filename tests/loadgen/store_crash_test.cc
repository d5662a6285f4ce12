// The store through crashes (docs/RELIABILITY.md): a real podprof-aggregator ingesting a
// 64-host pod from podprof-loadgen is killed with SIGKILL after a random one of the capture's
// progress events (its start, each host's delivery, the pod's write) or after its end, 20 times
// over one database. After each kill the store is opened as the next
// aggregator opens it (CaptureWriter::Recover) and must hold every capture either complete and
// exact (each event and sample the hosts sent, every record's checksum right) or marked
// interrupted or partial; never a row pointing at bytes that are not there. The seed is printed
// and can be set (PODPROF_CRASH_SEED) to replay a run.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness/wait.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "storage/health.h"
#include "storage/store.h"
#include "tests/util/child_process.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;
using podprof::testing::ChildProcess;

std::string Bin(const std::string& n) { return std::string(PODPROF_BIN_DIR) + "/" + n; }

constexpr int kHosts = 64;
constexpr int kRuns = 20;
constexpr int kDurationMs = 200;

class StoreCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("store_crash_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(P("agg.toml")) << "[agents]\nheartbeat_interval = \"300ms\"\n"
                                    "probe_interval = \"500ms\"\n";
  }
  void TearDown() override {
    stub_.reset();
    loadgen_.reset();
    aggregator_.reset();
    if (!mounted_.empty()) ::umount2(mounted_.c_str(), MNT_DETACH);
    fs::remove_all(dir_);
  }
  std::string P(const std::string& f) const { return (dir_ / f).string(); }

  // (Re)starts the aggregator on `listen`, its files in `dir` (default: the test's folder),
  // and connects to it; its port.
  int StartAggregator(const std::string& listen, const fs::path& dir = {}) {
    const fs::path in = dir.empty() ? dir_ : dir;
    fs::remove(in / "agg.json");
    aggregator_ = testing::StartAggregator(Bin("podprof-aggregator"), in, listen);
    EXPECT_TRUE(aggregator_->ready());
    if (!aggregator_->ready()) return 0;
    const int port = aggregator_->info()["port"];
    stub_ = v1::Aggregator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    return port;
  }

  // Until `hosts` hosts are online with their clocks probed (up to 30 s).
  bool WaitForProbedAgents(int hosts = kHosts) {
    return testing::WaitFor([&] { return testing::ProbedAgents(*stub_) == hosts; },
                            absl::Seconds(30));
  }

  // Starts a capture of every host; its id.
  std::string StartCapture() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::StartCaptureRequest req;
    req.set_duration_ms(kDurationMs);
    v1::StartCaptureResponse started;
    EXPECT_OK(stub_->StartCapture(&ctx, req, &started));
    return started.capture_id();
  }

  // Follows capture `id`'s progress to its end, or only through its first `events` progress
  // events when `events` >= 0 (the stream ends early when the aggregator dies); how many
  // events it read. `end` gets the last one.
  int Follow(const std::string& id, int events, v1::CaptureProgress* end = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::WatchCaptureRequest w;
    w.set_capture_id(id);
    auto reader = stub_->WatchCapture(&ctx, w);
    v1::CaptureProgress p, last;
    int read = 0;
    while ((events < 0 || read < events) && reader->Read(&p)) {
      last = p;
      ++read;
    }
    if (events < 0) {
      EXPECT_OK(reader->Finish());
    }
    if (end != nullptr) *end = last;
    return read;
  }
  // Waits for capture `id` to end; whether it ended complete.
  bool WaitForEnd(const std::string& id, v1::CaptureProgress* end = nullptr) {
    v1::CaptureProgress last;
    Follow(id, -1, &last);
    if (end != nullptr) *end = last;
    return last.done() && last.status() == v1::CAPTURE_STATUS_COMPLETE;
  }

  fs::path dir_;
  std::string mounted_;  // a small filesystem the test made, unmounted in TearDown
  std::unique_ptr<ChildProcess> aggregator_, loadgen_;
  std::unique_ptr<v1::Aggregator::Stub> stub_;
};

// What the store holds after a crash, checked as the issue asks; counts of each outcome.
struct Outcomes {
  int complete = 0, interrupted = 0, partial = 0, other = 0;
};

void CheckStore(const std::string& db, Outcomes* out) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<storage::Store> store, storage::Store::Open(db));
  ASSERT_OK_AND_ASSIGN(const storage::CaptureWriter::Recovery r, store->writer().Recover());
  for (const std::string& w : r.warnings) ADD_FAILURE() << "a committed row lost its bytes: " << w;
  // PRAGMA integrity_check, and every timeline and counter row's record read with its checksum.
  ASSERT_OK(storage::CheckIntegrity(store->database()));
  std::string next;
  storage::CaptureQuery all;
  all.limit = 1000;
  ASSERT_OK_AND_ASSIGN(const std::vector<storage::CaptureRow> captures,
                       store->captures().List(all, &next));
  *out = {};
  for (const storage::CaptureRow& listed : captures) {
    switch (listed.status) {
      case storage::CaptureState::kComplete: {
        ++out->complete;
        ASSERT_OK_AND_ASSIGN(const storage::CaptureRow c, store->captures().Get(listed.id));
        ASSERT_EQ(c.host_rows.size(), static_cast<size_t>(kHosts)) << c.id;
        // Exact: every host's events as it counted them on arrival, decoded back.
        int64_t events = 0;
        ASSERT_OK(store->captures().ForEachHost(c.id, [&](storage::StoredHost& h) {
          int64_t host_events = 0;
          for (const trace::EventBlock& b : h.capture.blocks) host_events += b.size();
          EXPECT_EQ(host_events, h.row.events) << c.id << " " << h.row.host;
          EXPECT_EQ(h.row.status, storage::HostOutcome::kComplete) << c.id << " " << h.row.host;
          events += host_events;
          return absl::OkStatus();
        }));
        EXPECT_EQ(events, c.events) << c.id;
        EXPECT_GT(events, 0) << c.id;
        break;
      }
      case storage::CaptureState::kInterrupted:
        ++out->interrupted;
        break;
      case storage::CaptureState::kPartial:
        ++out->partial;
        break;
      default:
        ++out->other;
        ADD_FAILURE() << "capture " << listed.id << " is "
                      << storage::CaptureStateName(listed.status);
    }
  }
}

TEST_F(StoreCrashTest, KillNineDuringIngestLeavesEveryCaptureWholeOrMarked) {
  uint32_t seed = 58;
  if (const char* s = std::getenv("PODPROF_CRASH_SEED")) seed = static_cast<uint32_t>(std::atoi(s));
  std::cout << "seed " << seed << " (PODPROF_CRASH_SEED replays it)" << std::endl;
  std::mt19937 rng(seed);
  const int port = StartAggregator("127.0.0.1:0");
  ASSERT_GT(port, 0);
  loadgen_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{Bin("podprof-loadgen"), "--insecure",
                               absl::StrCat("--aggregator=127.0.0.1:", port),
                               absl::StrCat("--agents=", kHosts), "--chips=2", "--pod-seed=9",
                               "--exit-after=10m", "--ready-file=" + P("loadgen.json")},
      P("loadgen.json"));
  ASSERT_TRUE(loadgen_->ready());
  // The first capture runs to its end, to count the progress events a capture and its ingest
  // send: the kills below land after a random one of them, a point of the capture's own course
  // rather than an instant of the clock.
  ASSERT_TRUE(WaitForProbedAgents()) << "the emulated agents did not all register";
  v1::CaptureProgress first;
  const int events = Follow(StartCapture(), -1, &first);
  ASSERT_EQ(first.status(), v1::CAPTURE_STATUS_COMPLETE) << first.summary().error_message();
  std::cout << "a capture of " << kHosts << " hosts and its ingest: " << events
            << " progress events" << std::endl;
  Outcomes seen;
  int interrupted_runs = 0;
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE(absl::StrCat("run ", run, " of seed ", seed));
    if (run > 0) {
      ASSERT_GT(StartAggregator(absl::StrCat("127.0.0.1:", port)), 0);
    }
    ASSERT_TRUE(WaitForProbedAgents()) << "the agents did not come back";
    const std::string id = StartCapture();
    // Every fifth run after the capture's end (its commit), the others after a random one of
    // its progress events: from its start through every host's delivery to the pod's write.
    std::uniform_int_distribution<int> at(0, events - 1);
    const int kill_after = run % 5 == 4 ? -1 : at(rng);
    const int read = Follow(id, kill_after);
    aggregator_->Signal(SIGKILL);
    aggregator_->Wait();
    Outcomes now;
    CheckStore(P("pod.db"), &now);
    if (HasFatalFailure()) return;
    interrupted_runs += now.interrupted > seen.interrupted;
    std::cout << "run " << run << ": killed after " << read << " of its progress events"
              << (kill_after < 0 ? " (its end)" : "") << "; captures complete " << now.complete
              << ", interrupted " << now.interrupted << ", partial " << now.partial << std::endl;
    seen = now;
  }
  EXPECT_EQ(seen.other, 0);
  EXPECT_EQ(seen.partial, 0) << "no committed capture lost bytes";
  // Both sides of the commit were hit: kills that interrupted an ingest, and kills after.
  EXPECT_GT(interrupted_runs, 0);
  EXPECT_GT(seen.complete, 1);
}

// A disk that fills during a capture's write: the aggregator's store on a 3 MiB filesystem
// made for the test, and 8 hosts sending about 1.7 MB each. The capture fails naming the full
// disk, the daemon stays up and answers, and what it stored is whole.
TEST_F(StoreCrashTest, ADiskFullDuringAWriteFailsTheCaptureByNameAndTheDaemonServesOn) {
  const fs::path small = dir_ / "small";
  fs::create_directories(small);
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=3m") != 0) {
    GTEST_SKIP() << "cannot make a small filesystem here (mount tmpfs: " << std::strerror(errno)
                 << "); this test needs root, as CI has";
  }
  mounted_ = small.string();
  fs::copy_file(P("agg.toml"), small / "agg.toml");
  const int port = StartAggregator("127.0.0.1:0", small);
  ASSERT_GT(port, 0);
  constexpr int kSmallPod = 8;
  loadgen_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{Bin("podprof-loadgen"), "--insecure",
                               absl::StrCat("--aggregator=127.0.0.1:", port),
                               absl::StrCat("--agents=", kSmallPod), "--chips=4", "--pod-seed=3",
                               "--exit-after=5m", "--ready-file=" + P("loadgen.json")},
      P("loadgen.json"));
  ASSERT_TRUE(loadgen_->ready());
  ASSERT_TRUE(WaitForProbedAgents(kSmallPod));
  grpc::ClientContext sctx;
  sctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::StartCaptureRequest req;
  req.set_duration_ms(1000);
  v1::StartCaptureResponse started;
  ASSERT_OK(stub_->StartCapture(&sctx, req, &started));
  v1::CaptureProgress end;
  EXPECT_FALSE(WaitForEnd(started.capture_id(), &end));
  ASSERT_TRUE(end.done());
  EXPECT_NE(end.status(), v1::CAPTURE_STATUS_COMPLETE);
  // The error names the full disk, on the capture or on the hosts it cost.
  std::string errors = end.summary().error_message();
  for (const auto& h : end.summary().hosts()) absl::StrAppend(&errors, "\n", h.error_message());
  EXPECT_TRUE(absl::StrContains(errors, "No space left") || absl::StrContains(errors, "full"))
      << errors;
  std::cout << "capture " << v1::CaptureStatus_Name(end.status()) << ": "
            << end.summary().error_message() << std::endl;
  // Still up and serving: the agents and the capture list answer.
  grpc::ClientContext lctx;
  lctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListCapturesResponse listed;
  ASSERT_OK(stub_->ListCaptures(&lctx, v1::ListCapturesRequest(), &listed));
  EXPECT_GE(listed.captures_size(), 1);
  EXPECT_EQ(aggregator_->pid() > 0 && ::kill(aggregator_->pid(), 0) == 0, true);
  loadgen_.reset();
  EXPECT_EQ(aggregator_->Stop(), 0) << "it stops cleanly";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<storage::Store> store,
                       storage::Store::Open((small / "pod.db").string()));
  ASSERT_OK(storage::CheckIntegrity(store->database()));
}

}  // namespace
}  // namespace podprof
