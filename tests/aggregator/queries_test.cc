// The query layer both APIs answer from: its defaults and paging, its checks of a request, and
// the roll-ups it leaves unjudged; and an import fed chunk by chunk.
#include "aggregator/api/queries.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "aggregator/api/importer.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ingest/capture_ingest.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"

namespace podprof::aggregator {
namespace {

using ::podprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

// A one-host, one-chip capture of 1 ms starting `offset_ns` after kT0: two kernels.
ingest::CaptureInput Capture(const std::string& id, int64_t offset_ns) {
  trace::HostCapture c;
  c.host.name = "h0";
  c.host.chips.resize(1);
  for (const char* name : {"fusion.1", "copy.2"}) {
    trace::KernelDef k;
    k.module = "jit_step";
    k.name = name;
    k.category = name[0] == 'f' ? "fusion" : "copy";
    c.kernels.push_back(k);
  }
  trace::EventBlock b;
  b.line = "XLA Ops";
  b.base_ns = kT0 + offset_ns;
  for (int i = 0; i < 100; ++i) {
    b.start_ps.push_back(i * 10'000'000);
    b.duration_ps.push_back((i % 2 == 0 ? 6 : 2) * 1'000'000);
    b.kernel.push_back(static_cast<uint32_t>(i % 2));
    b.collective.push_back(0);
  }
  c.blocks.push_back(std::move(b));
  ingest::CaptureInput w;
  w.id = id;
  w.start_ns = kT0 + offset_ns;
  w.end_ns = w.start_ns + 1'000'000;
  ingest::HostInput h;
  h.host = "h0";
  h.capture = std::move(c);
  w.hosts.push_back(std::move(h));
  return w;
}

class QueriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(store_, storage::Store::Open(db_.path()));
    registry_ = std::make_unique<Registry>(clock_, 1'000'000'000, 0);
    queries_ = std::make_unique<Queries>(*store_, *registry_);
  }
  void Store(const std::string& id, int64_t offset_ns) {
    ASSERT_OK(ingest::StoreCapture(store_->writer(), Capture(id, offset_ns)));
  }
  FakeClock clock_{kT0};
  podprof::testing::TempDatabase db_{"queries"};
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<Queries> queries_;
};

// Both APIs read telemetry here with one default and one cap: gRPC's limit 0 used to read
// 100,000 rows where HTTP's default was 10,000, and gRPC had no cap.
TEST_F(QueriesTest, TelemetryHasOneDefaultLimitAndOneCap) {
  std::vector<storage::TelemetryRecord> rows;
  for (int i = 0; i <= kMaxTelemetryLimit; ++i) {
    storage::TelemetryRecord r;
    r.host = i % 2 == 0 ? "h0" : "h1";
    r.time_ns = kT0 + int64_t{i} * 1'000'000;
    r.interval_ns = 1'000'000;
    r.steps = i;
    rows.push_back(r);
  }
  ASSERT_OK(store_->telemetry().Append(rows));
  v1::GetTelemetryRequest request;
  for (int limit : {0, -5}) {
    request.set_limit(limit);
    ASSERT_OK_AND_ASSIGN(v1::GetTelemetryResponse some, queries_->Telemetry(request));
    ASSERT_EQ(some.rows_size(), kDefaultTelemetryLimit) << "limit " << limit;
    EXPECT_TRUE(some.truncated());
    // The newest, oldest first.
    EXPECT_EQ(some.rows(0).chip().steps(), kMaxTelemetryLimit + 1 - kDefaultTelemetryLimit);
    EXPECT_EQ(some.rows(kDefaultTelemetryLimit - 1).chip().steps(), kMaxTelemetryLimit);
  }
  request.set_limit(kMaxTelemetryLimit * 2);
  ASSERT_OK_AND_ASSIGN(v1::GetTelemetryResponse capped, queries_->Telemetry(request));
  EXPECT_EQ(capped.rows_size(), kMaxTelemetryLimit);
  EXPECT_TRUE(capped.truncated());
  // A window and a host narrow it; until 0 is no end.
  request.set_limit(0);
  request.set_since_ns(kT0 + 10 * 1'000'000);
  request.set_until_ns(kT0 + 20 * 1'000'000);
  request.add_hosts("h1");
  ASSERT_OK_AND_ASSIGN(v1::GetTelemetryResponse narrow, queries_->Telemetry(request));
  ASSERT_EQ(narrow.rows_size(), 5);
  EXPECT_EQ(narrow.rows(0).host(), "h1");
  EXPECT_EQ(narrow.rows(0).chip().steps(), 11);
  EXPECT_FALSE(narrow.truncated());
}

TEST_F(QueriesTest, CapturesComeNewestFirstAPageAtATime) {
  Store("a", 0);
  Store("b", 10'000'000);
  Store("c", 20'000'000);
  v1::ListCapturesRequest r;
  r.set_limit(2);
  ASSERT_OK_AND_ASSIGN(v1::ListCapturesResponse first, queries_->ListCaptures(r));
  ASSERT_EQ(first.captures_size(), 2);
  EXPECT_EQ(first.captures(0).capture_id(), "c");
  EXPECT_EQ(first.captures(1).capture_id(), "b");
  ASSERT_FALSE(first.next_page_token().empty());
  r.set_page_token(first.next_page_token());
  ASSERT_OK_AND_ASSIGN(v1::ListCapturesResponse second, queries_->ListCaptures(r));
  ASSERT_EQ(second.captures_size(), 1);
  EXPECT_EQ(second.captures(0).capture_id(), "a");
  EXPECT_TRUE(second.next_page_token().empty());
  // No limit named: the default, which three captures are under.
  ASSERT_OK_AND_ASSIGN(v1::ListCapturesResponse all, queries_->ListCaptures({}));
  EXPECT_EQ(all.captures_size(), 3);
}

TEST_F(QueriesTest, ACaptureComesWithItsHostsAsStored) {
  Store("a", 0);
  ASSERT_OK_AND_ASSIGN(v1::CaptureSummary c, queries_->Capture("a"));
  EXPECT_EQ(c.capture_id(), "a");
  EXPECT_EQ(c.status(), v1::CAPTURE_STATUS_COMPLETE);
  ASSERT_EQ(c.hosts_size(), 1);
  EXPECT_EQ(c.hosts(0).host_name(), "h0");
  EXPECT_EQ(c.hosts(0).event_count(), 100u);
  EXPECT_THAT(queries_->Capture("nope"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
}

TEST_F(QueriesTest, KernelsAreJudgedButRollUpsAreNot) {
  Store("a", 0);
  v1::GetKernelStatsRequest r;
  r.set_capture_id("a");
  ASSERT_OK_AND_ASSIGN(v1::GetKernelStatsResponse kernels, queries_->KernelStats(r));
  ASSERT_EQ(kernels.stats_size(), 2);
  EXPECT_EQ(kernels.stats(0).kernel().op_name(), "fusion.1");  // the most total time first
  EXPECT_TRUE(kernels.stats(0).has_insight());
  r.set_group_by(v1::KERNEL_GROUPING_CATEGORY);
  ASSERT_OK_AND_ASSIGN(v1::GetKernelStatsResponse categories, queries_->KernelStats(r));
  ASSERT_EQ(categories.stats_size(), 2);
  EXPECT_FALSE(categories.stats(0).has_insight());
  r.set_group_by(v1::KERNEL_GROUPING_KERNEL);
  r.set_top_n(1);
  ASSERT_OK_AND_ASSIGN(v1::GetKernelStatsResponse top, queries_->KernelStats(r));
  EXPECT_EQ(top.stats_size(), 1);
  EXPECT_EQ(top.matched_count(), 2u);
}

TEST_F(QueriesTest, ABadRequestIsRefusedNamingTheField) {
  Store("a", 0);
  v1::GetKernelStatsRequest r;
  EXPECT_THAT(queries_->KernelStats(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("capture_id")));
  r.set_capture_id("a");
  // A backreference is not RE2's: refused, naming the field, before the store is asked (the
  // HTTP API's ?kernel= goes through here too).
  r.mutable_filter()->set_op_regex("(a)\\1");
  EXPECT_THAT(queries_->KernelStats(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("filter.op_regex")));
  v1::CompareCapturesRequest diff;
  diff.set_baseline_capture_id("a");
  EXPECT_THAT(queries_->Compare(diff), StatusIs(absl::StatusCode::kInvalidArgument));
  v1::DescribeKernelRequest kernel;
  EXPECT_THAT(queries_->DescribeKernel(kernel),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("op_name")));
  kernel.set_op_name("nothing.9");
  EXPECT_THAT(queries_->DescribeKernel(kernel),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nothing.9")));
}

TEST_F(QueriesTest, HistoryFlagsEachPointAgainstTheOneBefore) {
  Store("a", 0);
  Store("b", 10'000'000);
  v1::KernelHistoryRequest r;
  r.mutable_filter()->set_op_regex("^fusion\\.1$");
  ASSERT_OK_AND_ASSIGN(v1::KernelHistoryResponse h, queries_->KernelHistory(r));
  ASSERT_EQ(h.series_size(), 1);
  ASSERT_EQ(h.series(0).points_size(), 2);
  EXPECT_FALSE(h.series(0).points(1).regression());  // the same kernel times both times
  r.set_max_points(1);
  ASSERT_OK_AND_ASSIGN(v1::KernelHistoryResponse last, queries_->KernelHistory(r));
  ASSERT_EQ(last.series(0).points_size(), 1);
  EXPECT_EQ(last.series(0).points(0).capture_id(), "b");
}

v1::ImportXSpaceChunk Chunk(const std::string& host, const std::string& data) {
  v1::ImportXSpaceChunk c;
  c.set_host_name(host);
  c.set_data(data);
  return c;
}

TEST_F(QueriesTest, AnImportNamesEachFileItCouldNotRead) {
  ImportLimits limits;
  limits.spool_dir = ::testing::TempDir();
  limits.max_file_bytes = 64;
  Importer import(store_->writer(), *queries_, clock_, limits);
  ASSERT_OK(import.Add(Chunk("h0", "not an xspace")));
  ASSERT_OK(import.Add(Chunk("h1", std::string(100, 'x'))));  // over the limit
  absl::StatusOr<v1::ImportXSpaceResponse> done = import.Finish();
  EXPECT_THAT(done, StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("no file could be imported: h0.xplane.pb")));
  // Nothing was stored.
  ASSERT_OK_AND_ASSIGN(v1::ListCapturesResponse all, queries_->ListCaptures({}));
  EXPECT_EQ(all.captures_size(), 0);
}

TEST_F(QueriesTest, AnImportRefusesAHostTwiceAndAChunkWithoutAHost) {
  ImportLimits limits;
  limits.spool_dir = ::testing::TempDir();
  {
    Importer import(store_->writer(), *queries_, clock_, limits);
    EXPECT_THAT(import.Add(Chunk("", "x")),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must name its host")));
  }
  Importer import(store_->writer(), *queries_, clock_, limits);
  ASSERT_OK(import.Add(Chunk("h0", "x")));
  ASSERT_OK(import.Add(Chunk("h1", "y")));
  EXPECT_THAT(import.Add(Chunk("h0", "z")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host h0 appears twice")));
}

}  // namespace
}  // namespace podprof::aggregator
