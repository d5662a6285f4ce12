// `podprof export` narrowed (--from/--to, --hosts, --chips, --kernels) and sized (--max-size),
// and its CSV of events set against the traces, against a real podprof-aggregator holding a
// simulated two-host v5p pod, imported once for the whole suite; the files written are decoded
// and checked to hold only what was selected.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

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
#include "tests/util/csv.h"
#include "tests/util/curl.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "trace/xspace_reader.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
using testing::CsvFields;
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

// Where events start, ns since the epoch, sorted, per (host, chip ordinal).
using StartsByChip = std::map<std::pair<std::string, int>, std::vector<int64_t>>;

// The CSV export of `path`: its header and rows, checked to come in the promised order (by
// host, chip, line, start; each (host, chip, line) in one run of rows).
struct CsvContents {
  std::string header;
  StartsByChip starts;
  std::vector<std::vector<std::string>> rows;
  std::map<std::string, int> rows_by_line;
};

CsvContents ReadCsv(const std::string& path) {
  CsvContents c;
  std::istringstream in(ReadTestFile(path));
  std::getline(in, c.header);
  std::string line;
  std::set<std::tuple<std::string, int, std::string>> done;
  std::tuple<std::string, int, std::string> group;
  int64_t last_start = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = CsvFields(line);
    EXPECT_EQ(f.size(), 12u) << line;
    if (f.size() != 12u) continue;
    const int chip = std::stoi(f[1]);
    const int64_t start = std::stoll(f[5]);
    const std::tuple<std::string, int, std::string> g = {f[0], chip, f[2]};
    if (g != group) {
      EXPECT_TRUE(c.rows.empty() ||
                  std::tie(f[0], chip) >= std::tie(std::get<0>(group), std::get<1>(group)))
          << line;
      EXPECT_TRUE(done.insert(g).second) << "a second run of rows for " << line;
      group = g;
    } else {
      EXPECT_LE(last_start, start) << line;
    }
    last_start = start;
    c.starts[{f[0], chip}].push_back(start);
    ++c.rows_by_line[f[2]];
    c.rows.push_back(std::move(f));
  }
  for (auto& [chip, starts] : c.starts) std::sort(starts.begin(), starts.end());
  return c;
}

// Where the slices of the Perfetto trace at `path` begin, per host (process track) and chip
// (the track under it named "chip N ...", and the line tracks under that).
StartsByChip PerfettoBegins(const std::string& path) {
  perfetto::protos::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(ReadTestFile(path)));
  const std::regex chip_name("^chip ([0-9]+)");
  std::smatch m;
  std::map<uint64_t, std::string> host_of;
  std::map<uint64_t, std::pair<std::string, int>> chip_of;
  StartsByChip begins;
  for (const auto& p : trace.packet()) {
    const auto& t = p.track_descriptor();
    if (t.has_process()) host_of[t.uuid()] = t.process().process_name();
    if (host_of.count(t.parent_uuid()) > 0 && std::regex_search(t.name(), m, chip_name)) {
      chip_of[t.uuid()] = {host_of[t.parent_uuid()], std::stoi(m[1])};
    } else if (chip_of.count(t.parent_uuid()) > 0) {
      chip_of[t.uuid()] = chip_of[t.parent_uuid()];
    }
    if (p.track_event().type() == 1) {
      begins[chip_of.at(p.track_event().track_uuid())].push_back(
          static_cast<int64_t>(p.timestamp()));
    }
  }
  for (auto& [chip, starts] : begins) std::sort(starts.begin(), starts.end());
  return begins;
}

// How many slices the Chrome JSON at `path` has per host and chip ordinal.
std::map<std::pair<std::string, int>, size_t> ChromeSlicesByChip(const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(ReadTestFile(path));
  const std::regex chip_name("^chip ([0-9]+)");
  std::smatch m;
  std::map<int, std::string> host_of;          // pid
  std::map<std::pair<int, int>, int> chip_of;  // (pid, tid)
  std::map<std::pair<std::string, int>, size_t> out;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") host_of[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      const std::string thread = e["args"]["name"];
      if (std::regex_search(thread, m, chip_name)) chip_of[{e["pid"], e["tid"]}] = std::stoi(m[1]);
    }
    if (e["ph"] == "X") ++out[{host_of.at(e["pid"]), chip_of.at({e["pid"], e["tid"]})}];
  }
  return out;
}

std::map<std::pair<std::string, int>, size_t> Counts(const StartsByChip& starts) {
  std::map<std::pair<std::string, int>, size_t> out;
  for (const auto& [chip, s] : starts) out[chip] = s.size();
  return out;
}

// The CSV has a row for each slice of the Perfetto trace, starting where the slice begins, on
// every host and chip; the other columns are what the model says of the event.
TEST_F(ExportNarrowTest, CsvHasARowPerPerfettoSliceStartingWhereItBegins) {
  PodprofResult csv = Export("--format csv -o " + Out("whole.csv"));
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(absl::StripAsciiWhitespace(csv.out), Out("whole.csv"));
  PodprofResult perfetto = Export("-o " + Out("whole.pftrace"));
  ASSERT_EQ(perfetto.exit_code, 0) << perfetto.err;
  const CsvContents rows = ReadCsv(Out("whole.csv"));
  EXPECT_EQ(rows.header,
            "host,chip,line,kernel,module,start_ns,duration_ps,collective_id,category,program_id,"
            "flops,bytes_accessed");
  const StartsByChip begins = PerfettoBegins(Out("whole.pftrace"));
  EXPECT_EQ(begins.size(), 8u);  // 2 hosts x 4 chips
  EXPECT_EQ(Counts(rows.starts), Counts(begins));
  EXPECT_TRUE(rows.starts == begins) << "the starts differ from the slices' begins";
  EXPECT_GT(rows.rows_by_line.at("XLA Ops"), 1000);
  EXPECT_GT(rows.rows_by_line.at("XLA Modules"), 0);
  int collectives = 0;
  for (const auto& f : rows.rows) {
    EXPECT_GE(std::stoll(f[6]), 0) << f[3];
    if (f[2] == "XLA Ops") {
      EXPECT_FALSE(f[3].empty());
    }
    if (!f[7].empty()) {
      ++collectives;
      EXPECT_GT(std::stoull(f[7]), 0u);
    }
  }
  EXPECT_GT(collectives, 0);
}

// --from/--to, --hosts and --kernels narrow the CSV as they do the trace exports: per host and
// chip the rows of the Chrome JSON's slices, starting where the Perfetto slices begin, every
// one overlapping the window; the HTTP API's download is the same file byte for byte.
TEST_F(ExportNarrowTest, CsvIsNarrowedLikeTheTracesAndDownloadsTheSame) {
  const std::string narrowing = "--from 100ms --to 200ms --hosts host-1 --kernels fusion ";
  for (const auto& [format, file] : std::map<std::string, std::string>{
           {"csv", "part.csv"}, {"chrome", "part.json"}, {"perfetto", "part.pftrace"}}) {
    PodprofResult r = Export(narrowing + "--format " + format + " -o " + Out(file));
    ASSERT_EQ(r.exit_code, 0) << format << ": " << r.err;
  }
  const CsvContents rows = ReadCsv(Out("part.csv"));
  const StartsByChip begins = PerfettoBegins(Out("part.pftrace"));
  EXPECT_EQ(Counts(rows.starts), ChromeSlicesByChip(Out("part.json")));
  EXPECT_TRUE(rows.starts == begins) << "the starts differ from the slices' begins";
  std::set<std::string> hosts;
  for (const auto& [chip, starts] : rows.starts) hosts.insert(chip.first);
  EXPECT_EQ(hosts, (std::set<std::string>{"host-1"}));
  ASSERT_GT(rows.rows_by_line.at("XLA Ops"), 10);
  for (const auto& f : rows.rows) {
    const int64_t from_start = std::stoll(f[5]) - pod->start_ns, duration_ps = std::stoll(f[6]);
    EXPECT_LT(from_start, 200 * kMs) << f[3];
    EXPECT_GT((from_start + 1) * 1000 + duration_ps, 100 * kMs * 1000) << f[3];
    if (f[2] == "XLA Ops") {
      EXPECT_TRUE(absl::StrContains(f[3], "fusion")) << f[3];
    }
  }
  // Fewer rows than the whole pod's: about a third of the time, one host, some kernels.
  PodprofResult whole = Export("--format csv -o " + Out("whole.csv"));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_LT(rows.rows.size() * 6, ReadCsv(Out("whole.csv")).rows.size());

  const std::string url = absl::StrCat(
      "http://127.0.0.1:", pod->aggregator->info()["http_port"].get<int>(), "/api/v1/captures/",
      pod->capture_id,
      "/export?format=csv&from_ns=100000000&to_ns=200000000&hosts=host-1&kernel=fusion");
  const std::string headers = Out("http.h");
  testing::CurlResult http =
      testing::Curl(absl::StrCat("-D ", headers, " '", url, "'"), (pod->dir / "http.csv").string());
  ASSERT_EQ(http.status, 200) << http.body;
  EXPECT_TRUE(http.body == ReadTestFile(Out("part.csv"))) << "the download differs from the CLI's";
  const std::string h = absl::AsciiStrToLower(ReadTestFile(headers));
  EXPECT_TRUE(absl::StrContains(h, "content-type: text/csv")) << h;
  EXPECT_TRUE(absl::StrContains(h, absl::StrCat("filename=\"", pod->capture_id, ".csv\""))) << h;
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
