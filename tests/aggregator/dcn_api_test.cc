// The cross-slice (DCN) answer of a stored capture (#56): the query layer over a real store
// holding hand-made multi-slice captures (tests/util/dcn_pod.h), stored through the ingest path
// as an agent's are; then the real podprof-aggregator on such a store, its HTTP route held equal
// to `podprof dcn` byte for byte, and the CLI's table and errors.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "aggregator/api/queries.h"
#include "common/clock.h"
#include "export/trace_export.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/perfetto_trace.pb.h"
#include "tests/util/child_process.h"
#include "tests/util/curl.h"
#include "tests/util/dcn_pod.h"
#include "tests/util/perfetto_flows.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"

namespace podprof::aggregator {
namespace {

namespace fs = std::filesystem;
using ::podprof::testing::DcnPod;
using ::podprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kUs = 1'000;

class DcnQueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(store_, storage::Store::Open(db_.path()));
    registry_ = std::make_unique<Registry>(clock_, 1'000'000'000, 0);
    queries_ = std::make_unique<Queries>(*store_, *registry_);
  }
  void Store(const DcnPod& pod) { ASSERT_OK(testing::StoreDcnPod(store_->writer(), pod)); }
  v1::GetDcnResponse Dcn(const std::string& id, uint32_t top = 0, bool cells = false) {
    v1::GetDcnRequest r;
    r.set_capture_id(id);
    r.set_top(top);
    r.set_cells(cells);
    absl::StatusOr<v1::GetDcnResponse> answer = queries_->Dcn(r);
    EXPECT_OK(answer);
    return answer.ok() ? *answer : v1::GetDcnResponse();
  }

  FakeClock clock_{1'800'000'000'000'000'000};
  podprof::testing::TempDatabase db_{"dcn"};
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<Queries> queries_;
};

TEST_F(DcnQueryTest, AnUnknownCaptureIsNotFoundAndNoIdIsRefused) {
  v1::GetDcnRequest r;
  EXPECT_THAT(queries_->Dcn(r), StatusIs(absl::StatusCode::kInvalidArgument));
  r.set_capture_id("nosuch");
  EXPECT_THAT(queries_->Dcn(r), StatusIs(absl::StatusCode::kNotFound, HasSubstr("nosuch")));
}

TEST_F(DcnQueryTest, ACaptureWithoutDcnOpsAnswersAnEmptyReportSayingSo) {
  DcnPod pod;
  pod.dcn = false;
  Store(pod);
  const v1::GetDcnResponse r = Dcn(pod.id);
  EXPECT_EQ(r.capture_id(), pod.id);
  EXPECT_EQ(r.verdict(), "no cross-slice transfers in this capture");
  EXPECT_EQ(r.transfers(), 0u);
  EXPECT_EQ(r.named_after_instances(), -1);
  EXPECT_TRUE(r.links().empty());
  EXPECT_TRUE(r.producers().empty());
  EXPECT_TRUE(r.worst().empty());
  EXPECT_TRUE(r.xprof().empty());
}

// The capture page asks every capture for its DCN view: one without host transfers is told so
// from its kernel roll-ups, before any timeline is read.
TEST_F(DcnQueryTest, WhetherACaptureRanHostTransfersIsKnownFromItsRollups) {
  DcnPod with, without;
  without.id = "no-dcn";
  without.dcn = false;
  Store(with);
  Store(without);
  auto ran = [&](const std::string& id, const std::string& prefix) {
    absl::StatusOr<bool> r = store_->kernels().RanCategory(id, prefix);
    EXPECT_OK(r);
    return r.ok() && *r;
  };
  EXPECT_TRUE(ran(with.id, "host send"));
  EXPECT_TRUE(ran(with.id, "host recv"));
  EXPECT_FALSE(ran(without.id, "host send"));
  EXPECT_FALSE(ran("nosuch", "host send"));
  EXPECT_FALSE(ran(with.id, "host%")) << "a prefix is not a pattern";
}

// Slice 1 reaches the DCN phase 300 us late every step: slice 0's receivers wait for it.
TEST_F(DcnQueryTest, ALateSliceIsNamedAsTheProducer) {
  DcnPod pod;
  pod.late_slice = 1;
  pod.late_ns = 300 * kUs;
  Store(pod);
  const v1::GetDcnResponse r = Dcn(pod.id);
  EXPECT_EQ(r.slices(), 2);
  EXPECT_EQ(r.transfers(), static_cast<uint64_t>(pod.steps * pod.slices * pod.chips));
  ASSERT_FALSE(r.producers().empty()) << r.DebugString();
  EXPECT_EQ(r.producers(0).src_slice(), 1);
  EXPECT_TRUE(r.producers(0).named()) << r.DebugString();
  EXPECT_THAT(r.verdict(), HasSubstr("slice 1"));
  EXPECT_GE(r.named_after_instances(), 0);
  // What each slice sent, from every transfer (not only the worst): slice 0 waited for slice
  // 1's data, which came the network's 100 us and the 5 us copy after it left; slice 1 found
  // slice 0's there when it reached its recv-done, 301 us after it left, and copied it.
  for (const auto& p : r.producers()) {
    EXPECT_EQ(p.transfers(), static_cast<uint64_t>(pod.steps * pod.chips));
    EXPECT_EQ(p.median_transit_ns(), p.src_slice() == 1 ? 105 * kUs : 306 * kUs) << p.src_slice();
  }
  // The worst waits are slice 0's, worst first, cut to the default top.
  ASSERT_EQ(r.worst_size(), kDefaultDcnTop);
  EXPECT_EQ(r.worst(0).dst_slice(), 0);
  EXPECT_EQ(r.worst(0).src_slice(), 1);
  EXPECT_EQ(r.worst(0).dst_host(), testing::DcnHostName(0));
  EXPECT_GE(r.worst(0).wait_ns(), r.worst(kDefaultDcnTop - 1).wait_ns());
  // XProf's figures: one row per host and rendezvous.
  ASSERT_EQ(r.xprof_size(), 2);
  EXPECT_EQ(r.xprof(0).host_name(), testing::DcnHostName(0));
  EXPECT_EQ(r.xprof(0).rendezvous(), "dcn_grads.0");
  EXPECT_EQ(r.xprof(0).occurrences(), static_cast<uint64_t>(pod.steps));
  EXPECT_EQ(Dcn(pod.id, 3).worst_size(), 3);
  EXPECT_EQ(Dcn(pod.id, 100'000).worst_size(), pod.steps * pod.slices * pod.chips);
}

// The link 0 -> 1 takes 400 us more than 1 -> 0: the network is named, not a slice.
TEST_F(DcnQueryTest, ASlowLinkIsNamed) {
  DcnPod pod;
  pod.slow_src = 0;
  pod.slow_dst = 1;
  pod.slow_ns = 400 * kUs;
  Store(pod);
  const v1::GetDcnResponse r = Dcn(pod.id);
  ASSERT_FALSE(r.links().empty()) << r.DebugString();
  EXPECT_EQ(r.links(0).src_slice(), 0);
  EXPECT_EQ(r.links(0).dst_slice(), 1);
  EXPECT_TRUE(r.links(0).named()) << r.DebugString();
  EXPECT_EQ(r.links(0).median_transit_ns(), 505 * kUs);
  EXPECT_EQ(r.links(0).transfers(), static_cast<uint64_t>(pod.steps * pod.chips));
  EXPECT_EQ(r.links(0).excess_ns(), 400 * kUs);
  EXPECT_GT(r.links(0).network_ns(), 0);
  EXPECT_EQ(r.expected_transit_ns(), 105 * kUs);
}

// The slice view's matrix: a row per slice, a column per step of the one rendezvous; the slow
// link's receivers (slice 1) wait the 400 us more in every step, slice 0's only their copy.
TEST_F(DcnQueryTest, CellsAreSlicesByInstancesWhenAskedFor) {
  DcnPod pod;
  pod.slow_src = 0;
  pod.slow_dst = 1;
  pod.slow_ns = 400 * kUs;
  Store(pod);
  EXPECT_FALSE(Dcn(pod.id).has_cells());
  const v1::GetDcnResponse r = Dcn(pod.id, 0, true);
  ASSERT_TRUE(r.has_cells());
  const v1::DcnCells& c = r.cells();
  ASSERT_EQ(c.slices_size(), 2);
  ASSERT_EQ(c.instance_step_size(), pod.steps);
  EXPECT_EQ(c.instance_rendezvous(0), "dcn_grads.0");
  EXPECT_EQ(c.wait_ns_size(), 2 * pod.steps);
  EXPECT_EQ(c.producer_ns_size(), 2 * pod.steps);
  for (int k = 0; k < pod.steps; ++k) {
    EXPECT_EQ(c.instance_step(k), k);
    // Per chip, a recv-done from 1 us after its own send-done to 5 us after the data came
    // (dcn_pod.h): slice 0's 104 us (100 us transit), slice 1's 504 us (400 us more); both
    // chips of a slice sum.
    EXPECT_EQ(c.wait_ns(k), 2 * 104 * kUs) << k;
    EXPECT_EQ(c.wait_ns(pod.steps + k), 2 * 504 * kUs) << k;
    EXPECT_EQ(c.producer_ns(k), 0);
  }
  EXPECT_EQ(c.instances_left_out(), 0u);
  // A capture without DCN ops answers an empty matrix.
  DcnPod none;
  none.id = "no-dcn";
  none.dcn = false;
  Store(none);
  const v1::GetDcnResponse empty = Dcn(none.id, 0, true);
  EXPECT_TRUE(empty.has_cells());
  EXPECT_EQ(empty.cells().slices_size(), 0);
}

// An agent's capture is stored on its host's clock with the correction beside it: the pairing
// sees it on the aggregator's clock (corrected once: a host 5 ms ahead would otherwise look
// 5 ms late, or its data 5 ms early), XProf's figures on the host's own.
TEST_F(DcnQueryTest, HostsStoredOnTheirOwnClocksAreCorrectedOnce) {
  DcnPod pod;
  pod.late_slice = 1;
  pod.late_ns = 300 * kUs;
  Store(pod);
  DcnPod skewed = pod;
  skewed.id = "dcn-skewed";
  skewed.clock_offset_ns = {-2'000 * kUs, 5'000 * kUs};
  Store(skewed);
  v1::GetDcnResponse want = Dcn(pod.id, 1000);
  v1::GetDcnResponse got = Dcn(skewed.id, 1000);
  want.clear_capture_id();
  got.clear_capture_id();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, want))
      << "skewed:\n"
      << got.DebugString() << "\nunskewed:\n"
      << want.DebugString();
}

// ---- The real aggregator and CLI

class DcnProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) / absl::StrCat("dcn_", getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    {
      absl::StatusOr<std::unique_ptr<storage::Store>> store =
          storage::Store::Open((*dir_ / "pod.db").string());
      ASSERT_OK(store);
      DcnPod late;
      late.late_slice = 1;
      late.late_ns = 300 * kUs;
      late.clock_offset_ns = {0, 3'000 * kUs};
      ASSERT_OK(testing::StoreDcnPod((*store)->writer(), late));
      DcnPod slow;
      slow.id = "dcn-slow";
      slow.slow_src = 0;
      slow.slow_dst = 1;
      slow.slow_ns = 400 * kUs;
      ASSERT_OK(testing::StoreDcnPod((*store)->writer(), slow));
      DcnPod none;
      none.id = "no-dcn";
      none.dcn = false;
      ASSERT_OK(testing::StoreDcnPod((*store)->writer(), none));
    }
    std::ofstream(*dir_ / "agg.toml") << "";
    agg_ = testing::StartAggregator(std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", *dir_)
               .release();
    ASSERT_TRUE(agg_->ready());
  }
  static void TearDownTestSuite() {
    delete agg_;
    agg_ = nullptr;
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string Api(const std::string& route) {
    return absl::StrCat("'http://127.0.0.1:", agg_->info()["http_port"].get<int>(),
                        "/api/v1/captures/", route, "'");
  }
  static std::string Cli(const std::string& args, int want_exit = 0) {
    testing::PodprofResult r = testing::RunPodprof(
        absl::StrCat("dcn ", args, " --aggregator 127.0.0.1:", agg_->info()["port"].get<int>()));
    EXPECT_EQ(r.exit_code, want_exit) << args << ": " << r.err;
    return want_exit == 0 ? r.out : r.err;
  }

  static fs::path* dir_;
  static testing::ChildProcess* agg_;
};
fs::path* DcnProcessTest::dir_ = nullptr;
testing::ChildProcess* DcnProcessTest::agg_ = nullptr;

TEST_F(DcnProcessTest, TheRouteAnswersAsTheCliDoes) {
  testing::CurlResult js = testing::Curl(Api("dcn-1/dcn?top=5"));
  ASSERT_EQ(js.status, 200) << js.body;
  EXPECT_EQ(js.body, Cli("dcn-1 --top 5 --format json"));
  const nlohmann::json j = nlohmann::json::parse(js.body);
  EXPECT_EQ(j["capture"], "dcn-1");
  EXPECT_EQ(j["worst"].size(), 5u);
  EXPECT_EQ(j["producers"][0]["slice"], 1);
  EXPECT_TRUE(j["producers"][0]["named"].get<bool>());
  for (const char* table : {"links", "producers", "transfers", "xprof"}) {
    SCOPED_TRACE(table);
    testing::CurlResult csv =
        testing::Curl(Api(absl::StrCat("dcn-1/dcn?format=csv&top=5&table=", table)));
    ASSERT_EQ(csv.status, 200) << csv.body;
    EXPECT_EQ(csv.body, Cli(absl::StrCat("dcn-1 --top 5 --format csv --table ", table)));
    EXPECT_TRUE(absl::StartsWith(csv.body, "capture,")) << csv.body;
  }
  // The CSV's rows are the JSON's: links by default.
  const std::string links = testing::Curl(Api("dcn-1/dcn?format=csv")).body;
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(links, '\n', absl::SkipEmpty())).size(),
            1 + j["links"].size());
}

// ?cells=1 and --cells: the matrix in the JSON, the same bytes both ways; a row per slice.
TEST_F(DcnProcessTest, TheCellsAreInTheJsonOfBoth) {
  testing::CurlResult js = testing::Curl(Api("dcn-slow/dcn?cells=1"));
  ASSERT_EQ(js.status, 200) << js.body;
  EXPECT_EQ(js.body, Cli("dcn-slow --cells --top 20 --format json"));
  const nlohmann::json j = nlohmann::json::parse(js.body);
  ASSERT_TRUE(j.contains("cells")) << js.body;
  EXPECT_EQ(j["cells"]["slices"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["cells"]["instances"].size(), 20u);
  EXPECT_EQ(j["cells"]["instances"][3]["step"], 3);
  ASSERT_EQ(j["cells"]["wait_ns"].size(), 2u);
  EXPECT_EQ(j["cells"]["wait_ns"][1].size(), 20u);
  EXPECT_EQ(j["cells"]["producer_ns"][0].size(), 20u);
  EXPECT_GT(j["cells"]["wait_ns"][1][0].get<int64_t>(), j["cells"]["wait_ns"][0][0].get<int64_t>());
  // Not asked for, not there; a bad value is refused by name.
  EXPECT_FALSE(nlohmann::json::parse(testing::Curl(Api("dcn-slow/dcn")).body).contains("cells"));
  testing::CurlResult bad = testing::Curl(Api("dcn-slow/dcn?cells=yes"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("cells"));
}

TEST_F(DcnProcessTest, TheTableSaysTheVerdictFirst) {
  const std::string table = Cli("dcn-1 --xprof --top 3");
  const nlohmann::json j = nlohmann::json::parse(Cli("dcn-1 --format json"));
  const std::vector<std::string> lines = absl::StrSplit(table, '\n');
  ASSERT_GT(lines.size(), 4u) << table;
  EXPECT_EQ(lines[0], absl::StrCat("capture dcn-1: ", j["verdict"].get<std::string>()));
  EXPECT_THAT(table, HasSubstr("producing slices:"));
  EXPECT_THAT(table, HasSubstr("worst transfers:"));
  EXPECT_THAT(table, HasSubstr("RECV STALL (XPROF)"));
  EXPECT_THAT(table, HasSubstr(testing::DcnHostName(1)));
  EXPECT_THAT(Cli("dcn-1"), ::testing::Not(HasSubstr("RECV STALL (XPROF)")));
  const std::string slow = Cli("dcn-slow");
  EXPECT_THAT(slow, HasSubstr("links:\nLINK  TRANSFERS  MEDIAN TRANSIT  NETWORK EXCESS"));
  EXPECT_THAT(slow, HasSubstr("\n0->1         40          505 us          400 us"));
  EXPECT_EQ(Cli("no-dcn"), "capture no-dcn: no cross-slice transfers in this capture\n");
}

// `podprof export --format perfetto`: an arrow per paired transfer, from the sender's send
// on its host to the receiver's recv-done on its, as GET .../dcn pairs them (every transfer of
// dcn-1, slice 1's host stored on its own clock 3 ms ahead: the trace's slices and the pairs
// are on the aggregator's clock both); no-dcn has none. Narrowed to one host, no flow ends.
TEST_F(DcnProcessTest, ThePerfettoExportHasAFlowFromEachSendToItsReceive) {
  const nlohmann::json dcn = nlohmann::json::parse(testing::Curl(Api("dcn-1/dcn?top=1000")).body);
  ASSERT_EQ(dcn["transfers"], 80);
  ASSERT_EQ(dcn["worst"].size(), 80u);
  auto flows_of = [&](const std::string& id, const std::string& extra) {
    const fs::path file = *dir_ / absl::StrCat(id, ".pftrace");
    testing::PodprofResult r = testing::RunPodprof(
        absl::StrCat("export ", id, " --format perfetto -o ", file.string(), extra,
                     " --aggregator 127.0.0.1:", agg_->info()["port"].get<int>()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(file, std::ios::binary);
    perfetto::protos::Trace trace;
    EXPECT_TRUE(trace.ParseFromIstream(&in));
    std::map<uint64_t, testing::PerfettoFlow> flows = testing::PerfettoFlows(trace);
    // Only the DCN flows: the collectives' have ids of their own (none in these captures).
    for (auto it = flows.begin(); it != flows.end();) {
      it = it->first >= exporter::PerfettoWriter::kHostFlowIds ? std::next(it) : flows.erase(it);
    }
    return flows;
  };
  // (from host, chip, send start, to host, chip, recv-done end): the API's and the trace's.
  using End = std::tuple<std::string, std::string, int64_t, std::string, std::string, int64_t>;
  std::multiset<End> want, got;
  for (const auto& t : dcn["worst"]) {
    want.emplace(t["src_host"], absl::StrCat("chip ", t["src_chip"].get<int>()),
                 t["send_start_ns"].get<int64_t>(), t["dst_host"],
                 absl::StrCat("chip ", t["dst_chip"].get<int>()),
                 t["recv_done_end_ns"].get<int64_t>());
  }
  const std::map<uint64_t, testing::PerfettoFlow> flows = flows_of("dcn-1", "");
  EXPECT_EQ(flows.size(), 80u);
  for (const auto& [id, f] : flows) {
    ASSERT_EQ(f.from.size(), 1u) << id;
    ASSERT_EQ(f.to.size(), 1u) << id;
    EXPECT_EQ(f.from[0].slice, "send.101");
    EXPECT_EQ(f.to[0].slice, "recv-done.101");
    EXPECT_EQ(f.from[0].line, "XLA Ops");
    EXPECT_NE(f.from[0].host, f.to[0].host);  // one slice's host to the other's
    // The chip track's name starts "chip <ordinal>".
    got.emplace(f.from[0].host, f.from[0].chip.substr(0, f.from[0].chip.find(' ', 5)),
                f.from[0].begin, f.to[0].host, f.to[0].chip.substr(0, f.to[0].chip.find(' ', 5)),
                f.to[0].end);
  }
  EXPECT_EQ(got, want);
  EXPECT_TRUE(flows_of("no-dcn", "").empty());
  for (const auto& [id, f] : flows_of("dcn-1", " --hosts slice0-host0")) {
    EXPECT_TRUE(f.to.empty() || f.from.empty()) << id;
  }
}

TEST_F(DcnProcessTest, UnknownCapturesAndTablesAreRefused) {
  EXPECT_EQ(testing::Curl(Api("nosuch/dcn")).status, 404);
  testing::CurlResult bad = testing::Curl(Api("dcn-1/dcn?format=csv&table=chips"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("table"));
  EXPECT_THAT(Cli("nosuch", 2), HasSubstr("nosuch"));
  EXPECT_THAT(Cli("dcn-1 --format csv --table chips", 2), HasSubstr("links"));
}

}  // namespace
}  // namespace podprof::aggregator
