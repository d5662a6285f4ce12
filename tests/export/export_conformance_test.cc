// The three exports checked as the viewers read them (tests/util/export_checker.h), on a
// simulated pod captured by `podprof demo` and on the real TPU capture imported: what a user
// opens in Perfetto, chrome://tracing and XProf must load without a blemish.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/xplane.pb.h"
#include "tests/util/export_checker.h"
#include "tests/util/files.h"
#include "tests/util/run_podprof.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
using testing::ExportCheck;
using testing::PodprofResult;
using testing::ReadTestFile;
using testing::RunPodprof;

class ExportConformanceTest : public ::testing::Test {
 protected:
  // One demo pod for the suite: 3 hosts, 1 s, left running for the exports.
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) / absl::StrCat("conform_", getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    // RunPodprof names its files after the running test, and none runs yet.
    const std::string out = (*dir_ / "demo.json").string();
    const int status = std::system(absl::StrCat(PODPROF_BIN_DIR, "/podprof demo --hosts 3 ",
                                                "--duration 1s --keep --format json --dir ",
                                                (*dir_ / "demo").string(), " >", out)
                                       .c_str());
    ASSERT_EQ(status, 0) << ReadTestFile(out);
    auto j = nlohmann::json::parse(ReadTestFile(out));
    capture_ = new std::string(j["capture_id"].get<std::string>());
    aggregator_ = new std::string(j["aggregator"].get<std::string>());
    pids_ = new std::vector<int>(j["pids"].get<std::vector<int>>());
  }
  static void TearDownTestSuite() {
    if (pids_ != nullptr) {
      for (int pid : *pids_) kill(pid, SIGTERM);
      // They are not our children: wait until they are gone before removing their files.
      for (int i = 0; i < 100; ++i) {
        bool alive = false;
        for (int pid : *pids_) alive = alive || kill(pid, 0) == 0;
        if (!alive) break;
        usleep(100'000);
      }
    }
    std::error_code ignored;
    fs::remove_all(*dir_, ignored);
  }

  // Exports `capture` as `format` into the suite's directory; returns the path written.
  static std::string Export(const std::string& capture, const std::string& format,
                            const std::string& name) {
    const std::string path = (*dir_ / name).string();
    PodprofResult r = RunPodprof(absl::StrCat("export ", capture, " --format ", format, " -o ",
                                              path, " --aggregator ", *aggregator_));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }
  static void ExpectClean(const ExportCheck& c, const std::string& what) {
    EXPECT_TRUE(c.ok()) << what << ":\n" << c.Summary();
    EXPECT_GT(c.slices, 100u) << what;
  }

  static fs::path* dir_;
  static std::string* capture_;
  static std::string* aggregator_;
  static std::vector<int>* pids_;
};
fs::path* ExportConformanceTest::dir_ = nullptr;
std::string* ExportConformanceTest::capture_ = nullptr;
std::string* ExportConformanceTest::aggregator_ = nullptr;
std::vector<int>* ExportConformanceTest::pids_ = nullptr;

TEST_F(ExportConformanceTest, ThePodsExportsLoadCleanly) {
  ExportCheck perfetto =
      testing::CheckPerfetto(ReadTestFile(Export(*capture_, "perfetto", "pod.pftrace")));
  ExpectClean(perfetto, "Perfetto");
  EXPECT_GT(perfetto.flows, 0u) << "collectives joined across chips";
  EXPECT_GT(perfetto.counter_samples, 0u);

  ExportCheck chrome =
      testing::CheckChromeJson(ReadTestFile(Export(*capture_, "chrome", "pod.json")));
  ExpectClean(chrome, "Chrome JSON");
  EXPECT_GT(chrome.flows, 0u) << "the collective arrows the Perfetto file has";
  EXPECT_EQ(chrome.slices, perfetto.slices);

  ExportCheck xprof = testing::CheckXprofSession(Export(*capture_, "xprof", "pod-xprof"));
  ExpectClean(xprof, "XProf session");
  EXPECT_EQ(xprof.slices, perfetto.slices);
}

// The real v6e capture, imported and exported again: clean, and XProf's copy places every
// line where the original did.
TEST_F(ExportConformanceTest, AnImportedRealCaptureExportsCleanlyAndKeepsItsTimes) {
  const std::string fixture =
      std::string(PODPROF_FIXTURES_DIR) + "/tpu_v6e_4chip_host_offload.xplane.pb";
  PodprofResult imported =
      RunPodprof("import " + fixture + " --format json --aggregator " + *aggregator_);
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  const std::string id = nlohmann::json::parse(imported.out)["capture"].get<std::string>();

  ExpectClean(testing::CheckPerfetto(ReadTestFile(Export(id, "perfetto", "real.pftrace"))),
              "Perfetto");
  const std::string chrome = ReadTestFile(Export(id, "chrome", "real.json"));
  ExpectClean(testing::CheckChromeJson(chrome), "Chrome JSON");
  // Nothing was cut to make the tracks nest: the kernels' time in the JSON is the stored time
  // (async copies whose device time runs past the next op sit on "(overlapping)" tracks, whole).
  PodprofResult stats = RunPodprof("stats " + id + " --by chip --top 100000 --format json " +
                                   "--aggregator " + *aggregator_);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  int64_t stored_ps = 0, rows = 0;
  for (const auto& r : nlohmann::json::parse(stats.out)["rows"]) {
    stored_ps += r["total_ps"].get<int64_t>();
    rows += r["count"].get<int64_t>();
  }
  int64_t exported_ns = 0;
  for (const auto& e : nlohmann::json::parse(chrome)["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.value("cat", "") == "XLA Ops") {
      exported_ns += std::llround(e["dur"].get<double>() * 1000);
    }
  }
  // Each instant is rounded down to a ns: at most a ns per event either way.
  EXPECT_NEAR(static_cast<double>(exported_ns), stored_ps / 1000.0, static_cast<double>(rows))
      << "ns of kernel time lost in the Chrome JSON";
  std::map<std::string, int64_t> exported;
  ExpectClean(testing::CheckXprofSession(Export(id, "xprof", "real-xprof"), &exported),
              "XProf session");

  // The original's device lines, in epoch time: the file stores them relative to its profile
  // start (the Task Environment plane), as the profiler's post-processing leaves them. The
  // export's lines start at their first event.
  tensorflow::profiler::XSpace original;
  std::ifstream in(fixture, std::ios::binary);
  ASSERT_TRUE(original.ParseFromIstream(&in));
  int64_t start = 0, stop = 0;
  ASSERT_TRUE(testing::XprofProfileWindow(original, &start, &stop));
  int compared = 0;
  for (const auto& plane : original.planes()) {
    if (plane.name().rfind("/device:TPU:", 0) != 0) continue;
    for (const auto& line : plane.lines()) {
      if (line.events().empty()) continue;
      int64_t first_ps = INT64_MAX;
      for (const auto& e : line.events()) first_ps = std::min(first_ps, e.offset_ps());
      const int64_t first_ns = start + line.timestamp_ns() + first_ps / 1000;
      for (const auto& [where, ts] : exported) {
        if (where.find(" " + plane.name() + " " + line.name()) == std::string::npos) continue;
        EXPECT_EQ(ts, first_ns) << where;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 8) << "device lines found in both";
}

}  // namespace
}  // namespace podprof
