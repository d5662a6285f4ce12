// Fuzz target for the aggregator's decoder of agents' capture streams. The input is a stream:
// records of a 4-byte little-endian length and that many bytes of a podprof.v1.CaptureChunk.
// Whatever arrives, each chunk is parsed or dropped, accepted or rejected, and the capture
// assembled so far never holds an index outside itself (checked with aborts, so a fuzzer sees
// them as crashes).
//
// Built two ways: with clang's -fsanitize=fuzzer (PODPROF_LIBFUZZER) it is a libFuzzer target;
// otherwise a standalone driver seeds it with the real TPU capture's stream and runs
// `-runs=N` randomly damaged copies of it (byte flips, cuts, splices, repeated records) with
// `-seed=S`, so every build runs it in ctest's `fuzz` label.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "insight/attribution.h"
#include "stream/capture_decoder.h"
#include "trace/columns.h"
#include "trace/kernel_stats.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "capture_decoder_fuzzer: %s\n", what);
    std::abort();
  }
}

void CheckConsistent(podprof::stream::CaptureDecoder& a) {
  const podprof::trace::HostCapture& c = a.capture();
  for (const podprof::trace::EventBlock& b : c.blocks) {
    Check(b.chip >= 0 && static_cast<size_t>(b.chip) < c.host.chips.size(), "block chip");
    Check(b.duration_ps.size() == b.size() && b.kernel.size() == b.size() &&
              b.collective.size() == b.size(),
          "block columns");
    for (uint32_t k : b.kernel) Check(k < c.kernels.size(), "kernel index");
  }
  for (const podprof::trace::CounterSeries& s : c.counters) {
    Check(s.chip >= 0 && static_cast<size_t>(s.chip) < c.host.chips.size(), "counter chip");
    Check(s.time_ns.size() == s.value.size(), "counter columns");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  podprof::stream::CaptureDecoder assembler;
  size_t off = 0;
  while (off + 4 <= size) {
    uint32_t len = 0;
    std::memcpy(&len, data + off, 4);
    off += 4;
    if (len > size - off) len = static_cast<uint32_t>(size - off);
    podprof::v1::CaptureChunk chunk;
    const bool parsed = chunk.ParseFromArray(data + off, static_cast<int>(len));
    off += len;
    if (!parsed) continue;
    if (!assembler.Add(chunk).ok()) break;  // as the aggregator does: the stream is cancelled
  }
  CheckConsistent(assembler);
  if (assembler.done() && podprof::trace::DecodeEncodedSeries(&assembler.capture()).ok()) {
    // What the aggregator does next with an assembled capture.
    CheckConsistent(assembler);
    podprof::trace::RollUpByKernel(podprof::trace::ComputeKernelStats(assembler.capture()));
    podprof::insight::AttributeCounters(assembler.capture());
  }
  return 0;
}

#ifndef PODPROF_LIBFUZZER
#include "google/protobuf/stubs/logging.h"
#include "stream/capture_encoder.h"
#include "trace/xspace_reader.h"

namespace {

class Collect final : public podprof::stream::ChunkSink {
 public:
  bool Write(const podprof::v1::CaptureChunk& c) override {
    const std::string bytes = c.SerializeAsString();
    const uint32_t len = static_cast<uint32_t>(bytes.size());
    stream.append(reinterpret_cast<const char*>(&len), 4);
    stream += bytes;
    return true;
  }
  std::string stream;
};

std::string Damage(std::string s, std::mt19937_64& rng) {
  auto pick = [&](size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  const int edits = 1 + static_cast<int>(pick(8));
  for (int e = 0; e < edits && !s.empty(); ++e) {
    switch (pick(5)) {
      case 0:  // flip a byte
        s[pick(s.size())] ^= static_cast<char>(1 + pick(255));
        break;
      case 1:  // cut the stream short
        s.resize(pick(s.size()));
        break;
      case 2: {  // splice a piece of the stream elsewhere
        size_t from = pick(s.size()), n = pick(std::min<size_t>(s.size() - from, 4096));
        s.insert(pick(s.size()), s.substr(from, n));
        break;
      }
      case 3:  // an absurd length prefix
        if (s.size() >= 4) {
          uint32_t v = static_cast<uint32_t>(rng());
          std::memcpy(&s[pick(s.size() - 3)], &v, 4);
        }
        break;
      default: {  // drop a run of bytes
        size_t from = pick(s.size());
        s.erase(from, pick(std::min<size_t>(s.size() - from, 512)));
      }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // Damaged strings make protobuf log a line each; the verdict is the exit status.
  google::protobuf::SetLogHandler(nullptr);
  long runs = 2000;
  uint64_t seed = 1;
  std::string fixture;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "-runs=", 6) == 0)
      runs = std::atol(argv[i] + 6);
    else if (std::strncmp(argv[i], "-seed=", 6) == 0)
      seed = std::strtoull(argv[i] + 6, nullptr, 10);
    else
      fixture = argv[i];
  }
  if (fixture.empty()) {
    std::fprintf(stderr, "usage: capture_decoder_fuzzer [-runs=N] [-seed=S] CAPTURE.xplane.pb\n");
    return 2;
  }
  auto capture = podprof::trace::ReadXSpaceFile(fixture);
  if (!capture.ok()) {
    std::fprintf(stderr, "%s\n", std::string(capture.status().message()).c_str());
    return 2;
  }
  podprof::v1::HostInfo host;
  host.set_host_name("fuzz");
  for (size_t i = 0; i < capture->host.chips.size(); ++i) host.add_chips()->set_ordinal(i);
  Collect sink;
  podprof::stream::ChunkCounts counts;
  podprof::stream::StreamCapture(*capture, host, {}, 16 << 10, &sink, &counts).IgnoreError();
  podprof::v1::CaptureChunk trailer;
  trailer.mutable_trailer()->set_event_count(counts.events);
  sink.Write(trailer);
  const std::string& seed_stream = sink.stream;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seed_stream.data()), seed_stream.size());
  std::mt19937_64 rng(seed);
  for (long r = 0; r < runs; ++r) {
    const std::string damaged = Damage(seed_stream, rng);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(damaged.data()), damaged.size());
  }
  std::printf("capture_decoder_fuzzer: %ld damaged streams of %zu bytes, seed %llu: no fault\n",
              runs, seed_stream.size(), static_cast<unsigned long long>(seed));
  return 0;
}
#endif
