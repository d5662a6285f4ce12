// libFuzzer entry point over what an agent sends and the store keeps, decoded where the
// aggregator reads it: sketches (DDSketch::Deserialize, then merged with a wide sketch and
// read), sketch bins (FromBins), encoded timeline blocks (CheckTimeline, then decoded), and
// the stored rows' other blobs: counter series (both encodings) and a host's kernel map applied
// to a block.
// Any bytes must give a value or a clean Status, allocating in proportion to what they hold:
// a sketch bucket at 2^31-1 or a forged block count once allocated gigabytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/zstd_codec.h"
#include "trace/columns.h"
#include "trace/ddsketch.h"
#include "trace/varint.h"

namespace {

using podprof::trace::DDSketch;

void Sketch(absl::string_view bytes) {
  absl::StatusOr<DDSketch> s = DDSketch::Deserialize(bytes);
  if (!s.ok()) return;
  DDSketch wide;
  wide.Add(1e-20);
  wide.Add(1e20);
  wide.Merge(*s);
  s->Merge(wide);
  (void)s->Quantile(0.5);
  (void)s->Serialize();
}

void Bins(absl::string_view bytes) {
  // Pairs of (int32 index, uint32 count) after an 8-byte zero count.
  if (bytes.size() < 8) return;
  uint64_t zero;
  std::memcpy(&zero, bytes.data(), 8);
  bytes.remove_prefix(8);
  std::vector<int32_t> idx;
  std::vector<uint64_t> cnt;
  while (bytes.size() >= 8) {
    int32_t i;
    uint32_t c;
    std::memcpy(&i, bytes.data(), 4);
    std::memcpy(&c, bytes.data() + 4, 4);
    idx.push_back(i);
    cnt.push_back(c);
    bytes.remove_prefix(8);
  }
  absl::StatusOr<DDSketch> s = DDSketch::FromBins(zero, idx, cnt);
  if (s.ok()) (void)s->Quantile(0.99);
}

void Block(absl::string_view bytes) {
  // The bytes as a block's raw columns, compressed as an agent would send them.
  const std::string blob = podprof::ZstdCompress(bytes, 1, 10);
  absl::StatusOr<uint64_t> n = podprof::trace::CheckTimeline(blob, 64 << 20);
  if (!n.ok()) return;
  podprof::trace::EventBlock b;
  (void)podprof::trace::DecodeTimeline(blob, &b);
}

void Counters(absl::string_view bytes) {
  const std::string blob = podprof::ZstdCompress(bytes, 1, 10);
  podprof::trace::CounterSeries s;
  (void)podprof::trace::DecodeCounters(blob, &s, 64 << 20);
}

// The second counter encoding (trace/counter_v2.h): the first byte picks the sample count, the
// rest is the body, compressed after the header as an agent would send it. Whatever the body
// holds, decoding gives the count's samples or DataLoss, and never more than counted. A body of
// mode 3 (columns) whose flags byte has its top bit set is made well formed (flags and plane
// counts in range, the planes cut or zero-padded to the count): any such body must decode, to
// any bits, and its samples re-encode exactly.
void CountersV2(absl::string_view bytes) {
  if (bytes.empty()) return;
  const uint64_t count = static_cast<uint8_t>(bytes[0]) * uint64_t{97};
  std::string body(bytes.substr(1));
  const bool well_formed = count > 0 && body.size() >= 4 && body[0] == 3 && (body[1] & 0x80);
  if (well_formed) {
    body[1] = static_cast<char>(body[1] & 3);
    body[2] = static_cast<char>(static_cast<uint8_t>(body[2]) % 9);
    body[3] = static_cast<char>(static_cast<uint8_t>(body[3]) % 9);
    body.resize(4 + count * (static_cast<uint8_t>(body[2]) + static_cast<uint8_t>(body[3])), '\0');
  }
  std::string header;
  podprof::trace::PutVarint(count, &header);
  std::string blob("\x52\x2A\x4D\x18", 4);
  const uint32_t size = static_cast<uint32_t>(header.size());
  blob.append(reinterpret_cast<const char*>(&size), 4);
  blob += header + podprof::ZstdCompress(body, 3);
  podprof::trace::CounterSeries s;
  const absl::Status d = podprof::trace::DecodeCounters(blob, &s, 64 << 20);
  if (d.ok() ? s.value.size() != count || s.time_ns.size() != count
             : d.code() != absl::StatusCode::kDataLoss || well_formed) {
    __builtin_trap();
  }
  // Re-encoded, the samples read back as they were.
  if (d.ok()) {
    podprof::trace::CounterSeries again;
    if (!podprof::trace::DecodeCounters(podprof::trace::EncodeCounters(s), &again).ok() ||
        again.value.size() != count ||
        (count > 0 && std::memcmp(again.value.data(), s.value.data(), count * 8) != 0) ||
        again.time_ns != s.time_ns) {
      __builtin_trap();
    }
  }
}

void KernelMap(absl::string_view bytes) {
  // The first half a stored kernel map, the rest a block whose kernels it renumbers.
  const size_t half = bytes.size() / 2;
  absl::StatusOr<std::vector<int64_t>> map = podprof::trace::DecodeKernelMap(bytes.substr(0, half));
  if (!map.ok()) return;
  podprof::trace::EventBlock b;
  if (!podprof::trace::DecodeTimeline(podprof::ZstdCompress(bytes.substr(half), 1, 10), &b).ok()) {
    return;
  }
  (void)podprof::trace::MapKernels(*map, &b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      Sketch(rest);
      break;
    case 1:
      Bins(rest);
      break;
    case 2:
      Block(rest);
      break;
    case 3:
      Counters(rest);
      break;
    case 5:
      CountersV2(rest);
      break;
    default:
      KernelMap(rest);
      break;
  }
  return 0;
}
