// The capture stream: the encoder's chunks stay within the negotiated size whatever they carry
// (tested at the boundaries), and the decoder, against damaged and hostile chunks, either
// rejects a chunk saying which and why or keeps a capture whose every index points inside it,
// so nothing downstream (statistics, storage, exports) can read out of bounds.
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/zstd_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stream/capture_decoder.h"
#include "stream/capture_encoder.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/columns.h"
#include "trace/varint.h"
#include "trace/xspace_reader.h"

namespace podprof::stream {
namespace {

namespace v1 = podprof::v1;

class Collect final : public ChunkSink {
 public:
  bool Write(const v1::CaptureChunk& c) override {
    chunks.push_back(c.SerializeAsString());
    return true;
  }
  std::vector<std::string> chunks;
};

std::vector<std::string> RealStream(size_t* events, bool columns = false) {
  auto capture =
      trace::ReadXSpaceFile(testing::FixturePath("tpu_v6e_4chip_host_offload.xplane.pb"));
  EXPECT_OK(capture);
  if (!capture.ok()) return {};
  *events = capture->EventCount();
  v1::HostInfo host;
  host.set_host_name("h");
  for (size_t i = 0; i < capture->host.chips.size(); ++i) host.add_chips()->set_ordinal(i);
  Collect sink;
  ChunkCounts counts;
  EXPECT_OK(StreamCapture(*capture, host, {}, 16 << 10, &sink, &counts, columns));
  v1::CaptureChunk trailer;
  trailer.mutable_trailer()->set_event_count(counts.events);
  sink.Write(trailer);
  return sink.chunks;
}

// Every index of the assembled capture points inside it.
void ExpectConsistent(CaptureDecoder& a) {
  const trace::HostCapture& c = a.capture();
  for (const trace::EventBlock& b : c.blocks) {
    ASSERT_GE(b.chip, 0);
    ASSERT_LT(static_cast<size_t>(b.chip), c.host.chips.size());
    ASSERT_EQ(b.duration_ps.size(), b.size());
    ASSERT_EQ(b.kernel.size(), b.size());
    ASSERT_EQ(b.collective.size(), b.size());
    for (uint32_t k : b.kernel) ASSERT_LT(k, c.kernels.size());
  }
  for (const trace::CounterSeries& s : c.counters) {
    ASSERT_GE(s.chip, 0);
    ASSERT_LT(static_cast<size_t>(s.chip), c.host.chips.size());
    ASSERT_EQ(s.time_ns.size(), s.value.size());
  }
}

TEST(CaptureDecoderTest, ARealStreamAssemblesWhole) {
  size_t events = 0;
  std::vector<std::string> stream = RealStream(&events);
  ASSERT_GT(stream.size(), 10u);
  CaptureDecoder a;
  for (const std::string& bytes : stream) {
    v1::CaptureChunk c;
    ASSERT_TRUE(c.ParseFromString(bytes));
    ASSERT_OK(a.Add(c));
  }
  EXPECT_TRUE(a.done());
  EXPECT_EQ(a.events(), events);
  ExpectConsistent(a);
}

TEST(CaptureDecoderTest, AChunkHandedOverGivesUpItsBlobsAndAssemblesTheSame) {
  size_t events = 0;
  const std::vector<std::string> stream = RealStream(&events, /*columns=*/true);
  CaptureDecoder copied, taken;
  size_t blobs = 0;
  for (const std::string& bytes : stream) {
    v1::CaptureChunk c;
    ASSERT_TRUE(c.ParseFromString(bytes));
    ASSERT_OK(copied.Add(c));
    const bool has_blob =
        !c.event_block().columns().empty() || !c.counter_series().samples().empty();
    ASSERT_OK(taken.Add(std::move(c)));
    if (has_blob) {
      ++blobs;
      // Moved into the capture, not copied: the chunk no longer holds it.
      EXPECT_TRUE(c.event_block().columns().empty());  // NOLINT(bugprone-use-after-move)
      EXPECT_TRUE(c.counter_series().samples().empty());
    }
  }
  ASSERT_GT(blobs, 0u);
  ASSERT_TRUE(taken.done());
  EXPECT_EQ(taken.events(), events);
  const trace::HostCapture& a = copied.capture();
  const trace::HostCapture& b = taken.capture();
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    ASSERT_FALSE(b.blocks[i].encoded.empty());
    EXPECT_EQ(a.blocks[i].encoded, b.blocks[i].encoded);
    EXPECT_EQ(a.blocks[i].encoded_events, b.blocks[i].encoded_events);
  }
  ASSERT_EQ(a.counters.size(), b.counters.size());
  for (size_t i = 0; i < a.counters.size(); ++i) {
    EXPECT_EQ(a.counters[i].encoded, b.counters[i].encoded);
  }
}

TEST(CaptureDecoderTest, HostileChunksAreRejected) {
  auto block = [](int chip, std::vector<uint32_t> kernels, int extra_starts) {
    v1::CaptureChunk c;
    auto* e = c.mutable_event_block();
    e->set_chip_ordinal(chip);
    e->set_line_name("XLA Ops");
    for (uint32_t k : kernels) {
      e->add_kernel_id(k);
      e->add_duration_ps(5);
      e->add_collective_id(0);
      e->add_start_ps(1);
    }
    for (int i = 0; i < extra_starts; ++i) e->add_start_ps(1);
    return c;
  };
  v1::CaptureChunk defs;
  defs.mutable_kernel_defs()->add_kernels()->set_kernel_id(1);
  {
    CaptureDecoder a;
    absl::Status s = a.Add(block(0, {1}, 0));
    EXPECT_FALSE(s.ok()) << "a kernel id before any definition";
    EXPECT_TRUE(absl::StrContains(s.message(), "chunk 0 (event_block of chip 0 line \"XLA Ops\")"))
        << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "kernel id 1 but ids 1..0 are defined")) << s;
  }
  {
    CaptureDecoder a;
    v1::CaptureChunk out_of_order;
    out_of_order.mutable_kernel_defs()->add_kernels()->set_kernel_id(7);
    absl::Status s = a.Add(out_of_order);
    EXPECT_TRUE(absl::StrContains(s.message(), "kernel id 7 where 1 was due")) << s;
  }
  {
    CaptureDecoder a;
    ASSERT_OK(a.Add(defs));
    EXPECT_FALSE(a.Add(block(0, {0}, 0)).ok()) << "kernel id 0";
    EXPECT_FALSE(a.Add(block(0, {2}, 0)).ok()) << "an undefined kernel id";
    absl::Status s = a.Add(block(0, {1}, 3));
    EXPECT_TRUE(absl::StrContains(s.message(), "chunk 3")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "4 starts, 1 durations, 1 kernel ids")) << s;
    EXPECT_OK(a.Add(block(-5, {1}, 0))) << "an unknown chip ordinal is a new chip";
    v1::CaptureChunk counters;
    counters.mutable_counter_series()->set_chip_ordinal(0);
    counters.mutable_counter_series()->add_timestamp_ns(1);
    s = a.Add(counters);
    EXPECT_TRUE(absl::StrContains(s.message(), "1 timestamps but 0 values")) << s;
    v1::CaptureChunk trailer;
    trailer.mutable_trailer();
    ASSERT_OK(a.Add(trailer));
    s = a.Add(defs);
    EXPECT_TRUE(absl::StrContains(s.message(), "after the trailer")) << s;
    ExpectConsistent(a);
  }
}

// Encoded blocks whose header claims what their content cannot hold: one event stored as
// 10^15, zero padding that decompresses to megabytes, and a forged run of 16.7 million empty
// events in a few kilobytes (each export of it was 9.6 GB). Each is refused as it arrives,
// naming the chunk, before anything expands it.
TEST(CaptureDecoderTest, EncodedBlocksMustHoldWhatTheyClaim) {
  auto encoded = [&](uint64_t count, size_t events, size_t padding) {
    std::string raw;
    trace::PutVarint(count, &raw);
    for (size_t i = 0; i < events; ++i) raw += std::string("\x02\x0a\x01\x00", 4);
    raw.append(padding, '\0');
    v1::CaptureChunk c;
    c.mutable_event_block()->set_chip_ordinal(0);
    c.mutable_event_block()->set_line_name("XLA Ops");
    c.mutable_event_block()->set_columns(ZstdCompress(raw, 1, 10));
    return c;
  };
  v1::CaptureChunk defs;
  defs.mutable_kernel_defs()->add_kernels()->set_kernel_id(1);
  const struct {
    const char* what;
    v1::CaptureChunk chunk;
    const char* says;
  } cases[] = {
      {"a count its content cannot hold", encoded(1'000'000'000'000'000, 1, 0), "claims"},
      {"zero padding", encoded(1, 1, 8 << 20), "claims 1 events in"},
      {"a forged run of empty events", encoded(16'700'000, 16'700'000, 0),
       "compressed bytes, more than 1024 a byte"},
  };
  for (const auto& c : cases) {
    CaptureDecoder a;
    ASSERT_OK(a.Add(defs));
    absl::Status s = a.Add(c.chunk);
    EXPECT_THAT(s,
                testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr(c.says)))
        << c.what;
    EXPECT_EQ(a.events(), 0u) << c.what;
  }
  // The same encoding with what it claims is taken, and decodes to its events.
  CaptureDecoder a;
  ASSERT_OK(a.Add(defs));
  ASSERT_OK(a.Add(encoded(3, 3, 0)));
  EXPECT_EQ(a.events(), 3u);
}

// What trace::kMaxEventsPerByte leaves room for, measured on the store's own encoding: a
// simulated run of one kernel repeated identically (the most a real encoder makes of one
// block) stays under the bound and is taken; ps timestamps with jitter compress a few times.
TEST(CaptureDecoderTest, TheEventsPerByteBoundLeavesHonestBlocksAlone) {
  constexpr size_t kEvents = 1 << 16;
  auto ratio = [](bool jitter) {
    trace::EventBlock b;
    std::mt19937_64 rng(3);
    std::uniform_int_distribution<int64_t> noise(-5000, 5000);
    for (size_t i = 0; i < kEvents; ++i) {
      b.start_ps.push_back(static_cast<int64_t>(i) * 20'000'000 + (jitter ? noise(rng) : 0));
      b.duration_ps.push_back(18'000'000 + (jitter ? noise(rng) : 0));
      b.kernel.push_back(0);
      b.collective.push_back(0);
    }
    const std::string blob = trace::EncodeTimeline(b, {1});
    EXPECT_OK(trace::CheckTimeline(blob, 64 << 20));
    return static_cast<double>(kEvents) / static_cast<double>(blob.size());
  };
  const double same = ratio(false), jittered = ratio(true);
  std::printf("events per compressed byte: identical %.0f, jittered %.2f (bound %llu)\n", same,
              jittered, static_cast<unsigned long long>(trace::kMaxEventsPerByte));
  EXPECT_LT(same, static_cast<double>(trace::kMaxEventsPerByte));
  EXPECT_LT(jittered, 10.0);
}

TEST(CaptureDecoderTest, RandomDamageNeverBreaksTheCapture) {
  size_t events = 0;
  const std::vector<std::string> stream = RealStream(&events);
  std::mt19937_64 rng(7);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::vector<std::string> damaged = stream;
    std::string& victim = damaged[rng() % damaged.size()];
    switch (rng() % 3) {
      case 0:  // flip bytes
        for (int i = 0; i < 4 && !victim.empty(); ++i)
          victim[rng() % victim.size()] ^= 1 << (rng() % 8);
        break;
      case 1:  // cut
        victim.resize(rng() % (victim.size() + 1));
        break;
      default:  // overwrite a run with random bytes
        for (size_t i = rng() % (victim.size() + 1), n = 0; i < victim.size() && n < 16; ++i, ++n) {
          victim[i] = static_cast<char>(rng());
        }
    }
    CaptureDecoder a;
    for (const std::string& bytes : damaged) {
      v1::CaptureChunk c;
      if (!c.ParseFromString(bytes)) break;  // gRPC would have refused the message
      ++parsed;
      if (!a.Add(c).ok()) {
        ++rejected;
        break;  // the aggregator cancels the stream here
      }
    }
    ExpectConsistent(a);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(parsed, 1000);
  EXPECT_GT(rejected, 0);
}

class CollectSink final : public ChunkSink {
 public:
  bool Write(const v1::CaptureChunk& c) override {
    chunks.push_back(c);
    return chunks.size() < limit;
  }
  std::vector<v1::CaptureChunk> chunks;
  size_t limit = SIZE_MAX;
};

trace::HostCapture BigCapture(int events) {
  trace::HostCapture c;
  c.host.chips.resize(1);
  c.host.chips[0].ordinal = 3;
  c.kernels.resize(2);
  c.kernels[0].name = "fusion.1";
  c.kernels[1].name = "all-reduce";
  trace::EventBlock b;
  b.line = "XLA Ops";
  b.base_ns = 1'700'000'000'000'000'000;
  for (int i = 0; i < events; ++i) {
    b.start_ps.push_back(int64_t{i} * 5'000'000);
    b.duration_ps.push_back(1'000'000 + i);
    b.kernel.push_back(i % 2);
    b.collective.push_back(i % 2 ? 1000 + i : 0);
  }
  c.blocks.push_back(b);
  return c;
}

// Decodes `chunks` (and a trailer) as the aggregator would.
CaptureDecoder Decode(const std::vector<v1::CaptureChunk>& chunks) {
  CaptureDecoder d;
  for (const v1::CaptureChunk& c : chunks) EXPECT_OK(d.Add(c));
  v1::CaptureChunk trailer;
  trailer.mutable_trailer();
  EXPECT_OK(d.Add(trailer));
  absl::Status decoded = trace::DecodeEncodedSeries(&d.capture());
  EXPECT_OK(decoded);
  return d;
}

TEST(CaptureEncoderTest, SplitsBlocksUnderTheLimitAndRoundTrips) {
  trace::HostCapture c = BigCapture(100'000);
  v1::HostInfo host;
  host.set_host_name("h");
  CollectSink sink;
  ChunkCounts counts;
  const size_t limit = 256 << 10;
  ASSERT_OK(StreamCapture(c, host, {}, limit, &sink, &counts));
  EXPECT_EQ(counts.events, 100'000u);
  EXPECT_EQ(counts.kernels, 2u);
  ASSERT_TRUE(sink.chunks[0].has_host_info());
  ASSERT_TRUE(sink.chunks[1].has_kernel_defs());
  EXPECT_EQ(sink.chunks[1].kernel_defs().kernels(1).kernel_id(), 2u);
  int blocks = 0;
  for (const auto& ch : sink.chunks) {
    EXPECT_LE(ch.ByteSizeLong(), limit);
    blocks += ch.has_event_block();
  }
  EXPECT_GE(blocks, 4) << "100,000 events of 4-byte columns need at least four 256 KiB chunks";
  // Chunks are filled: all but the last block chunk within 64 bytes of the limit.
  EXPECT_GT(counts.largest_chunk, limit - 64);
  CaptureDecoder d = Decode(sink.chunks);
  std::vector<int64_t> starts, durations;
  for (const trace::EventBlock& b : d.capture().blocks) {
    starts.insert(starts.end(), b.start_ps.begin(), b.start_ps.end());
    durations.insert(durations.end(), b.duration_ps.begin(), b.duration_ps.end());
  }
  EXPECT_EQ(starts, c.blocks[0].start_ps);
  EXPECT_EQ(durations, c.blocks[0].duration_ps);
}

// Kernel-profiling data crosses the stream whole: the lines inside kernels and a SparseCore's
// lines arrive as scopes (the decoder knows a block's kind by its line's name), perf series
// with their names and values.
TEST(CaptureEncoderTest, KernelProfilingScopesAndPerfSeriesRoundTrip) {
  trace::HostCapture c = BigCapture(4);
  for (const char* line : {"Pallas Primitives", "LLO Instructions", "Tensor Core Sync Flag",
                           "SparseCore 1/Sparse Core Ops"}) {
    trace::EventBlock b = c.blocks[0];
    b.line = line;
    b.kind = trace::LineKind::kScopes;
    c.blocks.push_back(b);
  }
  trace::CounterSeries perf;
  perf.name = "perf/die0_tc_cycles";
  perf.time_ns = {1'700'000'000'000'001'000, 1'700'000'000'000'011'000};
  perf.value = {65000, 69536};
  c.counters.push_back(perf);
  v1::HostInfo host;
  host.set_host_name("h");
  CollectSink sink;
  ChunkCounts counts;
  ASSERT_OK(StreamCapture(c, host, {}, 64 << 10, &sink, &counts));
  CaptureDecoder d = Decode(sink.chunks);
  std::map<std::string, trace::LineKind> kinds;
  for (const trace::EventBlock& b : d.capture().blocks) kinds[b.line] = b.kind;
  EXPECT_EQ(kinds, (std::map<std::string, trace::LineKind>{
                       {"XLA Ops", trace::LineKind::kOps},
                       {"Pallas Primitives", trace::LineKind::kScopes},
                       {"LLO Instructions", trace::LineKind::kScopes},
                       {"Tensor Core Sync Flag", trace::LineKind::kScopes},
                       {"SparseCore 1/Sparse Core Ops", trace::LineKind::kScopes}}));
  ASSERT_EQ(d.capture().counters.size(), 1u);
  EXPECT_EQ(d.capture().counters[0].name, perf.name);
  EXPECT_EQ(d.capture().counters[0].time_ns, perf.time_ns);
  EXPECT_EQ(d.capture().counters[0].value, perf.value);
}

TEST(CaptureEncoderTest, StopsWhenTheSinkBreaks) {
  trace::HostCapture c = BigCapture(100'000);
  CollectSink sink;
  sink.limit = 3;
  ChunkCounts counts;
  absl::Status s = StreamCapture(c, {}, {}, 64 << 10, &sink, &counts);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(sink.chunks.size(), 3u);
}

TEST(CaptureEncoderTest, ExtremeValuesStayWithinTheLimit) {
  // Negative durations and huge ids take 10-byte varints: an estimate per event would overflow.
  trace::HostCapture c = BigCapture(50'000);
  for (size_t i = 0; i < c.blocks[0].size(); ++i) {
    c.blocks[0].duration_ps[i] = -1 - static_cast<int64_t>(i);
    c.blocks[0].collective[i] = UINT64_MAX - i;
    c.blocks[0].start_ps[i] = (i % 2 ? INT64_MAX / 4 : -INT64_MAX / 4);
  }
  c.blocks[0].line = std::string(5000, 'L');  // cut to a bounded name
  CollectSink sink;
  ChunkCounts counts;
  const size_t limit = kMinChunkBytes;
  ASSERT_OK(StreamCapture(c, {}, {}, limit, &sink, &counts));
  for (const auto& ch : sink.chunks) ASSERT_LE(ch.ByteSizeLong(), limit);
  CaptureDecoder d = Decode(sink.chunks);
  EXPECT_EQ(d.events(), 50'000u);
  EXPECT_EQ(d.capture().blocks.back().collective.back(), UINT64_MAX - 49'999);
}

// One counter series of `n` samples at real timestamps (9-byte varints), as a 60 s capture's.
trace::HostCapture SeriesCapture(size_t n) {
  trace::HostCapture c;
  c.host.chips.resize(1);
  trace::CounterSeries s;
  s.name = "core/busy";
  for (size_t i = 0; i < n; ++i) {
    s.time_ns.push_back(1'700'000'000'000'000'000 + static_cast<int64_t>(i) * 1000);
    s.value.push_back(static_cast<double>(i % 7) / 7);
  }
  c.counters.push_back(s);
  return c;
}

TEST(CaptureEncoderTest, ALongSeriesAtTheDefaultLimitFits) {
  // 4 MiB / 16 bytes per sample was the old guess; a sample is 17 bytes, so a 60 s capture's
  // series outgrew gRPC's 4 MiB limit (4456473 bytes). Every chunk must fit now.
  const size_t limit = 4 << 20;
  trace::HostCapture c = SeriesCapture(600'000);
  CollectSink sink;
  ChunkCounts counts;
  ASSERT_OK(StreamCapture(c, {}, {}, limit, &sink, &counts));
  EXPECT_LE(counts.largest_chunk, limit);
  EXPECT_EQ(counts.counter_samples, 600'000u);
  CaptureDecoder d = Decode(sink.chunks);
  size_t samples = 0;
  for (const trace::CounterSeries& s : d.capture().counters) samples += s.value.size();
  EXPECT_EQ(samples, 600'000u);
  EXPECT_EQ(d.capture().counters.back().time_ns.back(), c.counters[0].time_ns.back());
}

// Samples with random times and values: what zstd cannot compress at all.
trace::HostCapture NoiseSeriesCapture(size_t n, uint64_t seed) {
  trace::HostCapture c = SeriesCapture(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = rng();
    std::memcpy(&c.counters[0].value[i], &bits, 8);
    c.counters[0].time_ns[i] = static_cast<int64_t>(rng() >> 1);
  }
  return c;
}

TEST(CaptureEncoderTest, SeriesChunksJustUnderAndOverTheLimit) {
  // The most samples one chunk holds, whatever they are; then one more. Incompressible
  // samples must fit as well as regular ones, since a run is cut before it is compressed.
  const size_t limit = kMinChunkBytes;
  size_t n = 1;
  for (;; ++n) {
    CollectSink sink;
    ChunkCounts counts;
    ASSERT_OK(StreamCapture(NoiseSeriesCapture(n + 1, 7), {}, {}, limit, &sink, &counts));
    if (counts.chunks > 2) break;  // host chunk + one series chunk no longer holds n + 1
  }
  EXPECT_GT(n, limit / 20) << "a chunk holds most of what fits";
  CollectSink under, over;
  ChunkCounts counts;
  ASSERT_OK(StreamCapture(NoiseSeriesCapture(n, 7), {}, {}, limit, &under, &counts));
  ASSERT_EQ(under.chunks.size(), 2u);
  EXPECT_GT(under.chunks[1].ByteSizeLong(), limit * 9 / 10) << "noise does not compress";
  EXPECT_LE(under.chunks[1].ByteSizeLong(), limit);
  ASSERT_OK(StreamCapture(NoiseSeriesCapture(n + 1, 7), {}, {}, limit, &over, &counts));
  ASSERT_EQ(over.chunks.size(), 3u);
  for (const auto& ch : over.chunks) EXPECT_LE(ch.ByteSizeLong(), limit);
  CaptureDecoder d = Decode(over.chunks);
  ASSERT_EQ(d.capture().counters.size(), 2u);
  EXPECT_EQ(d.capture().counters[0].value.size(), n);
  EXPECT_EQ(d.capture().counters[1].value.size(), 1u);
  EXPECT_EQ(d.capture().counters[1].name, "core/busy");
  const trace::HostCapture sent = NoiseSeriesCapture(n + 1, 7);
  EXPECT_EQ(d.capture().counters[1].time_ns[0], sent.counters[0].time_ns[n]);
  EXPECT_EQ(std::memcmp(&d.capture().counters[1].value[0], &sent.counters[0].value[n], 8), 0);
}

TEST(CaptureDecoderTest, EncodedSeriesAreKeptAsTheyArrived) {
  CollectSink sink;
  ChunkCounts counts;
  ASSERT_OK(StreamCapture(SeriesCapture(1000), {}, {}, 4 << 20, &sink, &counts));
  ASSERT_EQ(sink.chunks.size(), 2u);
  const std::string& blob = sink.chunks[1].counter_series().samples();
  EXPECT_LT(blob.size(), 1000u * 4) << "regular samples compress";
  {
    CaptureDecoder kept;
    for (const v1::CaptureChunk& c : sink.chunks) ASSERT_OK(kept.Add(c));
    ASSERT_EQ(kept.capture().counters.size(), 1u);
    EXPECT_TRUE(kept.capture().counters[0].value.empty()) << "decoded when analysed, not before";
    EXPECT_EQ(kept.capture().counters[0].encoded, blob);
  }
  CaptureDecoder d = Decode(sink.chunks);
  ASSERT_EQ(d.capture().counters.size(), 1u);
  EXPECT_EQ(d.capture().counters[0].encoded, blob) << "what the store writes";
  EXPECT_EQ(d.capture().counters[0].value.size(), 1000u);
  EXPECT_EQ(d.capture().counters[0].time_ns.back(), SeriesCapture(1000).counters[0].time_ns.back());

  v1::CaptureChunk both = sink.chunks[1];
  both.mutable_counter_series()->add_timestamp_ns(1);
  both.mutable_counter_series()->add_value(1);
  CaptureDecoder a;
  absl::Status s = a.Add(sink.chunks[0]);
  ASSERT_OK(s);
  s = a.Add(both);
  EXPECT_TRUE(absl::StrContains(s.message(), "both encoded samples and timestamp/value")) << s;
  v1::CaptureChunk damaged = sink.chunks[1];
  damaged.mutable_counter_series()->mutable_samples()->resize(blob.size() / 2);
  s = a.Add(damaged);
  EXPECT_TRUE(absl::StrContains(s.message(), "counter core/busy")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "chunk 2 (counter_series)")) << s;
  ExpectConsistent(a);

  // Damage inside a whole frame shows when the samples are decoded, naming the series.
  v1::CaptureChunk flipped = sink.chunks[1];
  std::string& bytes = *flipped.mutable_counter_series()->mutable_samples();
  for (size_t i = bytes.size() / 3; i < bytes.size() - 8; i += 7) bytes[i] ^= 0x5a;
  CaptureDecoder b;
  ASSERT_OK(b.Add(sink.chunks[0]));
  s = b.Add(flipped);
  if (s.ok()) {
    s = trace::DecodeEncodedSeries(&b.capture());
    EXPECT_TRUE(absl::StrContains(s.message(), "counter core/busy of chip 0")) << s;
  }
  EXPECT_FALSE(s.ok());
}

// Two chips, each with an energy total sampled at every kernel boundary and two gauges at some
// of them; on chip 1 a second "core/busy" series as well (a reader could not tell the two
// apart by name, so neither is a reference).
trace::HostCapture SharedTimesCapture(size_t n) {
  trace::HostCapture c;
  c.host.chips.resize(2);
  c.host.chips[1].ordinal = 1;
  for (int chip = 0; chip < 2; ++chip) {
    trace::CounterSeries energy, busy, hbm;
    energy.chip = busy.chip = hbm.chip = chip;
    energy.name = "core/energy_nj";
    busy.name = "core/busy";
    hbm.name = "hbm/busy";
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = 1'700'000'000'000'000'000 + static_cast<int64_t>(i) * 1000 + (i * 37) % 91;
      energy.time_ns.push_back(t);
      energy.value.push_back(2.5e6 + 0.37 * static_cast<double>(i * i));
      if (i % 3 != 1) busy.time_ns.push_back(t), busy.value.push_back((i % 5) * 0.2);
      if (i % 4 == 0) hbm.time_ns.push_back(t), hbm.value.push_back((i % 3) * 0.5);
    }
    c.counters.push_back(busy);
    c.counters.push_back(energy);
    c.counters.push_back(hbm);
  }
  return c;
}

// A chip's series take their times from its series with the most samples, cut into chunks as
// any series; the aggregator's decoder gives every sample back exactly. Where a name is not
// unique on its chip there is no reference, and a blob naming one its chip lacks is an error
// naming the series and chip.
TEST(CaptureEncoderTest, AChipsSeriesShareTheirTimesAcrossChunks) {
  const trace::HostCapture sent = SharedTimesCapture(20'000);
  CollectSink sink;
  ChunkCounts counts;
  ASSERT_OK(StreamCapture(sent, {}, {}, kMinChunkBytes, &sink, &counts));
  std::map<std::string, int> referencing;  // series -> chunks naming core/energy_nj
  int series_chunks = 0;
  for (const v1::CaptureChunk& c : sink.chunks) {
    if (!c.has_counter_series()) continue;
    ++series_chunks;
    EXPECT_LE(c.ByteSizeLong(), kMinChunkBytes);
    absl::StatusOr<std::string> ref = trace::CounterReference(c.counter_series().samples());
    ASSERT_OK(ref);
    if (!ref->empty()) {
      EXPECT_EQ(*ref, "core/energy_nj");
      ++referencing[absl::StrCat(c.counter_series().chip_ordinal(), c.counter_series().name())];
    }
  }
  EXPECT_GT(series_chunks, 6) << "the series span chunks";
  EXPECT_GT(referencing["0core/busy"], 0);
  EXPECT_GT(referencing["0hbm/busy"], 0);
  EXPECT_EQ(referencing.count("0core/energy_nj"), 0u);
  EXPECT_GT(referencing["1hbm/busy"], 0);
  CaptureDecoder d = Decode(sink.chunks);
  std::map<std::pair<int, std::string>, trace::CounterSeries> got;
  for (const trace::CounterSeries& s : d.capture().counters) {
    trace::CounterSeries& g = got[{s.chip, s.name}];
    g.time_ns.insert(g.time_ns.end(), s.time_ns.begin(), s.time_ns.end());
    g.value.insert(g.value.end(), s.value.begin(), s.value.end());
  }
  for (const trace::CounterSeries& s : sent.counters) {
    const trace::CounterSeries& g = got[std::make_pair(s.chip, s.name)];
    EXPECT_EQ(g.time_ns, s.time_ns) << s.chip << " " << s.name;
    EXPECT_EQ(g.value, s.value) << s.chip << " " << s.name;
  }

  // Chip 1 with two series of one name: the gauges keep their own times.
  trace::HostCapture twice = SharedTimesCapture(1000);
  twice.counters.push_back(twice.counters[4]);  // chip 1's core/energy_nj again
  CollectSink plain;
  ASSERT_OK(StreamCapture(twice, {}, {}, 4 << 20, &plain, &counts));
  for (const v1::CaptureChunk& c : plain.chunks) {
    if (!c.has_counter_series() || c.counter_series().chip_ordinal() != 1) continue;
    EXPECT_EQ(*trace::CounterReference(c.counter_series().samples()), "")
        << c.counter_series().name();
  }

  // A hostile agent's stream: chip 1's gauges name a reference chip 1 does not send.
  std::vector<v1::CaptureChunk> hostile;
  for (const v1::CaptureChunk& c : sink.chunks) {
    if (c.has_counter_series() && c.counter_series().chip_ordinal() == 1 &&
        c.counter_series().name() == "core/energy_nj") {
      continue;
    }
    hostile.push_back(c);
  }
  CaptureDecoder h;
  for (const v1::CaptureChunk& c : hostile) ASSERT_OK(h.Add(c));
  const absl::Status bad = trace::DecodeEncodedSeries(&h.capture());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), "of chip 1")) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), "core/energy_nj")) << bad;
}

TEST(CaptureEncoderTest, KernelDefinitionsJustUnderAndOverTheLimit) {
  const size_t limit = kMinChunkBytes;
  auto one_kernel = [](size_t mlir_bytes) {
    trace::HostCapture c;
    c.kernels.resize(1);
    c.kernels[0].name = "flash_attention";
    c.kernels[0].mlir = std::string(mlir_bytes, 'm');
    return c;
  };
  auto def_chunk = [&](size_t mlir_bytes) {
    CollectSink sink;
    ChunkCounts counts;
    EXPECT_OK(StreamCapture(one_kernel(mlir_bytes), {}, {}, limit, &sink, &counts));
    EXPECT_EQ(sink.chunks.size(), 2u);
    return sink.chunks.back();
  };
  // The largest MLIR that travels whole.
  size_t m = limit;
  while (def_chunk(m).kernel_defs().kernels(0).mlir().size() != m) --m;
  const v1::CaptureChunk under = def_chunk(m);
  EXPECT_EQ(under.ByteSizeLong(), limit) << "a definition exactly at the limit travels whole";
  const v1::CaptureChunk over = def_chunk(m + 1);
  EXPECT_LE(over.ByteSizeLong(), limit);
  EXPECT_LT(over.kernel_defs().kernels(0).mlir().size(), m + 1) << "its text is shortened";
  EXPECT_GT(over.kernel_defs().kernels(0).mlir().size(), 0u);
  EXPECT_EQ(over.kernel_defs().kernels(0).op_name(), "flash_attention");

  // Two definitions of half a chunk each split into two chunks, ids in order.
  trace::HostCapture two = one_kernel(m / 2 + 64);
  two.kernels.push_back(two.kernels[0]);
  two.kernels[1].name = "second";
  CollectSink sink;
  ChunkCounts counts;
  ASSERT_OK(StreamCapture(two, {}, {}, limit, &sink, &counts));
  ASSERT_EQ(sink.chunks.size(), 3u);
  EXPECT_EQ(sink.chunks[2].kernel_defs().kernels(0).kernel_id(), 2u);
  for (const auto& ch : sink.chunks) EXPECT_LE(ch.ByteSizeLong(), limit);
  EXPECT_EQ(Decode(sink.chunks).capture().kernels.size(), 2u);
}

// A cross-slice send's text lists every source-target pair of the job, which the aggregator
// needs whole to pair receives with their senders (insight/dcn.h): a 4-slice x 64-host x 4-chip
// job's is over 10 KB, past the 8 KiB any other instruction's text is cut to.
TEST(CaptureEncoderTest, AHostTransferTextTravelsWholeWhereOthersAreCut) {
  std::string pairs;
  for (int chip = 0; chip < 1024; ++chip) {
    absl::StrAppend(&pairs, chip == 0 ? "" : ",", "{", chip, ",", (chip + 256) % 1024, "}");
  }
  trace::HostCapture c;
  c.kernels.resize(2);
  c.kernels[0].name = "send.101";
  c.kernels[0].category = "host send";
  c.kernels[0].hlo_text = absl::StrCat(
      "%send.101 = (bf16[524288]{0}, u32[], token[]) send(bf16[524288]{0} %p, token[] %t), "
      "channel_id=101, is_host_transfer=true, frontend_attributes={"
      "_xla_send_recv_source_target_pairs=\"{",
      pairs, "}\"}");
  c.kernels[1] = c.kernels[0];
  c.kernels[1].name = "fusion.1";
  c.kernels[1].category = "loop fusion";
  ASSERT_GT(c.kernels[0].hlo_text.size(), 10'000u);
  CollectSink sink;
  ChunkCounts counts;
  ASSERT_OK(StreamCapture(c, {}, {}, size_t{1} << 20, &sink, &counts));
  const trace::HostCapture got = Decode(sink.chunks).capture();
  ASSERT_EQ(got.kernels.size(), 2u);
  EXPECT_EQ(got.kernels[0].hlo_text, c.kernels[0].hlo_text);
  EXPECT_EQ(got.kernels[1].hlo_text.size(), 8u << 10);
}

TEST(CaptureEncoderTest, LimitsAreNegotiatedAndChecked) {
  EXPECT_EQ(NegotiateChunkBytes(4 << 20, 0), size_t{4 << 20}) << "no request: the agent's own";
  EXPECT_EQ(NegotiateChunkBytes(4 << 20, 1 << 20), size_t{1 << 20}) << "a smaller receiver";
  EXPECT_EQ(NegotiateChunkBytes(4 << 20, 64 << 20), size_t{4 << 20}) << "never above our own";
  EXPECT_EQ(NegotiateChunkBytes(4 << 20, 100), kMinChunkBytes) << "never below the least";
  CollectSink sink;
  ChunkCounts counts;
  absl::Status s = StreamCapture(BigCapture(1), {}, {}, 1000, &sink, &counts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(sink.chunks.empty());
}

TEST(CaptureEncoderTest, TheTrailerKeepsWhatFitsAndCountsTheRest) {
  v1::CaptureTrailer t;
  t.set_event_count(42);
  for (int i = 0; i < 100; ++i) t.add_warnings(std::string(500, 'w'));
  const v1::CaptureChunk c = EncodeTrailer(t, kMinChunkBytes);
  EXPECT_LE(c.ByteSizeLong(), kMinChunkBytes);
  EXPECT_EQ(c.trailer().event_count(), 42u);
  ASSERT_GT(c.trailer().warnings_size(), 10);
  EXPECT_TRUE(absl::StrContains(c.trailer().warnings(c.trailer().warnings_size() - 1),
                                "more warnings not sent"));
  EXPECT_EQ(EncodeTrailer(t, 1 << 20).trailer().warnings_size(), 100);
}

}  // namespace
}  // namespace podprof::stream
