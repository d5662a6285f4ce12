// SQL over a stored capture: a pod made here, whose every answer the test computes from how it
// was made (not from podprof's reading of it), stored through the ingest path into a real
// SQLite file and segment files, then asked the questions docs/SQL.md promises; and the hostile
// statements each limit is for.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ingest/capture_ingest.h"
#include "sql/capture_tables.h"
#include "storage/store.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"

namespace podprof::sql {
namespace {

using ::podprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'800'000'000'000'000'000;
constexpr int64_t kUs = 1'000;
constexpr int64_t kStepNs = 1'000'000;
constexpr int kHosts = 3, kChips = 2, kSteps = 4;

// A clock that moves 1 ms every time it is read: a statement's time limit passes after as many
// reads, whatever the machine's speed.
class TickingClock : public Clock {
 public:
  int64_t NowNs() override { return now_ += 1'000'000; }
  int64_t MonotonicNs() override { return NowNs(); }
  bool SleepUntilNs(int64_t, absl::Notification*) override { return true; }

 private:
  int64_t now_ = kT0;
};

// fusion.7's duration on host h, chip c, step s.
int64_t FusionNs(int h, int c, int s) { return (100 + 10 * h + c + s) * kUs; }
// Who arrives last at all-reduce.3 in step s, and everyone's arrival after the step's start.
bool IsLast(int h, int c, int s) { return h == s % kHosts && c == s % kChips; }
int64_t ArrivalNs(int h, int c, int s) { return (500 + (IsLast(h, c, s) ? 50 : h + 3 * c)) * kUs; }

trace::EventBlock Block(int chip, const std::string& line) {
  trace::EventBlock b;
  b.chip = chip;
  b.line = line;
  b.kind = trace::LineKindOfName(line);
  b.base_ns = kT0;
  return b;
}

void Add(trace::EventBlock* b, int64_t start_ns, int64_t duration_ns, uint32_t kernel,
         uint64_t collective = 0) {
  b->start_ps.push_back((start_ns - b->base_ns) * 1000);
  b->duration_ps.push_back(duration_ns * 1000);
  b->kernel.push_back(kernel);
  b->collective.push_back(collective);
}

// Each step: a `Steps` event named step + 10, fusion.7 100 us in, all-reduce.3 (instance
// 5000 + step) from its arrival to 700 us in. Host 0's chip 0 also runs while.1 (200-400 us)
// around fusion.8 (250-300 us) in step 0. Host 1's chip 1 has two counters.
ingest::CaptureInput Pod() {
  ingest::CaptureInput w;
  w.id = "sql-1";
  w.start_ns = kT0;
  w.end_ns = kT0 + kSteps * kStepNs;
  for (int h = 0; h < kHosts; ++h) {
    trace::HostCapture c;
    c.host.name = absl::StrCat("h", h);
    c.host.chips.resize(kChips);
    for (int i = 0; i < kChips; ++i) c.host.chips[i].ordinal = i;
    for (const char* name : {"fusion.7", "all-reduce.3", "while.1", "fusion.8"}) {
      trace::KernelDef k;
      k.module = "jit_train_step";
      k.program_id = 42;
      k.name = name;
      k.category = name[0] == 'a' ? "all-reduce" : "loop fusion";
      c.kernels.push_back(k);
    }
    for (int s = 0; s < kSteps; ++s) {
      trace::KernelDef step;
      step.name = absl::StrCat(s + 10);
      step.category = "step";
      c.kernels.push_back(step);
    }
    for (int chip = 0; chip < kChips; ++chip) {
      trace::EventBlock ops = Block(chip, "XLA Ops"), steps = Block(chip, "Steps");
      for (int s = 0; s < kSteps; ++s) {
        const int64_t at = kT0 + s * kStepNs;
        Add(&steps, at, kStepNs, static_cast<uint32_t>(4 + s));
        Add(&ops, at + 100 * kUs, FusionNs(h, chip, s), 0);
        if (h == 0 && chip == 0 && s == 0) {
          Add(&ops, at + 200 * kUs, 200 * kUs, 2);
          Add(&ops, at + 250 * kUs, 50 * kUs, 3);
        }
        Add(&ops, at + ArrivalNs(h, chip, s), 700 * kUs - ArrivalNs(h, chip, s), 1, 5000 + s);
      }
      c.blocks.push_back(std::move(ops));
      c.blocks.push_back(std::move(steps));
    }
    if (h == 1) {
      trace::CounterSeries busy;
      busy.chip = 1;
      busy.name = "mxu_busy";
      busy.time_ns = {kT0, kT0 + 1000, kT0 + 2000};
      busy.value = {0.25, 0.5, 0.75};
      trace::CounterSeries cycles;
      cycles.chip = 1;
      cycles.name = "perf/die1_tc_cycles";
      cycles.time_ns = {kT0, kT0 + 1000};
      cycles.value = {100, 300};
      c.counters = {busy, cycles};
    }
    ingest::HostInput in;
    in.host = c.host.name;
    in.clock_uncertainty_ns = 30 + h;
    in.capture = std::move(c);
    w.hosts.push_back(std::move(in));
  }
  return w;
}

class CaptureSqlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(store_, storage::Store::Open(db_.path()));
    ASSERT_OK(ingest::StoreCapture(store_->writer(), Pod()));
    sources_ = {&store_->captures(), &store_->kernels(), &store_->telemetry()};
  }
  absl::StatusOr<Result> Run(const std::string& sql, Limits limits = Limits()) {
    return RunOnCapture(sources_, "sql-1", sql, limits, clock_);
  }

  FakeClock clock_{kT0};
  podprof::testing::TempDatabase db_{"sql"};
  std::unique_ptr<storage::Store> store_;
  StoreSources sources_;
};

int64_t Int(const Value& v) { return std::get<int64_t>(v); }
std::string Text(const Value& v) { return std::get<std::string>(v); }

TEST_F(CaptureSqlTest, TheTenSlowestExecutionsOfAKernelWithHostChipAndAlignedStart) {
  ASSERT_OK_AND_ASSIGN(Result r, Run("SELECT host, chip, start_ns, duration_ns, start_error_ns, "
                                     "step FROM events WHERE kernel = 'fusion.7' "
                                     "ORDER BY duration_ns DESC, host, chip LIMIT 10"));
  std::vector<std::tuple<int64_t, int, int, int>> want;  // -duration, host, chip, step
  for (int h = 0; h < kHosts; ++h) {
    for (int c = 0; c < kChips; ++c) {
      for (int s = 0; s < kSteps; ++s) want.emplace_back(-FusionNs(h, c, s), h, c, s);
    }
  }
  std::sort(want.begin(), want.end());
  EXPECT_THAT(r.columns, ::testing::ElementsAre("host", "chip", "start_ns", "duration_ns",
                                                "start_error_ns", "step"));
  ASSERT_EQ(r.rows.size(), 10u);
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const auto& [neg, h, c, s] = want[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(Text(r.rows[i][0]), absl::StrCat("h", h));
    EXPECT_EQ(Int(r.rows[i][1]), c);
    EXPECT_EQ(Int(r.rows[i][2]), kT0 + s * kStepNs + 100 * kUs);
    EXPECT_EQ(Int(r.rows[i][3]), -neg);
    EXPECT_EQ(Int(r.rows[i][4]), 30 + h);
    EXPECT_EQ(Int(r.rows[i][5]), s + 10);
  }
  EXPECT_FALSE(r.truncated);
}

TEST_F(CaptureSqlTest, PerStepTheChipThatArrivedLastAtACollective) {
  ASSERT_OK_AND_ASSIGN(Result r, Run("SELECT step, host, chip, members, instance FROM "
                                     "collectives WHERE kernel = 'all-reduce.3' AND last = 1 "
                                     "ORDER BY step"));
  ASSERT_EQ(r.rows.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    SCOPED_TRACE(s);
    EXPECT_EQ(Int(r.rows[s][0]), s + 10);
    EXPECT_EQ(Text(r.rows[s][1]), absl::StrCat("h", s % kHosts));
    EXPECT_EQ(Int(r.rows[s][2]), s % kChips);
    EXPECT_EQ(Int(r.rows[s][3]), kHosts * kChips);
    EXPECT_EQ(Int(r.rows[s][4]), 5000 + s);
  }
  // Everyone else waited for the last one: 50 us less their own lateness.
  ASSERT_OK_AND_ASSIGN(Result waits, Run("SELECT host, chip, wait_ns FROM collectives WHERE "
                                         "step = 11 ORDER BY host, chip"));
  ASSERT_EQ(waits.rows.size(), static_cast<size_t>(kHosts * kChips));
  for (const auto& row : waits.rows) {
    const int h = Text(row[0])[1] - '0', c = static_cast<int>(Int(row[1]));
    EXPECT_EQ(Int(row[2]), ArrivalNs(1 % kHosts, 1 % kChips, 1) - ArrivalNs(h, c, 1));
  }
}

TEST_F(CaptureSqlTest, SelfTimeLeavesOutNestedEvents) {
  ASSERT_OK_AND_ASSIGN(Result r, Run("SELECT kernel, duration_ns, self_time_ns FROM events "
                                     "WHERE host = 'h0' AND chip = 0 AND kernel IN "
                                     "('while.1', 'fusion.8') ORDER BY kernel"));
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(Text(r.rows[0][0]), "fusion.8");
  EXPECT_EQ(Int(r.rows[0][2]), 50 * kUs);
  EXPECT_EQ(Text(r.rows[1][0]), "while.1");
  EXPECT_EQ(Int(r.rows[1][1]), 200 * kUs);
  EXPECT_EQ(Int(r.rows[1][2]), 150 * kUs);
}

TEST_F(CaptureSqlTest, EventsCarryXprofsColumnNames) {
  ASSERT_OK_AND_ASSIGN(Result r, Run("SELECT device, category, hlo_op, hlo_module, end_ns - "
                                     "start_ns FROM events WHERE host = 'h2' AND chip = 1 AND "
                                     "line = 'XLA Ops' AND start_ns < " +
                                     std::to_string(kT0 + 150 * kUs)));
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(Text(r.rows[0][0]), "TPU:1");
  EXPECT_EQ(Text(r.rows[0][1]), "XLA Ops");
  EXPECT_EQ(Text(r.rows[0][2]), "fusion.7");
  EXPECT_EQ(Text(r.rows[0][3]), "jit_train_step(42)");
  EXPECT_EQ(Int(r.rows[0][4]), FusionNs(2, 1, 0));
}

TEST_F(CaptureSqlTest, CountersKernelsAndCounts) {
  ASSERT_OK_AND_ASSIGN(Result c, Run("SELECT host, chip, die, time_ns, value FROM counters "
                                     "WHERE counter = 'perf/die1_tc_cycles' ORDER BY time_ns"));
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(Text(c.rows[0][0]), "h1");
  EXPECT_EQ(Int(c.rows[0][1]), 1);
  EXPECT_EQ(Int(c.rows[0][2]), 1);
  EXPECT_EQ(std::get<double>(c.rows[1][4]), 300);
  ASSERT_OK_AND_ASSIGN(Result avg, Run("SELECT avg(value) FROM counters WHERE counter = "
                                       "'mxu_busy'"));
  EXPECT_DOUBLE_EQ(std::get<double>(avg.rows[0][0]), 0.5);
  ASSERT_OK_AND_ASSIGN(Result k, Run("SELECT host, chip, count, max_ns FROM kernels WHERE "
                                     "kernel = 'fusion.7' ORDER BY host, chip"));
  ASSERT_EQ(k.rows.size(), static_cast<size_t>(kHosts * kChips));
  EXPECT_EQ(Int(k.rows[5][2]), kSteps);
  EXPECT_DOUBLE_EQ(std::get<double>(k.rows[5][3]), FusionNs(2, 1, kSteps - 1));
  ASSERT_OK_AND_ASSIGN(Result n, Run("SELECT count(*) FROM events"));
  // Per chip and step: the step, fusion.7, all-reduce.3; and host 0's two nested ops.
  EXPECT_EQ(Int(n.rows[0][0]), kHosts * kChips * kSteps * 3 + 2);
}

TEST_F(CaptureSqlTest, AnUnknownCaptureIsNotFound) {
  EXPECT_THAT(RunOnCapture(sources_, "nope", "SELECT 1", Limits(), clock_),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
}

TEST_F(CaptureSqlTest, WritesFilesAndExtensionsAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"ATTACH DATABASE '/tmp/x.db' AS x", "ATTACH"},
      {"SELECT load_extension('/tmp/evil.so')", "load_extension"},
      {"CREATE TABLE t(x)", "schema change"},
      {"INSERT INTO events(host) VALUES ('x')", "INSERT"},
      {"DELETE FROM events", "may not be modified"},
      {"PRAGMA writable_schema = 1", "PRAGMA"},
      {"BEGIN", "transaction"},
      {"SELECT 1; SELECT 2", "one statement"},
      {"   ", "empty"},
      {"SELECT nope FROM events", "no such column"},
  };
  for (const auto& [sql, why] : refused) {
    SCOPED_TRACE(sql);
    EXPECT_THAT(Run(sql), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(why)));
  }
  Limits small;
  small.max_statement_bytes = 100;
  EXPECT_THAT(Run("SELECT '" + std::string(200, 'x') + "'", small),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("over its limit of 100")));
}

TEST_F(CaptureSqlTest, ARunawayStatementStopsAtItsTimeLimit) {
  TickingClock ticking;
  Limits limits;
  limits.time_limit_ns = 2'000'000'000;  // 2,000 reads of the ticking clock
  for (const std::string sql :
       {"WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT max(x) FROM n",
        "SELECT count(*) FROM events a, events b, events c, events d"}) {
    SCOPED_TRACE(sql);
    EXPECT_THAT(RunOnCapture(sources_, "sql-1", sql, limits, ticking),
                StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("time limit of 2 s")));
  }
}

TEST_F(CaptureSqlTest, RowsPastTheCapAreCutAndSaid) {
  Limits limits;
  limits.max_rows = 10;
  ASSERT_OK_AND_ASSIGN(Result r, Run("SELECT * FROM events", limits));
  EXPECT_EQ(r.rows.size(), 10u);
  EXPECT_TRUE(r.truncated);
  ASSERT_OK_AND_ASSIGN(Result all, Run("SELECT * FROM events LIMIT 10", limits));
  EXPECT_FALSE(all.truncated);
}

TEST_F(CaptureSqlTest, WhatPassesTheMemoryBudgetIsStoppedNamingIt) {
  Limits limits;
  limits.memory_bytes = (32 << 20) + 4096;  // SQLite's cache and hardly a host more
  EXPECT_THAT(Run("SELECT count(*) FROM events", limits),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("memory budget")));
  // A value as long as SQLite allows, repeated, passes the budget as rows come back.
  limits.memory_bytes = 64 << 20;
  EXPECT_THAT(Run("SELECT zeroblob(10000000) FROM events", limits),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("memory budget")));
  EXPECT_THAT(Run("SELECT zeroblob(100000000)", limits),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("too big")));
}

}  // namespace
}  // namespace podprof::sql
