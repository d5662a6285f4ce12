// The second timeline encoding (trace/timeline_v2.h): exact round trips of every int64 start
// and duration and every kernel and collective id, blocks of the first encoding still read,
// damage refused as DataLoss before anything expands, runs sized by the first encoding's bytes
// still within their limit, and its bytes on what bench_pod_scale stores.
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/clock.h"
#include "common/zstd_codec.h"
#include "gtest/gtest.h"
#include "loadgen/capture_source.h"
#include "loadgen/emulated_host.h"
#include "sim/pod_model.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/columns.h"
#include "trace/timeline_v2.h"
#include "trace/varint.h"
#include "trace/xspace_reader.h"

namespace podprof::trace {
namespace {

// Kernel ids as a store numbers them: the index + 1.
std::vector<int64_t> Ids(const EventBlock& b) {
  uint32_t most = 0;
  for (uint32_t k : b.kernel) most = std::max(most, k);
  return HostKernelNumbers(most + size_t{1});
}

void ExpectSameEvents(const EventBlock& want, size_t begin, size_t end, const EventBlock& got) {
  ASSERT_EQ(got.size(), end - begin);
  for (size_t i = begin; i < end; ++i) {
    const size_t j = i - begin;
    ASSERT_EQ(got.start_ps[j], want.start_ps[i]) << i;
    ASSERT_EQ(got.duration_ps[j], want.duration_ps[i]) << i;
    ASSERT_EQ(got.kernel[j], want.kernel[i] + 1) << i;
    ASSERT_EQ(got.collective[j], want.collective[i]) << i;
  }
}

void Push(EventBlock* b, int64_t start, int64_t duration, uint32_t kernel, uint64_t collective) {
  b->start_ps.push_back(start);
  b->duration_ps.push_back(duration);
  b->kernel.push_back(kernel);
  b->collective.push_back(collective);
}

// A training step's kernels back to back with ps jitter, a collective every fifth.
EventBlock Jittered(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> noise(-30'000, 30'000);
  EventBlock b;
  int64_t t = 1'000'000;
  for (size_t i = 0; i < n; ++i) {
    const int64_t d = 40'000'000 + static_cast<int64_t>(i % 7) * 3'000'000 + noise(rng);
    Push(&b, t, d, static_cast<uint32_t>(i % 7), i % 5 == 0 ? 1000 + i : 0);
    t += d + 2'000 + (noise(rng) > 0 ? 1'000 : 0);
  }
  return b;
}

TEST(TimelineColumnsTest, EdgeCasesRoundTripExactly) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EventBlock b;
  Push(&b, 0, 0, 0, 0);
  Push(&b, kMax, kMax, 3, std::numeric_limits<uint64_t>::max());
  Push(&b, kMin, kMin, 0, 1);
  Push(&b, -5, -7, 2, 0);  // out of order, negative: every int64 round-trips
  Push(&b, kMax, 1, 1, 42);
  Push(&b, 12, kMin, 0, 0);
  for (size_t begin = 0; begin <= b.size(); ++begin) {
    for (size_t end = begin; end <= b.size(); ++end) {
      const std::string blob = EncodeTimeline(b, Ids(b), begin, end);
      ASSERT_TRUE(timeline_v2::Is(blob));
      ASSERT_OK(CheckTimeline(blob, 64 << 20));
      EXPECT_EQ(*EncodedCount(blob, "block"), end - begin);
      EventBlock got;
      ASSERT_OK(DecodeTimeline(blob, &got));
      ExpectSameEvents(b, begin, end, got);
    }
  }
}

TEST(TimelineColumnsTest, JitteredBlocksRoundTripAndAppend) {
  const EventBlock b = Jittered(20'000, 5);
  const std::string first = EncodeTimeline(b, Ids(b), 0, 12'345);
  const std::string second = EncodeTimeline(b, Ids(b), 12'345, b.size());
  EventBlock got;
  ASSERT_OK(DecodeTimeline(first, &got));
  ASSERT_OK(DecodeTimeline(second, &got));  // appended, as a store reads a block's runs
  ExpectSameEvents(b, 0, b.size(), got);
  EventBlock whole;
  ASSERT_OK(DecodeTimeline(EncodeTimeline(b, Ids(b)), &whole));
  ExpectSameEvents(b, 0, b.size(), whole);
}

TEST(TimelineColumnsTest, FirstEncodingStillReads) {
  const EventBlock b = Jittered(3'000, 9);
  const std::string v1 = EncodeTimelineV1(b, Ids(b), 0, b.size());
  ASSERT_FALSE(timeline_v2::Is(v1));
  ASSERT_OK(CheckTimeline(v1, 64 << 20));
  EXPECT_EQ(*EncodedCount(v1, "block"), b.size());
  EventBlock got;
  ASSERT_OK(DecodeTimeline(v1, &got));
  ExpectSameEvents(b, 0, b.size(), got);
  const std::string v2 = EncodeTimeline(b, Ids(b));
  std::printf("jittered block: v1 %zu bytes, v2 %zu (%.2f)\n", v1.size(), v2.size(),
              static_cast<double>(v2.size()) / v1.size());
  EXPECT_LT(v2.size(), v1.size());
}

// Every cut, every flipped byte and every forged header is refused or decodes to the declared
// events exactly (a flip inside zstd's literals may still decode), never to a partial block.
TEST(TimelineColumnsTest, DamageIsDataLoss) {
  const EventBlock b = Jittered(500, 11);
  const std::string blob = EncodeTimeline(b, Ids(b));
  for (size_t cut = 0; cut < blob.size(); ++cut) {
    const std::string d = blob.substr(0, cut);
    EventBlock got;
    const absl::Status checked = CheckTimeline(d, 64 << 20).status();
    const absl::Status decoded = DecodeTimeline(d, &got);
    EXPECT_FALSE(checked.ok() && decoded.ok()) << "cut at " << cut;
    if (!decoded.ok()) {
      EXPECT_TRUE(absl::IsDataLoss(decoded)) << decoded;
      EXPECT_EQ(got.size(), 0u) << "nothing of a damaged block is left behind";
    }
  }
  std::mt19937_64 rng(1);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string d = blob;
    d[rng() % d.size()] ^= static_cast<char>(1 + rng() % 255);
    EventBlock got;
    if (DecodeTimeline(d, &got).ok()) {
      EXPECT_EQ(got.size(), b.size());
    } else {
      EXPECT_EQ(got.size(), 0u);
    }
  }
  // A body of its own making: a count the content cannot hold, planes past 8, trailing bytes,
  // an unknown mode, a header with more than padding or with a name.
  auto forged = [](uint64_t count, const std::string& body, const std::string& extra = "") {
    std::string header;
    PutVarint(count, &header);
    header += extra;
    std::string out = "\x53\x2a\x4d\x18";
    const uint32_t size = static_cast<uint32_t>(header.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(size >> (8 * i)));
    return out + header + ZstdCompress(body, 1);
  };
  const std::string one_event = std::string("\x01\x00\x00", 3) + std::string("\x05\x00", 2);
  EventBlock ok;
  ASSERT_OK(DecodeTimeline(forged(1, one_event), &ok)) << "the forger's own honest case";
  EXPECT_EQ(ok.kernel, std::vector<uint32_t>{5});
  for (const std::string& bad :
       {forged(1'000, one_event), forged(1, std::string("\x01\x09\x00\x05\x00", 5)),
        forged(1, one_event + "x"), forged(1, std::string("\x07\x00\x00\x05\x00", 5)),
        forged(1, one_event, "\x01"),
        // A name in the header, as a counter series' that takes another's times has: not a
        // timeline's.
        forged(1, one_event,
               std::string("\x02"
                           "ab",
                           3))}) {
    EventBlock got;
    const absl::Status s = DecodeTimeline(bad, &got);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_EQ(got.size(), 0u);
  }
  // Millions of events claimed by a few bytes: refused before anything expands.
  absl::Status many = CheckTimeline(forged(50'000'000, one_event), 64 << 20).status();
  EXPECT_TRUE(absl::IsDataLoss(many)) << many;
  EXPECT_TRUE(absl::StrContains(many.message(), "a byte")) << many;
}

// One kernel repeated identically compresses past any bound; the encoder pads it up to
// kMaxEventsPerByte, so an honest block is never refused.
TEST(TimelineColumnsTest, AnIdenticalRunIsPaddedToTheEventsAByteBound) {
  EventBlock b;
  for (int i = 0; i < 1'000'000; ++i) Push(&b, i * int64_t{20'000'000}, 18'000'000, 0, 0);
  const std::string blob = EncodeTimeline(b, Ids(b));
  EXPECT_LE(b.size(), kMaxEventsPerByte * blob.size());
  ASSERT_OK(CheckTimeline(blob, 64 << 20));
  EventBlock got;
  ASSERT_OK(DecodeTimeline(blob, &got));
  ExpectSameEvents(b, 0, b.size(), got);
}

// The stream cuts a block into runs by the first encoding's bytes (MaxCounterBytesWithin);
// the second encoding's blob of such a run stays within the limit whatever the events hold.
TEST(TimelineColumnsTest, RunsCutByTheFirstEncodingsBytesFitTheirLimit) {
  std::mt19937_64 rng(3);
  EventBlock b;
  for (int i = 0; i < 100'000; ++i) {
    Push(&b, static_cast<int64_t>(rng()), static_cast<int64_t>(rng() >> (i % 2 ? 0 : 40)),
         static_cast<uint32_t>(rng() % 1000), i % 3 ? rng() : 0);
  }
  const std::vector<int64_t> ids = Ids(b);
  for (size_t limit : {size_t{128}, size_t{1000}, size_t{16} << 10, size_t{1} << 20}) {
    const size_t max_raw = MaxCounterBytesWithin(limit);
    ASSERT_GT(max_raw, 0u) << limit;
    size_t runs = 0;
    for (size_t begin = 0; begin < b.size() && runs < 50; ++runs) {
      size_t raw = 0, end = begin;
      for (int64_t prev = 0; end < b.size(); ++end) {
        const size_t e =
            VarintSize(ZigZag(static_cast<int64_t>(static_cast<uint64_t>(b.start_ps[end]) -
                                                   static_cast<uint64_t>(prev)))) +
            VarintSize(ZigZag(b.duration_ps[end])) + VarintSize(ids[b.kernel[end]]) +
            VarintSize(b.collective[end]);
        if (raw + e > max_raw && end > begin) break;
        raw += e;
        prev = b.start_ps[end];
      }
      const std::string blob = EncodeTimeline(b, ids, begin, end);
      EXPECT_LE(blob.size(), limit) << "events " << begin << ".." << end;
      EventBlock got;
      ASSERT_OK(DecodeTimeline(blob, &got));
      ExpectSameEvents(b, begin, end, got);
      begin = end;
    }
  }
}

// What bench_pod_scale stores of a host's timelines: podprof-loadgen's host-second (a v5p pod
// of 2,240 hosts of 4 chips, pod seed 1). Every block round-trips, and takes at most 0.75 of the
// first encoding's bytes (0.70 measured).
TEST(TimelineColumnsTest, TheLoadgensHostSecondTakesLessThanThreeQuarters) {
  sim::PodConfig pod;
  pod.generation = "v5p";
  pod.chips = 4;
  pod.hosts = 2240;
  pod.pod_seed = 1;
  absl::StatusOr<std::unique_ptr<loadgen::CaptureSource>> source =
      loadgen::CaptureSource::Create(pod, /*counters=*/true);
  ASSERT_OK(source);
  FakeClock truth(1'800'000'000'000'000'000);
  std::vector<std::unique_ptr<loadgen::EmulatedHost>> hosts =
      loadgen::MakeHosts(0, 1, pod.pod_seed, 50'000'000, 50, truth);
  absl::StatusOr<loadgen::GeneratedCapture> c = (*source)->Generate(
      *hosts[0], hosts[0]->clock.NowNs(), 1000, 4 << 20, false, /*keep_xspace=*/true);
  ASSERT_OK(c);
  MemorySource src(c->xspace);
  absl::StatusOr<HostCapture> capture = ReadXSpace(src);
  ASSERT_OK(capture);
  const std::vector<int64_t> ids = HostKernelNumbers(capture->kernels.size());
  size_t events = 0, v1 = 0, v2 = 0;
  for (const EventBlock& b : capture->blocks) {
    const std::string blob = EncodeTimeline(b, ids);
    EventBlock got;
    ASSERT_OK(DecodeTimeline(blob, &got));
    ExpectSameEvents(b, 0, b.size(), got);
    events += b.size();
    v1 += EncodeTimelineV1(b, ids, 0, b.size()).size();
    v2 += blob.size();
  }
  ASSERT_GT(events, 30'000u);
  std::printf("loadgen host-second: %zu events, v1 %.2f bytes an event, v2 %.2f (%.2f)\n", events,
              static_cast<double>(v1) / events, static_cast<double>(v2) / events,
              static_cast<double>(v2) / v1);
  EXPECT_LE(v2, v1 * 3 / 4);
}

}  // namespace
}  // namespace podprof::trace
