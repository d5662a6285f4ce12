// One analysis, two places (#37): a host analysed a device plane at a time, as the agent reads
// it, says exactly what the whole capture analysed at once says; its collective ends are the
// clock alignment's; and its summary crosses the capture stream unchanged, a summary that
// names what the stream never defined refused with the chunk and the row.
#include "analysis/host_summary.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "stream/capture_decoder.h"
#include "stream/capture_encoder.h"
#include "tests/util/files.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/byte_source.h"
#include "trace/columns.h"
#include "trace/xspace_reader.h"

namespace podprof::analysis {
namespace {

namespace v1 = podprof::v1;

// Every figure of two summaries, field by field, sketches by their serialization.
void ExpectSameSummary(const HostSummary& got, const HostSummary& want) {
  ASSERT_EQ(got.stats.size(), want.stats.size());
  for (size_t i = 0; i < got.stats.size(); ++i) {
    const trace::KernelStats &a = got.stats[i], &b = want.stats[i];
    EXPECT_EQ(std::tie(a.chip, a.kernel, a.count, a.total_ps, a.min_ps, a.max_ps),
              std::tie(b.chip, b.kernel, b.count, b.total_ps, b.min_ps, b.max_ps))
        << "statistics row " << i;
    EXPECT_EQ(a.sketch.Serialize(), b.sketch.Serialize()) << "statistics row " << i;
  }
  ASSERT_EQ(got.attributions.size(), want.attributions.size());
  for (size_t i = 0; i < got.attributions.size(); ++i) {
    const trace::KernelCounter &a = got.attributions[i], &b = want.attributions[i];
    EXPECT_EQ(std::tie(a.chip, a.kernel, a.counter, a.kind, a.integral, a.covered_ps, a.executions),
              std::tie(b.chip, b.kernel, b.counter, b.kind, b.integral, b.covered_ps, b.executions))
        << "attribution row " << i;
  }
  ASSERT_EQ(got.scopes.size(), want.scopes.size());
  for (size_t i = 0; i < got.scopes.size(); ++i) {
    const trace::KernelScope &a = got.scopes[i], &b = want.scopes[i];
    EXPECT_EQ(std::tie(a.chip, a.kernel, a.line, a.name, a.scope_kernel, a.count, a.total_ps),
              std::tie(b.chip, b.kernel, b.line, b.name, b.scope_kernel, b.count, b.total_ps))
        << "scope row " << i;
  }
  ASSERT_EQ(got.arrivals.size(), want.arrivals.size());
  for (size_t i = 0; i < got.arrivals.size(); ++i) {
    const insight::CollectiveRun &a = got.arrivals[i], &b = want.arrivals[i];
    EXPECT_EQ(
        std::tie(a.id, a.start_ns, a.duration_ns, a.step, a.chip_key, a.kernel_key, a.end_carry),
        std::tie(b.id, b.start_ns, b.duration_ns, b.step, b.chip_key, b.kernel_key, b.end_carry))
        << "arrival " << i;
  }
}

// Feeds each piece of a capture read in pieces to a HostAnalyser, as the agent does.
class Analyse final : public trace::PieceSink {
 public:
  explicit Analyse(std::vector<trace::CounterSeries> also) : also_(std::move(also)) {}
  absl::Status OnHost(const trace::Host& host) override {
    analyser_.emplace(host.chips, std::move(also_));
    return absl::OkStatus();
  }
  absl::Status OnPlane(const trace::HostCapture& piece, size_t) override {
    ++pieces;
    analyser_->Add(piece);
    return absl::OkStatus();
  }
  absl::StatusOr<HostSummary> Finish() { return analyser_->Finish(); }
  int pieces = 0;

 private:
  std::vector<trace::CounterSeries> also_;
  std::optional<HostAnalyser> analyser_;
};

// A simulated v5p host of a 2-host pod (collectives, steps, counters, scopes), as XSpace bytes.
std::string SimulatedHost() {
  sim::PodConfig pod;
  pod.generation = "v5p";
  pod.hosts = 2;
  pod.pod_seed = 37;
  auto model = sim::PodModel::Create(pod);
  EXPECT_OK(model);
  FakeClock fake(1'767'225'600'000'000'000);
  SkewedClock host(fake, 0, 0);
  sim::SessionWindow w;
  w.true_start_ns = fake.NowNs();
  w.true_end_ns = w.true_start_ns + 200'000'000;
  w.counters = true;
  return sim::BuildXSpace(*model, host, w).space.SerializeAsString();
}

// A series sampled beside the capture on the chip with `ordinal`, over the capture's span.
trace::CounterSeries Sampled(const trace::HostCapture& whole, int ordinal) {
  int64_t begin = INT64_MAX, end = INT64_MIN;
  for (const trace::EventBlock& b : whole.blocks) {
    if (b.size() == 0) continue;
    begin = std::min(begin, b.base_ns);
    end = std::max(end, b.base_ns + (b.start_ps.back() + b.duration_ps.back()) / 1000);
  }
  trace::CounterSeries s;
  s.chip = ordinal;
  s.name = "tpu.runtime.hbm.memory.usage.bytes";
  for (int64_t t = begin; t < end; t += 5'000'000) {
    s.time_ns.push_back(t);
    s.value.push_back(static_cast<double>((t - begin) % 7'000'000));
  }
  return s;
}

struct Case {
  const char* name;
  std::string bytes;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const char* fixture : {testing::kTpuFixture, testing::kGpuFixture}) {
    cases.push_back({fixture, testing::ReadTestFile(testing::FixturePath(fixture))});
  }
  cases.push_back({"simulated v5p host", SimulatedHost()});
  return cases;
}

TEST(HostSummaryTest, APlaneAtATimeSaysWhatTheWholeCaptureSays) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    trace::MemorySource whole_src(c.bytes);
    auto whole = trace::ReadXSpace(whole_src);
    ASSERT_OK(whole);
    ASSERT_FALSE(whole->host.chips.empty());
    // A sampled series of the first chip, attributed with its piece at the agent.
    trace::CounterSeries also = Sampled(*whole, whole->host.chips[0].ordinal);
    trace::CounterSeries also_by_index = also;
    also_by_index.chip = 0;
    const HostSummary want = SummariseHost(*whole, {also_by_index});
    ASSERT_FALSE(want.stats.empty());

    trace::MemorySource pieces_src(c.bytes);
    Analyse sink({also});
    ASSERT_OK(trace::ReadXSpaceInPieces(pieces_src, {}, &sink));
    EXPECT_GE(sink.pieces, 1);
    auto got = sink.Finish();
    ASSERT_OK(got);
    ExpectSameSummary(*got, want);
  }
}

// The clock alignment's ends, computed as it computed them from the capture's events.
std::vector<std::pair<uint64_t, int64_t>> EndsFromEvents(const trace::HostCapture& c) {
  std::vector<std::pair<uint64_t, int64_t>> all;
  for (const trace::EventBlock& b : c.blocks) {
    if (!trace::IsKernelLine(b.kind)) continue;
    if (c.host.chips[b.chip].device_type == trace::kCpuDeviceType) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      if (b.collective[i] != 0) {
        all.emplace_back(b.collective[i], b.base_ns + (b.start_ps[i] + b.duration_ps[i]) / 1000);
      }
    }
  }
  std::sort(all.begin(), all.end());
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (size_t begin = 0, end = 0; begin < all.size(); begin = end) {
    while (end < all.size() && all[end].first == all[begin].first) ++end;
    out.emplace_back(all[begin].first, all[begin + (end - begin) / 2].second);
  }
  return out;
}

TEST(HostSummaryTest, CollectiveEndsFromTheSummaryAreTheEventsOwn) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    trace::MemorySource src(c.bytes);
    auto whole = trace::ReadXSpace(src);
    ASSERT_OK(whole);
    const auto want = EndsFromEvents(*whole);
    EXPECT_EQ(CollectiveEnds(SummariseHost(*whole), whole->host.chips), want);
    if (absl::StrContains(c.name, "simulated")) {
      EXPECT_FALSE(want.empty());
    }
  }
}

class Collect final : public stream::ChunkSink {
 public:
  bool Write(const v1::CaptureChunk& c) override {
    largest = std::max(largest, c.ByteSizeLong());
    chunks.push_back(c);
    return true;
  }
  std::vector<v1::CaptureChunk> chunks;
  size_t largest = 0;
};

// A capture's stream with its summary, at the smallest chunk limit.
Collect StreamWithSummary(const trace::HostCapture& capture, const HostSummary& summary,
                          uint64_t* rows) {
  constexpr size_t kLimit = stream::kMinChunkBytes;
  v1::HostInfo host;
  host.set_host_name("h");
  for (const trace::Chip& chip : capture.host.chips) *host.add_chips() = stream::ChipInfoOf(chip);
  Collect sink;
  stream::ChunkCounts counts;
  EXPECT_OK(stream::StreamCapture(capture, host, {}, kLimit, &sink, &counts));
  auto sent = stream::StreamSummary(summary, capture.host.chips, kLimit, &sink, &counts);
  EXPECT_OK(sent);
  *rows = sent.ok() ? *sent : 0;
  v1::CaptureTrailer trailer;
  trailer.set_summary_rows(*rows);
  sink.Write(stream::EncodeTrailer(trailer, kLimit));
  EXPECT_LE(sink.largest, kLimit);
  return sink;
}

TEST(HostSummaryTest, TheSummaryCrossesTheStreamUnchanged) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    trace::MemorySource src(c.bytes);
    auto whole = trace::ReadXSpace(src);
    ASSERT_OK(whole);
    const HostSummary want = SummariseHost(*whole);
    uint64_t rows = 0;
    Collect sink = StreamWithSummary(*whole, want, &rows);
    EXPECT_EQ(rows, want.stats.size() + want.attributions.size() + want.scopes.size() +
                        want.arrivals.size());
    stream::CaptureDecoder decoder;
    for (const v1::CaptureChunk& chunk : sink.chunks) ASSERT_OK(decoder.Add(chunk));
    ASSERT_TRUE(decoder.done());
    EXPECT_TRUE(decoder.has_summary() || rows == 0);
    ExpectSameSummary(decoder.summary(), want);
    EXPECT_OK(CheckSummary(decoder.summary(), decoder.capture().host.chips.size(),
                           decoder.capture().kernels.size()));
  }
}

// The simulated host's stream with its summary, and the index of its first summary chunk.
std::vector<v1::CaptureChunk> SimulatedStream(size_t* first_summary) {
  const std::string bytes = SimulatedHost();
  trace::MemorySource src(bytes);
  auto whole = trace::ReadXSpace(src);
  EXPECT_OK(whole);
  uint64_t rows = 0;
  Collect sink = StreamWithSummary(*whole, SummariseHost(*whole), &rows);
  *first_summary = 0;
  while (*first_summary < sink.chunks.size() && !sink.chunks[*first_summary].has_summary()) {
    ++*first_summary;
  }
  return sink.chunks;
}

// Decodes `chunks`, expecting a refusal that mentions each of `words`.
void ExpectRefused(const std::vector<v1::CaptureChunk>& chunks,
                   const std::vector<std::string>& words) {
  stream::CaptureDecoder decoder;
  absl::Status s;
  for (const v1::CaptureChunk& chunk : chunks) {
    s = decoder.Add(chunk);
    if (!s.ok()) break;
  }
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& w : words) EXPECT_TRUE(absl::StrContains(s.message(), w)) << s;
}

// One codec for the stream and the store: an analysing agent's blocks cross the stream in the
// store's encoding and stay encoded (counted, not decoded) until stored; decoded, they are the
// events that were sent. A damaged or doubly-filled block is refused naming its chunk.
TEST(HostSummaryTest, BlocksInColumnsCrossTheStreamUndecoded) {
  const std::string bytes = SimulatedHost();
  trace::MemorySource src(bytes);
  auto whole = trace::ReadXSpace(src);
  ASSERT_OK(whole);
  constexpr size_t kLimit = stream::kMinChunkBytes;
  v1::HostInfo host;
  host.set_host_name("h");
  for (const trace::Chip& chip : whole->host.chips) *host.add_chips() = stream::ChipInfoOf(chip);
  Collect sink;
  stream::ChunkCounts counts;
  ASSERT_OK(stream::StreamCapture(*whole, host, {}, kLimit, &sink, &counts, /*columns=*/true));
  sink.Write(stream::EncodeTrailer({}, kLimit));
  EXPECT_LE(sink.largest, kLimit);

  stream::CaptureDecoder decoder;
  for (const v1::CaptureChunk& chunk : sink.chunks) ASSERT_OK(decoder.Add(chunk));
  trace::HostCapture& got = decoder.capture();
  EXPECT_EQ(got.EventCount(), whole->EventCount());
  for (const trace::EventBlock& b : got.blocks) {
    EXPECT_EQ(b.size(), 0u);  // nothing decoded on the way in
    EXPECT_FALSE(b.encoded.empty());
  }
  ASSERT_OK(trace::DecodeEncodedBlocks(&got));
  // The same events in the same order, runs of a block one after the other.
  auto flat = [](const trace::HostCapture& c) {
    std::vector<std::tuple<int, std::string, int64_t, uint32_t, uint64_t>> events;
    for (const trace::EventBlock& b : c.blocks) {
      for (size_t i = 0; i < b.size(); ++i) {
        events.emplace_back(b.chip, b.line, b.base_ns * 1000 + b.start_ps[i], b.kernel[i],
                            b.collective[i]);
      }
    }
    return events;
  };
  EXPECT_EQ(flat(got), flat(*whole));

  size_t first_block = 0;
  while (!sink.chunks[first_block].has_event_block()) ++first_block;
  auto bad = sink.chunks;
  bad[first_block].mutable_event_block()->set_columns("not zstd");
  ExpectRefused(bad, {"chunk " + std::to_string(first_block), "event_block"});
  bad = sink.chunks;
  bad[first_block].mutable_event_block()->add_kernel_id(1);
  ExpectRefused(bad, {"both encoded columns and column fields"});
}

TEST(HostSummaryTest, ASummaryNamingWhatTheStreamNeverDefinedIsRefused) {
  size_t first = 0;
  const std::vector<v1::CaptureChunk> good = SimulatedStream(&first);
  ASSERT_LT(first, good.size());
  ASSERT_GT(good[first].summary().stats_size(), 0);

  auto bad = good;
  bad[first].mutable_summary()->mutable_stats(0)->set_chip_ordinal(99);
  ExpectRefused(bad, {"summary", "chip 99", "never described"});

  bad = good;
  bad[first].mutable_summary()->mutable_stats(0)->set_kernel_id(100000);
  ExpectRefused(bad, {"summary", "kernel id 100000"});

  bad = good;
  bad[first].mutable_summary()->mutable_stats(0)->set_sketch("not a sketch");
  ExpectRefused(bad, {"summary", "sketch"});

  // Events after the summary, and a trailer that counts other rows than came.
  bad = good;
  bad.insert(bad.begin() + static_cast<long>(first) + 1, good[first - 1]);
  ExpectRefused(bad, {"after the summary"});
  bad = good;
  bad.back().mutable_trailer()->set_summary_rows(good.back().trailer().summary_rows() + 1);
  ExpectRefused(bad, {"trailer", "summary rows"});
}

// Trust, but verify: a summary is held to the stream it came with.
TEST(HostSummaryTest, ASummaryThatCountsOtherExecutionsThanTheStreamIsRefused) {
  size_t first = 0;
  const std::vector<v1::CaptureChunk> chunks = SimulatedStream(&first);
  stream::CaptureDecoder decoder;
  for (const v1::CaptureChunk& chunk : chunks) ASSERT_OK(decoder.Add(chunk));
  const HostSummary good = decoder.summary();
  ASSERT_OK(VerifySummary(good, decoder.tally()));

  HostSummary bad = good;  // one execution more, the sketch made to agree
  bad.stats[0].count += 1;
  bad.stats[0].sketch.Add(static_cast<double>(bad.stats[0].max_ps));
  ASSERT_OK(
      CheckSummary(bad, decoder.capture().host.chips.size(), decoder.capture().kernels.size()));
  EXPECT_THAT(VerifySummary(bad, decoder.tally()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("but the stream holds")));
  bad = good;  // a kernel that ran left out
  bad.stats.pop_back();
  EXPECT_THAT(VerifySummary(bad, decoder.tally()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("but the stream holds")));
  bad = good;  // an arrival made up
  bad.arrivals.push_back(bad.arrivals.front());
  EXPECT_THAT(VerifySummary(bad, decoder.tally()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("collective arrivals on chip")));
}

TEST(HostSummaryTest, ASummaryThatDoesNotAddUpIsRefused) {
  const std::string bytes = SimulatedHost();
  trace::MemorySource src(bytes);
  auto whole = trace::ReadXSpace(src);
  ASSERT_OK(whole);
  const size_t chips = whole->host.chips.size(), kernels = whole->kernels.size();
  const HostSummary good = SummariseHost(*whole);
  ASSERT_OK(CheckSummary(good, chips, kernels));
  ASSERT_FALSE(good.arrivals.empty());

  HostSummary bad = good;
  bad.stats[0].count += 1;  // the sketch counts one execution fewer
  EXPECT_THAT(CheckSummary(bad, chips, kernels),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("statistics row 0 does not add up")));
  bad = good;
  bad.attributions.front().chip = static_cast<int>(chips);
  EXPECT_THAT(CheckSummary(bad, chips, kernels),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("attribution row 0 names chip index")));
  bad = good;
  bad.arrivals.front().end_carry = 5;
  EXPECT_THAT(CheckSummary(bad, chips, kernels),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("arrival row 0 is no collective run")));
}

// What a hostile or broken agent sent and every earlier check passed: durations far beyond the
// window, totals that wrap, a sketch of other durations than the row's, a NaN attribution.
TEST(HostSummaryTest, ASummaryBeyondWhatIsPhysicalIsRefused) {
  const std::string bytes = SimulatedHost();
  trace::MemorySource src(bytes);
  auto whole = trace::ReadXSpace(src);
  ASSERT_OK(whole);
  const size_t chips = whole->host.chips.size(), kernels = whole->kernels.size();
  const HostSummary good = SummariseHost(*whole);
  const int64_t window_ps = int64_t{60} * 1'000'000'000'000;
  ASSERT_OK(CheckSummary(good, chips, kernels, window_ps));
  ASSERT_GE(good.stats.size(), 2u);

  HostSummary bad = good;  // events of 100 us sent as an hour each
  bad.stats[0].max_ps = int64_t{3600} * 1'000'000'000'000;
  bad.stats[0].total_ps = bad.stats[0].max_ps * bad.stats[0].count;
  EXPECT_THAT(CheckSummary(bad, chips, kernels, window_ps),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("longer than the capture allows")));
  bad = good;  // a total no count of executions within [min, max] can reach
  bad.stats[0].total_ps = bad.stats[0].max_ps * bad.stats[0].count + 1;
  EXPECT_THAT(CheckSummary(bad, chips, kernels),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("statistics row 0 totals")));
  bad = good;  // two rows of 2^62 ps: each adds up alone, the host's sum wraps
  for (int i = 0; i < 2; ++i) {
    trace::KernelStats& st = bad.stats[i];
    st.count = 1;
    st.min_ps = st.max_ps = st.total_ps = int64_t{1} << 62;
    st.sketch = trace::DDSketch();
    st.sketch.Add(static_cast<double>(st.max_ps));
  }
  EXPECT_THAT(CheckSummary(bad, chips, kernels),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("more picoseconds than 64 bits hold")));
  bad = good;  // the sketch of a row is another row's (far apart): it counts right, lies wrong
  {
    trace::KernelStats& st = bad.stats[0];
    st.sketch = trace::DDSketch();
    st.sketch.Add(static_cast<double>(st.max_ps) * 1000, static_cast<uint64_t>(st.count));
  }
  EXPECT_THAT(CheckSummary(bad, chips, kernels),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("sketch holds durations outside")));
  ASSERT_FALSE(good.attributions.empty());
  bad = good;  // one NaN failed the whole capture's write
  bad.attributions.front().integral = std::nan("");
  EXPECT_THAT(CheckSummary(bad, chips, kernels),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("attribution row 0")));
  // Found by summary_fuzzer: an arrival's end (start + duration) overflowed int64 where the
  // clock alignment reads it.
  ASSERT_FALSE(good.arrivals.empty());
  bad = good;
  bad.arrivals.front().start_ns = INT64_MAX - 10;
  bad.arrivals.front().duration_ns = 100;
  EXPECT_THAT(CheckSummary(bad, chips, kernels),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("arrival row 0 is no collective run")));
  bad = good;
  bad.arrivals.front().duration_ns = int64_t{7200} * 1'000'000'000;  // two hours
  EXPECT_THAT(
      CheckSummary(bad, chips, kernels, /*max_duration_ps=*/int64_t{61} * 1'000'000'000'000),
      testing::StatusIs(absl::StatusCode::kInvalidArgument,
                        ::testing::HasSubstr("arrival row 0 is no collective run")));
}

}  // namespace
}  // namespace podprof::analysis
