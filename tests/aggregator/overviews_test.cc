// The kept first views: an overview answers the whole capture as reading the store does, is
// computed once, and the least recently used goes.
#include "aggregator/api/overviews.h"

#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "ingest/capture_ingest.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"

namespace podprof::aggregator {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

// A one-host, two-chip capture of 10 ms: kernels of 3 to 40 us back to back.
ingest::CaptureInput Capture(const std::string& id) {
  trace::HostCapture c;
  c.host.name = "h0";
  c.host.chips.resize(2);
  c.host.chips[1].ordinal = 1;
  for (const char* name : {"fusion.1", "fusion.2", "copy.3"}) {
    trace::KernelDef k;
    k.module = "jit_step";
    k.name = name;
    c.kernels.push_back(k);
  }
  for (int chip = 0; chip < 2; ++chip) {
    trace::EventBlock b;
    b.chip = chip;
    b.line = "XLA Ops";
    b.base_ns = kT0;
    int64_t t = 0;
    for (int i = 0; t < 10'000'000'000; ++i) {  // ps
      const int64_t d = (3 + (i * 7 + chip) % 38) * 1'000'000;
      b.start_ps.push_back(t);
      b.duration_ps.push_back(d);
      b.kernel.push_back(static_cast<uint32_t>(i % 3));
      b.collective.push_back(0);
      t += d + 500'000;
    }
    c.blocks.push_back(std::move(b));
  }
  ingest::CaptureInput w;
  w.id = id;
  w.start_ns = kT0;
  w.end_ns = kT0 + 10'000'000;
  ingest::HostInput h;
  h.host = "h0";
  h.capture = std::move(c);
  w.hosts.push_back(std::move(h));
  return w;
}

class OverviewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = storage::Store::Open(db_.path());
    ASSERT_OK(s);
    store_ = *std::move(s);
  }
  storage::CaptureRow Stored(const std::string& id) {
    EXPECT_OK(ingest::StoreCapture(store_->writer(), Capture(id)));
    absl::StatusOr<storage::CaptureRow> row = store_->captures().Get(id);
    EXPECT_OK(row);
    if (!row.ok()) return storage::CaptureRow();
    return *row;
  }
  podprof::testing::TempDatabase db_{"overviews"};
  std::unique_ptr<storage::Store> store_;
  FakeClock clock_{0};  // the read-ahead thread looks only when a test moves it
};

TEST_F(OverviewsTest, TheKeptViewAnswersTheWholeCaptureAsTheStoreDoes) {
  const storage::CaptureRow row = Stored("a");
  Overviews overviews(StoreReads(*store_), clock_);
  auto kept = overviews.Get(row, {});
  ASSERT_OK(kept);
  EXPECT_EQ((*kept)->view.width_px(), 4096);
  EXPECT_EQ((*kept)->waits["chips"].size(), 2u);
  TimelineWindow w;
  w.from_ns = row.start_ns;
  w.to_ns = row.end_ns;
  w.width_px = 700;
  auto read = ReadView(StoreReads(*store_), row, w, {}, true);
  ASSERT_OK(read);
  const auto direct = nlohmann::json::parse(read->view.Finish())["tracks"];
  const auto resampled = nlohmann::json::parse((*kept)->view.Resampled(700).Finish())["tracks"];
  ASSERT_EQ(direct.size(), 2u);
  ASSERT_EQ(resampled.size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(resampled[t]["slices"], direct[t]["slices"]);
    ASSERT_EQ(resampled[t]["bins"].size(), direct[t]["bins"].size());
    for (size_t i = 0; i < direct[t]["bins"].size(); i += 3) {
      EXPECT_EQ(resampled[t]["bins"][i], direct[t]["bins"][i]);
      EXPECT_NEAR(resampled[t]["bins"][i + 1].get<int>(), direct[t]["bins"][i + 1].get<int>(), 1);
    }
  }
}

TEST_F(OverviewsTest, AViewIsComputedOnceAndTheLeastRecentlyUsedGoes) {
  // The key the read-ahead thread uses too (DefaultCounters), so that it adds no entries.
  const std::set<std::string> kAuto = {"auto"};
  Overviews overviews(StoreReads(*store_), clock_);
  const storage::CaptureRow first = Stored("c0");
  auto a = overviews.Get(first, kAuto);
  ASSERT_OK(a);
  auto again = overviews.Get(first, kAuto);
  ASSERT_OK(again);
  EXPECT_EQ(a->get(), again->get());  // kept, not read again
  for (int i = 1; i <= 4; ++i) ASSERT_OK(overviews.Get(Stored("c" + std::to_string(i)), kAuto));
  auto later = overviews.Get(first, kAuto);
  ASSERT_OK(later);
  EXPECT_NE(a->get(), later->get());  // four others came after it: it went, and was read again
  storage::CaptureRow gone = first;
  gone.id = "none";
  EXPECT_TRUE(absl::IsNotFound(overviews.Get(gone, kAuto).status()));
}

}  // namespace
}  // namespace podprof::aggregator
