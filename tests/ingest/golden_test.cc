// Results unchanged (issue #37): what `podprof stats --format csv`, `stragglers` and `kernel`
// print for seeded pods and for the real captures, compared with golden files made before the
// analysis moved. A change to how a host is analysed, where, or how its rows travel must leave
// every figure a user reads as it was.
//
// The pod is the load generator's (the same chunks an emulated agent streams), its hosts on
// clocks skewed by the seed and corrected by their true errors, so that nothing here depends
// on a clock probe's noise. The fixtures are imported as `podprof import` stores them. The
// store is then read the way a user reads it: the built aggregator on the file, the built CLI.
//
// PODPROF_UPDATE_GOLDEN=1 rewrites tests/data/golden/ from this run instead of comparing; do
// that only for a change meant to change what users read, and say so in its commit.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "analysis/host_summary.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "ingest/capture_ingest.h"
#include "loadgen/capture_source.h"
#include "loadgen/emulated_host.h"
#include "storage/store.h"
#include "stream/capture_decoder.h"
#include "tests/util/child_process.h"
#include "tests/util/files.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/byte_source.h"
#include "trace/columns.h"
#include "trace/xspace_reader.h"

namespace podprof::ingest {
namespace {

namespace fs = std::filesystem;
using testing::PodprofResult;
using testing::RunPodprof;

const char* kEnv = "PODPROF_AGGREGATOR= PODPROF_PROFILE= PODPROF_CLI_CONFIG=/nonexistent/cli.toml";
constexpr int64_t kTrueStartNs = 1'767'225'600'000'000'000;  // 2026-01-01T00:00:00Z
constexpr int64_t kDurationMs = 300;
constexpr int kHosts = 4;

// A v5p pod of four hosts with one slow chip, so that its collectives name a straggler.
sim::PodConfig SeededPod() {
  sim::PodConfig pod;
  pod.generation = "v5p";
  pod.hosts = kHosts;
  pod.pod_seed = 37;
  pod.stragglers.push_back({/*host=*/2, /*chip=*/1, /*factor=*/1.25});
  return pod;
}

// One host's stream as the aggregator receives it, decoded; its name from its host info. With
// the agent's summary in the stream, that summary (checked as the aggregator checks it), else
// the host analysed here.
void Receive(const loadgen::GeneratedCapture& generated, trace::HostCapture* out,
             analysis::HostSummary* summary) {
  stream::CaptureDecoder decoder;
  for (const auto& chunk : generated.chunks) ASSERT_OK(decoder.Add(chunk));
  ASSERT_TRUE(decoder.done());
  *out = std::move(decoder.capture());
  out->host.name = generated.chunks.front().host_info().host_name();
  if (decoder.has_summary()) {
    *summary = std::move(decoder.summary());
    ASSERT_OK(analysis::CheckSummary(*summary, out->host.chips.size(), out->kernels.size()));
    ASSERT_OK(analysis::VerifySummary(*summary, decoder.tally()));
    return;
  }
  ASSERT_OK(trace::DecodeEncodedSeries(out));
  *summary = analysis::SummariseHost(*out);
}

// The seeded pod, stored as a live capture stores it: each host analysed on its own clock (by
// its agent when `agents_analyse`) and its data written ahead, then the pod's roll-ups and
// collectives with every host's correction.
void StorePod(storage::Store& store, const std::string& id, bool agents_analyse) {
  auto source = loadgen::CaptureSource::Create(SeededPod(), /*counters=*/true);
  ASSERT_OK(source);
  FakeClock truth(kTrueStartNs);
  const auto hosts = loadgen::MakeHosts(0, kHosts, 37, 40'000'000, 20, truth);
  // On record as running before its hosts' data is written ahead, as the orchestrator does.
  storage::CaptureWrite w;
  w.id = id;
  w.start_ns = kTrueStartNs;
  w.end_ns = kTrueStartNs + kDurationMs * 1'000'000;
  w.created_ns = kTrueStartNs + 2'000'000'000;
  w.labels = {{"job", "golden"}};
  ASSERT_OK(store.writer().BeginCapture(w));
  PodAnalysis pod;
  pod.ExpectHosts(kHosts);
  std::vector<AnalysedHost> analysed;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const loadgen::EmulatedHost& h = *hosts[i];
    auto generated = (*source)->Generate(h, h.clock.ToHost(kTrueStartNs), kDurationMs,
                                         size_t{256} << 10, agents_analyse);
    ASSERT_OK(generated);
    // The summary travels just before the trailer, when asked for.
    ASSERT_GE(generated->chunks.size(), 2u);
    ASSERT_EQ(generated->chunks[generated->chunks.size() - 2].has_summary(), agents_analyse);
    trace::HostCapture cap;
    analysis::HostSummary summary;
    ASSERT_NO_FATAL_FAILURE(Receive(*generated, &cap, &summary));
    auto a = MergeHost(store.writer(), i, cap, std::move(summary), &pod);
    ASSERT_OK(a);
    a->write.analysed_by = agents_analyse ? "agent" : "aggregator";
    a->write.host = cap.host.name;
    ASSERT_OK(store.writer().WriteHostData(id, &a->write));
    SetHostClock({h.clock.offset_ns(), h.clock.drift_ppm() * 1000, h.clock.epoch_ns()}, &*a);
    a->write.bytes = generated->counts.bytes;
    analysed.push_back(std::move(*a));
  }
  ASSERT_OK(WriteAnalysed(store.writer(), std::move(w), std::move(analysed), &pod));
}

// The seeded pod's hosts' XSpace files, stored as `podprof import` stores them: each host
// analysed by the aggregator on its own clock, its collectives compared within it.
void StoreImportedPod(storage::Store& store, const std::string& id) {
  auto source = loadgen::CaptureSource::Create(SeededPod(), /*counters=*/true);
  ASSERT_OK(source);
  FakeClock truth(kTrueStartNs);
  const auto hosts = loadgen::MakeHosts(0, kHosts, 37, 40'000'000, 20, truth);
  CaptureInput in;
  in.id = id;
  in.start_ns = kTrueStartNs;
  in.end_ns = kTrueStartNs + kDurationMs * 1'000'000;
  in.created_ns = kTrueStartNs + 3'000'000'000;
  in.source = storage::CaptureSource::kImport;
  for (const auto& h : hosts) {
    auto generated = (*source)->Generate(*h, h->clock.ToHost(kTrueStartNs), kDurationMs,
                                         size_t{256} << 10, /*summarise=*/false,
                                         /*keep_xspace=*/true);
    ASSERT_OK(generated);
    trace::MemorySource file(generated->xspace, h->name);
    trace::ReadOptions options;
    options.host_name = h->name;
    auto cap = trace::ReadXSpace(file, options);
    ASSERT_OK(cap);
    HostInput host;
    host.host = cap->host.name;
    host.capture = std::move(*cap);
    in.hosts.push_back(std::move(host));
  }
  ASSERT_OK(StoreCapture(store.writer(), std::move(in)));
}

// A fixture as `podprof import` stores it (its host on its own clock).
void StoreFixture(storage::Store& store, const std::string& id, const char* fixture) {
  auto cap = trace::ReadXSpaceFile(testing::FixturePath(fixture));
  ASSERT_OK(cap);
  CaptureInput in;
  in.id = id;
  in.start_ns = kTrueStartNs;
  in.end_ns = kTrueStartNs + 1'000'000'000;
  in.created_ns = kTrueStartNs + 3'000'000'000;
  in.source = storage::CaptureSource::kImport;
  HostInput h;
  h.host = cap->host.name;
  h.capture = std::move(*cap);
  in.hosts.push_back(std::move(h));
  ASSERT_OK(StoreCapture(store.writer(), std::move(in)));
}

class GoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("golden_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_NO_FATAL_FAILURE(Store(dir_, /*agents_analyse=*/false));
    agg_ = testing::StartBuiltAggregator(dir_);
  }

  // The seeded pod and the fixtures, in a store in `dir`.
  static void Store(const fs::path& dir, bool agents_analyse) {
    auto store = storage::Store::Open((dir / "pod.db").string(), {});
    ASSERT_OK(store);
    ASSERT_NO_FATAL_FAILURE(StorePod(**store, "golden-pod", agents_analyse));
    ASSERT_NO_FATAL_FAILURE(StoreFixture(**store, "golden-v6e", testing::kTpuFixture));
    ASSERT_NO_FATAL_FAILURE(StoreFixture(**store, "golden-gpu", testing::kGpuFixture));
  }
  void TearDown() override {
    agg_.reset();
    fs::remove_all(dir_);
  }

  // What the CLI prints for `args` against the aggregator on the store (or `agg`).
  std::string Cli(const std::string& args, testing::ChildProcess* agg = nullptr) {
    if (agg == nullptr) agg = agg_.get();
    PodprofResult r = RunPodprof(
        absl::StrCat(args, " --aggregator 127.0.0.1:", agg->info()["port"].get<int>()), kEnv);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    return absl::StrCat("$ podprof ", args, "\n", r.out);
  }

  // Every kernel a capture's statistics name, from its CSV (op name is the fourth column),
  // whose name a shell passes on as it is (a GPU kernel's C++ template name is left out).
  std::set<std::string> Kernels(const std::string& csv) {
    std::set<std::string> names;
    std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
    for (size_t i = 2; i < lines.size(); ++i) {  // the command line, then the header
      std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
      if (cells.size() <= 3 || cells[3].empty()) continue;
      if (std::all_of(cells[3].begin(), cells[3].end(), [](char c) {
            return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                   c == '-';
          })) {
        names.insert(cells[3]);
      }
    }
    return names;
  }

  // Compares `got` with tests/data/golden/<name>, or rewrites it.
  void ExpectGolden(const std::string& name, const std::string& got) {
    const fs::path file = fs::path(PODPROF_SOURCE_DIR) / "tests/data/golden" / name;
    if (const char* update = std::getenv("PODPROF_UPDATE_GOLDEN"); update && *update == '1') {
      fs::create_directories(file.parent_path());
      std::ofstream(file) << got;
      return;
    }
    ASSERT_TRUE(fs::exists(file)) << file << " is missing (PODPROF_UPDATE_GOLDEN=1 makes it)";
    EXPECT_EQ(got, testing::ReadTestFile(file.string())) << "differs from " << file;
  }

  fs::path dir_;
  std::unique_ptr<testing::ChildProcess> agg_;
};

TEST_F(GoldenTest, TheSeededPodReadsAsBefore) {
  const std::string stats = Cli("stats golden-pod --format csv --top 0");
  std::string out = stats;
  out += Cli("stats golden-pod --by kernel --top 0");
  out += Cli("stragglers golden-pod");
  out += Cli("stragglers golden-pod --format csv");
  ExpectGolden("seeded_pod.txt", out);
  const std::set<std::string> kernels = Kernels(stats);
  EXPECT_GE(kernels.size(), 5u) << stats;
  std::string described;
  for (const std::string& k : kernels) described += Cli("kernel " + k + " --capture golden-pod");
  ExpectGolden("seeded_pod_kernels.txt", described);
}

// One analysis, two places: the pod whose agents analysed their hosts reads as the pod the
// aggregator analysed, figure for figure and byte for byte (who analysed a host is not among
// what these commands print).
TEST_F(GoldenTest, ThePodItsAgentsAnalysedReadsAsTheAggregatorsAnalysis) {
  const fs::path other = dir_ / "agents";
  fs::create_directories(other);
  ASSERT_NO_FATAL_FAILURE(Store(other, /*agents_analyse=*/true));
  std::unique_ptr<testing::ChildProcess> agents = testing::StartBuiltAggregator(other);
  std::vector<std::string> commands = {"stats golden-pod --format csv --top 0",
                                       "stats golden-pod --by kernel --top 0",
                                       "stats golden-pod --by chip --format csv --top 0",
                                       "stragglers golden-pod",
                                       "stragglers golden-pod --format csv",
                                       "captures --format json"};
  for (const std::string& k : Kernels(Cli("stats golden-pod --format csv --top 0"))) {
    commands.push_back("kernel " + k + " --capture golden-pod");
  }
  ASSERT_GT(commands.size(), 10u);
  for (const std::string& args : commands) {
    EXPECT_EQ(Cli(args, agents.get()), Cli(args)) << args;
  }
}

// One analysis, two places: the pod's hosts' files imported (analysed by the aggregator) count
// what the live capture its agents analysed counts, per chip and kernel: executions, times,
// percentiles from the sketches, rates, verdicts, counters. Only the waits at collectives may
// differ, and the verdicts they decide ("collective wait" or "communication"): an import
// compares a host's arrivals within the host (its clock is its own).
TEST_F(GoldenTest, AnImportOfThePodsFilesCountsWhatTheLiveCaptureCounts) {
  const fs::path other = dir_ / "import";
  fs::create_directories(other);
  {
    auto store = storage::Store::Open((other / "pod.db").string(), {});
    ASSERT_OK(store);
    ASSERT_NO_FATAL_FAILURE(StorePod(**store, "golden-pod", /*agents_analyse=*/true));
    ASSERT_NO_FATAL_FAILURE(StoreImportedPod(**store, "golden-import"));
  }
  std::unique_ptr<testing::ChildProcess> agg = testing::StartBuiltAggregator(other);
  // The CSV without its capture column and its wait column, the wait-decided verdicts blank.
  auto rows = [&](const std::string& id, const std::string& by) {
    std::vector<std::string> lines = absl::StrSplit(
        Cli(absl::StrCat("stats ", id, " --by ", by, " --format csv --top 0"), agg.get()), '\n');
    std::vector<std::string> header = absl::StrSplit(lines.size() > 1 ? lines[1] : "", ',');
    const size_t wait = std::find(header.begin(), header.end(), "wait_fraction") - header.begin();
    const size_t verdict = std::find(header.begin(), header.end(), "verdict") - header.begin();
    std::string out;
    for (size_t i = 1; i < lines.size(); ++i) {  // the command line first
      std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
      if (cells.size() > verdict &&
          (cells[verdict] == "collective wait" || cells[verdict] == "communication")) {
        cells[verdict] = "";
      }
      if (cells.size() > wait) cells.erase(cells.begin() + static_cast<long>(wait));
      if (!cells.empty()) cells.erase(cells.begin());
      out += absl::StrJoin(cells, ",") + "\n";
    }
    return out;
  };
  for (const char* by : {"chip", "kernel", "host"}) {
    const std::string live = rows("golden-pod", by);
    EXPECT_GT(std::count(live.begin(), live.end(), '\n'), 10) << live;
    EXPECT_EQ(rows("golden-import", by), live) << "--by " << by;
  }
}

TEST_F(GoldenTest, TheImportedFixturesReadAsBefore) {
  for (const char* id : {"golden-v6e", "golden-gpu"}) {
    const std::string stats = Cli(absl::StrCat("stats ", id, " --format csv --top 0"));
    std::string out = stats + Cli(absl::StrCat("stragglers ", id));
    const std::set<std::string> kernels = Kernels(stats);
    ASSERT_GE(kernels.size(), 2u) << stats;
    // The first few kernels in name order: their verdicts, figures and histories.
    int shown = 0;
    for (const std::string& k : kernels) {
      if (shown++ == 8) break;
      out += Cli(absl::StrCat("kernel ", k, " --capture ", id));
    }
    ExpectGolden(absl::StrCat(id, ".txt"), out);
  }
}

}  // namespace
}  // namespace podprof::ingest
