// `podprof export` narrowed (--from/--to, --hosts, --chips, --kernels) and sized (--max-size)
// against a real podprof-aggregator holding a simulated two-host v5p pod, imported once for
// the whole suite; the files written are decoded and checked to hold only what was selected.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/perfetto_trace.pb.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "tests/util/child_process.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "trace/xspace_reader.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
using testing::PodprofResult;
using testing::ReadTestFile;
using testing::RunPodprof;

constexpr int64_t kTrueStartNs = 1'800'000'000'000'000'000;
constexpr int64_t kWindowNs = 300'000'000;  // the capture's length
constexpr int kChips = 4;
constexpr int64_t kMs = 1'000'000;

struct Pod {
  fs::path dir;
  std::unique_ptr<testing::ChildProcess> aggregator;
  std::string address;  // "--aggregator 127.0.0.1:N"
  std::string capture_id;
  int64_t start_ns = 0;
};
Pod* pod = nullptr;

// Two simulated hosts of one v5p pod with four chips each and hardware counters, as files.
void WritePod(const fs::path& dir) {
  for (int host = 0; host < 2; ++host) {
    sim::PodConfig config;
    config.generation = "v5p";
    config.chips = kChips;
    config.hosts = 2;
    config.host_index = host;
    config.pod_seed = 5;
    absl::StatusOr<sim::PodModel> model = sim::PodModel::Create(config);
    ASSERT_OK(model);
    FakeClock truth(kTrueStartNs);
    SkewedClock clock(truth, 0, 0);
    sim::SessionWindow w;
    w.true_start_ns = kTrueStartNs;
    w.true_end_ns = kTrueStartNs + kWindowNs;
    w.counters = true;
    w.host_name = absl::StrCat("host-", host);
    std::ofstream out(dir / absl::StrCat("host-", host, ".xplane.pb"), std::ios::binary);
    ASSERT_TRUE(sim::BuildXSpace(*model, clock, w).space.SerializeToOstream(&out));
  }
}

class ExportNarrowTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pod = new Pod;
    pod->dir = fs::path(::testing::TempDir()) / absl::StrCat("export_narrow_", getpid());
    fs::remove_all(pod->dir);
    fs::create_directories(pod->dir / "out");
    std::ofstream(pod->dir / "agg.toml") << "";
    pod->aggregator =
        testing::StartAggregator(std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", pod->dir);
    ASSERT_TRUE(pod->aggregator->ready());
    const int port = pod->aggregator->info()["port"];
    pod->address = absl::StrCat("--aggregator 127.0.0.1:", port);
    WritePod(pod->dir);
  }
  // Imports the pod with `podprof import`, once for the suite (RunPodprof needs a running test).
  static void Import() {
    PodprofResult imported = RunPodprof(absl::StrCat("import ", pod->address, " --format json ",
                                                     (pod->dir / "host-0.xplane.pb").string(), " ",
                                                     (pod->dir / "host-1.xplane.pb").string()));
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    pod->capture_id = nlohmann::json::parse(imported.out)["capture"];
    auto stub = v1::Aggregator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", pod->aggregator->info()["port"].get<int>()),
                            grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::ListCapturesResponse listed;
    ASSERT_OK(stub->ListCaptures(&ctx, v1::ListCapturesRequest(), &listed));
    ASSERT_EQ(listed.captures_size(), 1);
    pod->start_ns = listed.captures(0).start_ns();
  }
  static void TearDownTestSuite() {
    if (pod == nullptr) return;
    pod->aggregator.reset();
    fs::remove_all(pod->dir);
    delete pod;
    pod = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(pod, nullptr);
    ASSERT_TRUE(pod->aggregator != nullptr && pod->aggregator->ready());
    if (pod->capture_id.empty()) Import();
    ASSERT_FALSE(pod->capture_id.empty()) << "the pod was not imported";
    fs::remove_all(pod->dir / "out");
    fs::create_directories(pod->dir / "out");
  }

  static std::string Out(const std::string& name) { return (pod->dir / "out" / name).string(); }
  // `podprof export CAPTURE <args>`.
  static PodprofResult Export(const std::string& args, const std::string& env = "") {
    return RunPodprof(absl::StrCat("export ", pod->capture_id, " ", pod->address, " ", args), env);
  }
  // Files in the output directory, partial ones included.
  static std::set<std::string> OutFiles() {
    std::set<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(pod->dir / "out")) {
      if (e.is_regular_file()) names.insert(e.path().filename().string());
    }
    return names;
  }
};

// The Chrome JSON of `path`: (kind, ...) tallies of what it holds.
struct JsonContents {
  std::set<std::string> hosts;  // process names
  std::set<int> chips;          // ordinals in thread and counter names
  int slices = 0, samples = 0;
  std::map<std::string, int> slices_by_line;  // "cat"
  double min_end_us = 1e300, max_begin_us = -1e300;
  double min_sample_us = 1e300, max_sample_us = -1e300;
  std::set<std::string> op_names;  // on XLA Ops
};

JsonContents ReadJson(const std::string& path) {
  JsonContents c;
  nlohmann::json j = nlohmann::json::parse(ReadTestFile(path));
  const std::regex chip_name("^chip ([0-9]+)");
  std::smatch m;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    const std::string name = e["name"];
    if (ph == "M" && name == "process_name") c.hosts.insert(e["args"]["name"].get<std::string>());
    if (ph == "M" && name == "thread_name") {
      const std::string thread = e["args"]["name"];
      if (std::regex_search(thread, m, chip_name)) c.chips.insert(std::stoi(m[1]));
    }
    if (ph == "X") {
      ++c.slices;
      const std::string line = e["cat"];
      ++c.slices_by_line[line];
      const double ts = e["ts"], dur = e["dur"];
      c.max_begin_us = std::max(c.max_begin_us, ts);
      c.min_end_us = std::min(c.min_end_us, ts + dur);
      if (line == "XLA Ops") c.op_names.insert(name);
    }
    if (ph == "C") {
      ++c.samples;
      if (std::regex_search(name, m, chip_name)) c.chips.insert(std::stoi(m[1]));
      const double ts = e["ts"];
      c.min_sample_us = std::min(c.min_sample_us, ts);
      c.max_sample_us = std::max(c.max_sample_us, ts);
    }
  }
  return c;
}

TEST_F(ExportNarrowTest, ChromeJsonHoldsOnlyTheWindowHostsChipsAndKernelsSelected) {
  PodprofResult whole = Export("--format chrome -o " + Out("whole.json"));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const JsonContents all = ReadJson(Out("whole.json"));
  EXPECT_EQ(all.hosts, (std::set<std::string>{"host-0", "host-1"}));
  EXPECT_EQ(all.chips, (std::set<int>{0, 1, 2, 3}));
  ASSERT_GT(all.slices, 1000);
  ASSERT_GT(all.samples, 1000);

  PodprofResult narrow = Export(
      "--format chrome --from 100ms --to 200ms --hosts host-1 --chips 0,2 --kernels fusion -o " +
      Out("narrow.json"));
  ASSERT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_EQ(absl::StripAsciiWhitespace(narrow.out), Out("narrow.json"));
  JsonContents some = ReadJson(Out("narrow.json"));
  EXPECT_EQ(some.hosts, (std::set<std::string>{"host-1"}));
  EXPECT_EQ(some.chips, (std::set<int>{0, 2}));
  ASSERT_GT(some.slices_by_line["XLA Ops"], 10);
  for (const std::string& op : some.op_names) {
    EXPECT_TRUE(absl::StrContains(op, "fusion")) << op;
  }
  // Module runs and steps stay as context; timestamps are us after the capture's start, and
  // every slice overlaps the window, every sample lies inside it.
  EXPECT_GT(some.slices_by_line["XLA Modules"], 0);
  EXPECT_GT(some.min_end_us, 100'000);
  EXPECT_LT(some.max_begin_us, 200'000);
  ASSERT_GT(some.samples, 0);
  EXPECT_GE(some.min_sample_us, 100'000);
  EXPECT_LT(some.max_sample_us, 200'000);
  // About a third of the time, one host, half the chips, a subset of the kernels.
  EXPECT_LT(some.slices * 8, all.slices);
  EXPECT_LT(some.samples * 8, all.samples);
}

TEST_F(ExportNarrowTest, PerfettoAndXprofAreNarrowedToo) {
  PodprofResult perfetto =
      Export("--from 50ms --to 120ms --hosts host-0 --chips 3 -o " + Out("part.pftrace"));
  ASSERT_EQ(perfetto.exit_code, 0) << perfetto.err;
  // The summary on stderr gives the size written and the size as Chrome JSON.
  EXPECT_TRUE(absl::StrContains(perfetto.err, "as Chrome JSON it would be about")) << perfetto.err;
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(ReadTestFile(Out("part.pftrace"))));
  std::set<std::string> processes, chip_tracks;
  uint64_t begins = 0, counters = 0, max_begin = 0;
  for (const auto& p : trace.packet()) {
    const auto& t = p.track_descriptor();
    if (t.has_process()) processes.insert(t.process().process_name());
    if (absl::StartsWith(t.name(), "chip ")) chip_tracks.insert(t.name().substr(0, 6));
    if (p.track_event().type() == 1) {
      ++begins;
      max_begin = std::max<uint64_t>(max_begin, p.timestamp());
    }
    if (p.track_event().type() == 4) {
      ++counters;
      EXPECT_GE(p.timestamp(), static_cast<uint64_t>(pod->start_ns + 50 * kMs));
      EXPECT_LT(p.timestamp(), static_cast<uint64_t>(pod->start_ns + 120 * kMs));
    }
  }
  EXPECT_EQ(processes, (std::set<std::string>{"host-0"}));
  EXPECT_EQ(chip_tracks, (std::set<std::string>{"chip 3"}));
  EXPECT_GT(begins, 100u);
  EXPECT_GT(counters, 0u);
  EXPECT_LT(max_begin, static_cast<uint64_t>(pod->start_ns + 120 * kMs));

  PodprofResult xprof =
      Export("--format xprof --hosts host-1 --chips 1 --kernels all-reduce -o " + Out("xprof"));
  ASSERT_EQ(xprof.exit_code, 0) << xprof.err;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(Out("xprof"))) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename(), "host-1.xplane.pb");
  absl::StatusOr<trace::HostCapture> read = trace::ReadXSpaceFile(files[0].string());
  ASSERT_OK(read);
  ASSERT_EQ(read->host.chips.size(), 1u);
  EXPECT_EQ(read->host.chips[0].ordinal, 1);
  int kernel_events = 0;
  for (const trace::EventBlock& b : read->blocks) {
    if (!trace::IsKernelLine(b.kind)) continue;
    for (uint32_t k : b.kernel) {
      ++kernel_events;
      EXPECT_TRUE(absl::StrContains(read->kernels[k].name, "all-reduce")) << read->kernels[k].name;
    }
  }
  EXPECT_GT(kernel_events, 0);
}

TEST_F(ExportNarrowTest, BadFlagsAreNamedWithTheirValueAndWriteNothing) {
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"--hosts host-0,host-9", "--hosts \"host-9\""},
      {"--chips 0,7", "--chips 7"},
      {"--hosts host-1 --chips 5", "--chips 5"},
      {"--kernels 'fusion('", "--kernels \"fusion(\""},
      {"--from 200ms --to 100ms", "--from 200 ms is not before --to 100 ms"},
      {"--from 2s", "--from 2.00 s is past the end of"},
      {"--from -5ms", "--from"},
      {"--to 0", "--to"},
      {"--chips x", "--chips"},
      {"--max-size 12XB", "unknown unit"},
  };
  for (const Case& c : cases) {
    PodprofResult r = Export("--format chrome -o " + Out("bad.json") + " " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.message)) << c.args << ": " << r.err;
  }
  EXPECT_TRUE(OutFiles().empty());
}

TEST_F(ExportNarrowTest, ChromeJsonOverTheLimitIsRefusedWithTheWaysOutAndNoFile) {
  PodprofResult r = Export("--format chrome --max-size 100kB -o " + Out("big.json"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(
      absl::StrContains(r.err, "the Chrome JSON of " + pod->capture_id + " would be about "))
      << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "over the 100 kB limit (--max-size)")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "export --format perfetto")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--from/--to, --hosts, --chips or --kernels")) << r.err;
  EXPECT_TRUE(OutFiles().empty());

  // The estimate errs large, but not by much: the whole export fits a limit at twice its size.
  PodprofResult whole = Export("--format chrome -o " + Out("whole.json"));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const uint64_t size = fs::file_size(Out("whole.json"));
  PodprofResult tight =
      Export(absl::StrCat("--format chrome --max-size ", size * 2, " -o ", Out("again.json")));
  EXPECT_EQ(tight.exit_code, 0) << tight.err;
  PodprofResult under =
      Export(absl::StrCat("--format chrome --max-size ", size * 9 / 10, " -o ", Out("under.json")));
  EXPECT_EQ(under.exit_code, 2) << under.err;

  // Perfetto is never limited; a narrow JSON export fits where the whole did not.
  EXPECT_EQ(Export("--max-size 100kB -o " + Out("any.pftrace")).exit_code, 0);
  PodprofResult narrow = Export(
      "--format chrome --max-size 1MB --hosts host-0 --chips 0 "
      "--from 10ms --to 20ms -o " +
      Out("small.json"));
  EXPECT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_LT(fs::file_size(Out("small.json")), 1'000'000u);
}

TEST_F(ExportNarrowTest, TheLimitComesFromTheCliProfileAndTheFlagOverridesIt) {
  const std::string config = (pod->dir / "cli.toml").string();
  std::ofstream(config) << "max_size = \"100kB\"\n";
  const std::string env = "PODPROF_CLI_CONFIG=" + config;
  PodprofResult limited = Export("--format chrome -o " + Out("p.json"), env);
  EXPECT_EQ(limited.exit_code, 2) << limited.err;
  EXPECT_TRUE(absl::StrContains(limited.err, "over the 100 kB limit")) << limited.err;
  PodprofResult lifted = Export("--format chrome --max-size 1GB -o " + Out("p.json"), env);
  EXPECT_EQ(lifted.exit_code, 0) << lifted.err;

  std::ofstream(config) << "max_size = \"lots\"\n";
  PodprofResult bad = Export("--format chrome -o " + Out("p.json"), env);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err, "max_size")) << bad.err;
}

}  // namespace
}  // namespace podprof
