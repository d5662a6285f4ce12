// The aggregator's decoder of agents' capture streams against damaged and hostile chunks:
// whatever bytes arrive, it either rejects the chunk or keeps a capture whose every index
// points inside it, so nothing downstream (statistics, storage, exports) can read out of bounds.
#include "aggregator/chunk_assembler.h"

#include <random>
#include <string>
#include <vector>

#include "agent/chunker.h"
#include "gtest/gtest.h"
#include "tests/trace/test_util.h"
#include "trace/xspace_reader.h"

namespace podprof::aggregator {
namespace {

namespace v1 = podprof::v1;

class Collect final : public agent::ChunkSink {
 public:
  bool Write(const v1::CaptureChunk& c) override {
    chunks.push_back(c.SerializeAsString());
    return true;
  }
  std::vector<std::string> chunks;
};

std::vector<std::string> RealStream(size_t* events) {
  auto capture =
      trace::ReadXSpaceFile(testing::FixturePath("tpu_v6e_4chip_host_offload.xplane.pb"));
  EXPECT_TRUE(capture.ok()) << capture.status();
  *events = capture->EventCount();
  v1::HostInfo host;
  host.set_host_name("h");
  for (size_t i = 0; i < capture->host.chips.size(); ++i) host.add_chips()->set_ordinal(i);
  Collect sink;
  agent::ChunkCounts counts;
  EXPECT_TRUE(agent::StreamCapture(*capture, host, {}, 16 << 10, &sink, &counts));
  v1::CaptureChunk trailer;
  trailer.mutable_trailer()->set_event_count(counts.events);
  sink.Write(trailer);
  return sink.chunks;
}

// Every index of the assembled capture points inside it.
void ExpectConsistent(ChunkAssembler& a) {
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

TEST(ChunkAssemblerTest, ARealStreamAssemblesWhole) {
  size_t events = 0;
  std::vector<std::string> stream = RealStream(&events);
  ASSERT_GT(stream.size(), 10u);
  ChunkAssembler a;
  for (const std::string& bytes : stream) {
    v1::CaptureChunk c;
    ASSERT_TRUE(c.ParseFromString(bytes));
    ASSERT_TRUE(a.Add(c));
  }
  EXPECT_TRUE(a.done());
  EXPECT_EQ(a.events(), events);
  ExpectConsistent(a);
}

TEST(ChunkAssemblerTest, HostileChunksAreRejected) {
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
    ChunkAssembler a;
    EXPECT_FALSE(a.Add(block(0, {1}, 0))) << "a kernel id before any definition";
  }
  {
    ChunkAssembler a;
    v1::CaptureChunk out_of_order;
    out_of_order.mutable_kernel_defs()->add_kernels()->set_kernel_id(7);
    EXPECT_FALSE(a.Add(out_of_order));
  }
  {
    ChunkAssembler a;
    ASSERT_TRUE(a.Add(defs));
    EXPECT_FALSE(a.Add(block(0, {0}, 0))) << "kernel id 0";
    EXPECT_FALSE(a.Add(block(0, {2}, 0))) << "an undefined kernel id";
    EXPECT_FALSE(a.Add(block(0, {1}, 3))) << "columns of different lengths";
    EXPECT_TRUE(a.Add(block(-5, {1}, 0))) << "an unknown chip ordinal is a new chip";
    v1::CaptureChunk counters;
    counters.mutable_counter_series()->set_chip_ordinal(0);
    counters.mutable_counter_series()->add_timestamp_ns(1);
    EXPECT_FALSE(a.Add(counters)) << "timestamps without values";
    ExpectConsistent(a);
  }
}

TEST(ChunkAssemblerTest, RandomDamageNeverBreaksTheCapture) {
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
    ChunkAssembler a;
    for (const std::string& bytes : damaged) {
      v1::CaptureChunk c;
      if (!c.ParseFromString(bytes)) break;  // gRPC would have refused the message
      ++parsed;
      if (!a.Add(c)) {
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

}  // namespace
}  // namespace podprof::aggregator
