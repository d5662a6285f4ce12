#include "stream/capture_encoder.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "trace/columns.h"
#include "trace/varint.h"

namespace podprof::stream {
namespace {

namespace v1 = podprof::v1;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedOutputStream;

// Bounds on a kernel definition's texts before any chunk-size cut: an HLO instruction, a Mosaic
// kernel's MLIR, a source stack, a framework op path. One kernel cannot crowd a chunk out.
constexpr size_t kMaxHloTextBytes = 8 << 10;
// A cross-slice (host-transfer) instruction's text lists every source-target pair of the job
// (`_xla_send_recv_source_target_pairs`), which is how the aggregator pairs a receive with its
// sender (insight/dcn.h): about 14 bytes a chip, 230 KB for 16,384 chips. Only the eight
// send/recv ops of a step carry it, and the store keeps one copy per kernel, not per host.
constexpr size_t kMaxHostTransferTextBytes = 256 << 10;
constexpr size_t kMaxMlirBytes = 64 << 10;
constexpr size_t kMaxSourceStackBytes = 4 << 10;
constexpr size_t kMaxTfOpBytes = 1 << 10;
// Names that label a block or series: a hostile capture's megabyte-long line name is cut.
constexpr size_t kMaxNameBytes = 1 << 10;
constexpr size_t kMaxWarningBytes = 1 << 10;

// The first `n` bytes of `s`, cut back to a UTF-8 character boundary: protobuf refuses a
// string field holding half a character.
std::string Cut(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

size_t V64(uint64_t v) { return CodedOutputStream::VarintSize64(v); }
size_t V32(uint32_t v) { return CodedOutputStream::VarintSize32(v); }

// Wire size of a length-delimited field of `len` bytes (one-byte tag: field numbers < 16).
size_t Delimited(size_t len) { return 1 + V32(static_cast<uint32_t>(len)) + len; }
// Of a packed repeated field holding `len` bytes of values: absent when empty.
size_t Packed(size_t len) { return len == 0 ? 0 : Delimited(len); }
// Of a scalar varint field: absent when zero (proto3).
size_t Scalar(uint64_t wire_value) { return wire_value == 0 ? 0 : 1 + V64(wire_value); }
// int32 fields sign-extend negative values to 10 bytes.
uint64_t Int32Wire(int32_t v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }

bool Send(const v1::CaptureChunk& chunk, ChunkSink* sink, ChunkCounts* counts) {
  const uint64_t n = chunk.ByteSizeLong();
  counts->chunks++;
  counts->bytes += n;
  counts->largest_chunk = std::max(counts->largest_chunk, n);
  return sink->Write(chunk);
}

absl::Status Broken() {
  return absl::CancelledError("the receiver went away while chunks were streaming");
}

// Fills `d` from kernel `k` (id `id`) with texts cut to `text_scale` of their bounds.
void FillKernelDef(const trace::KernelDef& k, uint64_t id, double text_scale, v1::KernelDef* d) {
  auto bound = [text_scale](size_t n) { return static_cast<size_t>(n * text_scale); };
  d->set_kernel_id(id);
  d->set_module(Cut(k.module, 128));
  d->set_op_name(Cut(k.name, 200));
  d->set_hlo_text_hash(k.hlo_hash);
  d->set_category(Cut(k.category, 64));
  d->set_program_id(k.program_id);
  d->set_flops(k.flops);
  d->set_bytes_accessed(k.bytes_accessed);
  d->set_source(Cut(k.source, 100));
  const bool host_transfer = absl::StartsWith(k.category, "host ");
  d->set_hlo_text(
      Cut(k.hlo_text, bound(host_transfer ? kMaxHostTransferTextBytes : kMaxHloTextBytes)));
  d->set_tf_op(Cut(k.tf_op, bound(kMaxTfOpBytes)));
  d->set_source_stack(Cut(k.source_stack, bound(kMaxSourceStackBytes)));
  d->set_mlir(Cut(k.mlir, bound(kMaxMlirBytes)));
}

// Kernel definitions in batches; a definition that does not fit a chunk alone has its texts
// halved until it does (the short fields are bounded well under kMinChunkBytes).
// Kernels from index `first` on (ids `first` + 1 on).
absl::Status StreamKernels(const std::vector<trace::KernelDef>& kernels, size_t first, size_t limit,
                           ChunkSink* sink, ChunkCounts* counts) {
  v1::CaptureChunk chunk;
  size_t batch_bytes = 0;
  auto flush = [&]() {
    if (chunk.kernel_defs().kernels_size() == 0) return true;
    counts->kernels += chunk.kernel_defs().kernels_size();
    const bool ok = Send(chunk, sink, counts);
    chunk.Clear();
    batch_bytes = 0;
    return ok;
  };
  for (size_t i = first; i < kernels.size(); ++i) {
    v1::KernelDef d;
    double scale = 1;
    FillKernelDef(kernels[i], i + 1, scale, &d);
    while (Delimited(Delimited(d.ByteSizeLong())) > limit && scale > 1e-4) {
      scale /= 2;
      d.Clear();
      FillKernelDef(kernels[i], i + 1, scale, &d);
    }
    const size_t entry = Delimited(d.ByteSizeLong());
    if (Delimited(batch_bytes + entry) > limit && !flush()) return Broken();
    batch_bytes += entry;
    *chunk.mutable_kernel_defs()->add_kernels() = std::move(d);
  }
  return flush() ? absl::OkStatus() : Broken();
}

// `chunk` emptied for a run of a block: its chip, line and base.
v1::EventBlock* StartBlockChunk(int chip_ordinal, const std::string& line, int64_t base_ns,
                                v1::CaptureChunk* chunk) {
  chunk->Clear();
  v1::EventBlock* e = chunk->mutable_event_block();
  e->set_chip_ordinal(chip_ordinal);
  e->set_line_name(line);
  e->set_base_ns(base_ns);
  return e;
}

// One event block as runs of events in the column encoding (trace/columns.h, kernels as this
// stream's ids), each run in a chunk of its own: what the aggregator stores as it arrives. A run
// holds at most what encodes within the chunk whatever the values are (zstd's bound), so a chunk
// never outgrows `limit`.
absl::Status StreamBlockColumns(const trace::EventBlock& b, int chip_ordinal, size_t limit,
                                ChunkSink* sink, ChunkCounts* counts) {
  const std::string line = Cut(b.line, kMaxNameBytes);
  const size_t header = Scalar(Int32Wire(chip_ordinal)) + Delimited(line.size()) +
                        Scalar(static_cast<uint64_t>(b.base_ns));
  size_t blob = limit;  // the largest encoding that fits beside the header
  while (blob > 0 && Delimited(header + Delimited(blob)) > limit) --blob;
  const size_t max_raw = trace::MaxCounterBytesWithin(blob);
  if (max_raw == 0) return absl::InvalidArgumentError("chunk limit too small for a timeline");
  uint32_t most = 0;
  for (uint32_t k : b.kernel) most = std::max(most, k);
  const std::vector<int64_t> numbers = trace::HostKernelNumbers(most + size_t{1});
  v1::CaptureChunk chunk;
  for (size_t begin = 0; begin < b.size();) {
    size_t raw = 0, end = begin;
    int64_t prev = 0;
    for (; end < b.size(); ++end) {
      const size_t e = V64(WireFormatLite::ZigZagEncode64(b.start_ps[end] - prev)) +
                       V64(WireFormatLite::ZigZagEncode64(b.duration_ps[end])) +
                       V32(b.kernel[end] + 1) + V64(b.collective[end]);
      if (raw + e > max_raw && end > begin) break;
      raw += e;
      prev = b.start_ps[end];
    }
    v1::EventBlock* e = StartBlockChunk(chip_ordinal, line, b.base_ns, &chunk);
    e->set_columns(trace::EncodeTimeline(b, numbers, begin, end));
    counts->events += end - begin;
    if (!Send(chunk, sink, counts)) return Broken();
    begin = end;
  }
  return absl::OkStatus();
}

// One event block as runs of events whose chunk stays within `limit`.
absl::Status StreamBlock(const trace::EventBlock& b, int chip_ordinal, size_t limit,
                         ChunkSink* sink, ChunkCounts* counts) {
  const std::string line = Cut(b.line, kMaxNameBytes);
  const size_t header = Scalar(Int32Wire(chip_ordinal)) + Delimited(line.size()) +
                        Scalar(static_cast<uint64_t>(b.base_ns));
  v1::CaptureChunk chunk;
  for (size_t begin = 0; begin < b.size();) {
    // Column bytes of the run [begin, end), grown while the chunk still fits.
    size_t starts = 0, durations = 0, kernels = 0, collectives = 0;
    int64_t prev = 0;
    size_t end = begin;
    for (; end < b.size(); ++end) {
      const size_t s = starts + V64(WireFormatLite::ZigZagEncode64(b.start_ps[end] - prev));
      const size_t d = durations + V64(static_cast<uint64_t>(b.duration_ps[end]));
      const size_t k = kernels + V32(b.kernel[end] + 1);
      const size_t c = collectives + V64(b.collective[end]);
      const size_t body = header + Packed(s) + Packed(d) + Packed(k) + Packed(c);
      if (Delimited(body) > limit && end > begin) break;
      starts = s, durations = d, kernels = k, collectives = c;
      prev = b.start_ps[end];
    }
    v1::EventBlock* e = StartBlockChunk(chip_ordinal, line, b.base_ns, &chunk);
    const int n = static_cast<int>(end - begin);
    e->mutable_start_ps()->Reserve(n);
    e->mutable_duration_ps()->Reserve(n);
    e->mutable_kernel_id()->Reserve(n);
    e->mutable_collective_id()->Reserve(n);
    prev = 0;
    for (size_t i = begin; i < end; ++i) {
      e->add_start_ps(b.start_ps[i] - prev);  // delta from the previous event's start
      prev = b.start_ps[i];
      e->add_duration_ps(b.duration_ps[i]);
      e->add_kernel_id(b.kernel[i] + 1);
      e->add_collective_id(b.collective[i]);
    }
    counts->events += end - begin;
    if (!Send(chunk, sink, counts)) return Broken();
    begin = end;
  }
  return absl::OkStatus();
}

// One counter series as runs of samples, each run in the column encoding (trace/columns.h)
// in a chunk of its own: what the aggregator stores as it arrives. A run holds at most what
// encodes within the chunk whatever the values are (zstd's bound for incompressible input),
// so a chunk never outgrows `limit`; typical runs compress to a third of it.
// With a reference (another series of the chip, whose times strictly increase), each run takes
// its times from it where they are among the reference's (trace::EncodeCountersSharingTimes).
absl::Status StreamSeries(int chip_ordinal, const std::string& name, const std::string& unit,
                          const int64_t* time_ns, const double* value, size_t n, size_t limit,
                          ChunkSink* sink, ChunkCounts* counts,
                          const trace::CounterSeries* reference = nullptr) {
  const std::string cut_name = Cut(name, kMaxNameBytes), cut_unit = Cut(unit, 64);
  const size_t header = Scalar(Int32Wire(chip_ordinal)) + Delimited(cut_name.size()) +
                        (cut_unit.empty() ? 0 : Delimited(cut_unit.size()));
  size_t blob = limit;  // the largest encoding that fits beside the header
  while (blob > 0 && Delimited(header + Delimited(blob)) > limit) --blob;
  const size_t max_raw = trace::MaxCounterBytesWithin(blob);
  if (max_raw == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter ", cut_name, ": no sample fits a chunk of ", limit, " bytes"));
  }
  v1::CaptureChunk chunk;
  for (size_t begin = 0; begin < n;) {
    size_t raw = 0, end = begin;
    for (int64_t prev = 0; end < n; ++end) {
      const size_t sample = trace::VarintSize(trace::ZigZag(time_ns[end] - prev)) + 8;
      if (raw + sample > max_raw && end > begin) break;
      raw += sample;
      prev = time_ns[end];
    }
    chunk.Clear();
    auto* s = chunk.mutable_counter_series();
    s->set_chip_ordinal(chip_ordinal);
    s->set_name(cut_name);
    s->set_unit(cut_unit);
    s->set_samples(reference == nullptr
                       ? trace::EncodeCounters(time_ns, value, begin, end)
                       : trace::EncodeCountersSharingTimes(
                             Cut(reference->name, kMaxNameBytes), reference->time_ns.data(),
                             reference->time_ns.size(), time_ns, value, begin, end));
    counts->counter_samples += end - begin;
    if (!Send(chunk, sink, counts)) return Broken();
    begin = end;
  }
  return absl::OkStatus();
}

// For each of `counters`, the series of its chip whose times it may take (null: none): the
// chip's series with the most samples, of those whose times strictly increase and whose name,
// as the stream cuts it, no other series of the chip has (a reader finds it by that name). A
// chip's counters are sampled together, most at some of the instants of the one sampled most
// (podprof-loadgen's v5p host: its busy gauges at some of its energy totals' instants), and
// their times then cost a bit each rather than about two bytes.
std::vector<const trace::CounterSeries*> SharedTimes(
    const std::vector<trace::CounterSeries>& counters) {
  absl::flat_hash_map<int, absl::flat_hash_map<std::string, int>>
      names;  // chip -> cut name -> uses
  for (const trace::CounterSeries& c : counters) ++names[c.chip][Cut(c.name, kMaxNameBytes)];
  absl::flat_hash_map<int, const trace::CounterSeries*> best;
  for (const trace::CounterSeries& c : counters) {
    const size_t n = std::min(c.time_ns.size(), c.value.size());
    if (n < 2 || c.time_ns.size() != c.value.size() ||
        names[c.chip][Cut(c.name, kMaxNameBytes)] != 1 ||
        !std::is_sorted(c.time_ns.begin(), c.time_ns.end(), std::less_equal<int64_t>())) {
      continue;
    }
    const trace::CounterSeries*& b = best[c.chip];
    if (b == nullptr || n > b->time_ns.size()) b = &c;
  }
  std::vector<const trace::CounterSeries*> out(counters.size(), nullptr);
  for (size_t i = 0; i < counters.size(); ++i) {
    auto it = best.find(counters[i].chip);
    if (it != best.end() && it->second != &counters[i]) out[i] = it->second;
  }
  return out;
}

}  // namespace

size_t NegotiateChunkBytes(size_t own_limit, uint64_t requested) {
  size_t limit = own_limit;
  if (requested > 0 && requested < limit) limit = static_cast<size_t>(requested);
  return std::max(limit, kMinChunkBytes);
}

v1::ChipInfo ChipInfoOf(const trace::Chip& c) {
  v1::ChipInfo ci;
  ci.set_ordinal(c.ordinal);
  ci.set_global_chip_id(static_cast<int32_t>(c.global_id));
  ci.set_generation(c.generation);
  ci.set_device_type_string(c.device_type);
  ci.set_peak_tflops(c.peak_tflops);
  ci.set_peak_hbm_gbps(c.peak_hbm_gbps);
  return ci;
}

absl::Status StreamHost(const v1::HostInfo& host, size_t max_chunk_bytes, ChunkSink* sink,
                        ChunkCounts* counts) {
  if (max_chunk_bytes < kMinChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat("chunk limit of ", max_chunk_bytes,
                                                   " bytes is below the least, ", kMinChunkBytes));
  }
  v1::CaptureChunk chunk;
  *chunk.mutable_host_info() = host;
  if (chunk.ByteSizeLong() > max_chunk_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the host description of ", chunk.ByteSizeLong(),
                                                   " bytes does not fit a chunk of ",
                                                   max_chunk_bytes));
  }
  return Send(chunk, sink, counts) ? absl::OkStatus() : Broken();
}

absl::Status StreamPiece(const trace::HostCapture& piece, size_t first_kernel,
                         size_t max_chunk_bytes, ChunkSink* sink, ChunkCounts* counts,
                         bool columns) {
  RETURN_IF_ERROR(StreamKernels(piece.kernels, first_kernel, max_chunk_bytes, sink, counts));
  for (const trace::EventBlock& b : piece.blocks) {
    const int ordinal = piece.host.chips[b.chip].ordinal;
    RETURN_IF_ERROR(columns ? StreamBlockColumns(b, ordinal, max_chunk_bytes, sink, counts)
                            : StreamBlock(b, ordinal, max_chunk_bytes, sink, counts));
  }
  const std::vector<const trace::CounterSeries*> references = SharedTimes(piece.counters);
  // The references first: a stream cut short (a host stored partial) then holds every sample
  // the series it holds take their times from.
  absl::flat_hash_set<const trace::CounterSeries*> named(references.begin(), references.end());
  for (bool first : {true, false}) {
    for (size_t i = 0; i < piece.counters.size(); ++i) {
      const trace::CounterSeries& c = piece.counters[i];
      if (named.contains(&c) != first) continue;
      const size_t n = std::min(c.time_ns.size(), c.value.size());
      RETURN_IF_ERROR(StreamSeries(piece.host.chips[c.chip].ordinal, c.name, "", c.time_ns.data(),
                                   c.value.data(), n, max_chunk_bytes, sink, counts,
                                   references[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status StreamCounters(const std::vector<v1::CounterSeries>& series, size_t max_chunk_bytes,
                            ChunkSink* sink, ChunkCounts* counts) {
  for (const v1::CounterSeries& c : series) {
    const size_t n = static_cast<size_t>(std::min(c.timestamp_ns_size(), c.value_size()));
    RETURN_IF_ERROR(StreamSeries(c.chip_ordinal(), c.name(), c.unit(), c.timestamp_ns().data(),
                                 c.value().data(), n, max_chunk_bytes, sink, counts));
  }
  return absl::OkStatus();
}

namespace {

// The summary's rows in parts that each fit a chunk of `limit`: rows added while the part's
// exact size stays within it (a row is at most two cut names and a few numbers, far below
// kMinChunkBytes).
class SummaryParts {
 public:
  SummaryParts(size_t limit, ChunkSink* sink, ChunkCounts* counts)
      : budget_(limit - 16), sink_(sink), counts_(counts) {}  // 16: chunk and part headers

  // Adds the row `add` makes, of `row_bytes` serialized, sending the part first when full.
  template <typename Add>
  absl::Status Row(size_t row_bytes, Add add) {
    if (bytes_ + Delimited(row_bytes) > budget_) RETURN_IF_ERROR(Flush());
    add(chunk_.mutable_summary());
    bytes_ += Delimited(row_bytes);
    ++rows_;
    return absl::OkStatus();
  }
  absl::Status Flush() {
    if (bytes_ == 0) return absl::OkStatus();
    if (!Send(chunk_, sink_, counts_)) return Broken();
    chunk_.Clear();
    bytes_ = 0;
    return absl::OkStatus();
  }
  size_t budget() const { return budget_; }
  uint64_t rows() const { return rows_; }

 private:
  const size_t budget_;
  ChunkSink* const sink_;
  ChunkCounts* const counts_;
  v1::CaptureChunk chunk_;
  size_t bytes_ = 0;
  uint64_t rows_ = 0;
};

// One chip's arrivals [begin, end) of `runs` (all of one chip) in parts of at most a chunk.
absl::Status StreamArrivals(const std::vector<insight::CollectiveRun>& runs, size_t begin,
                            size_t end, int ordinal, SummaryParts* parts) {
  RETURN_IF_ERROR(parts->Flush());  // a chip's arrivals start a part of their own
  while (begin < end) {
    size_t ids = 0, starts = 0, durations = 0, steps = 0, kernels = 0, carries = 0;
    int64_t prev = 0;
    size_t stop = begin;
    for (; stop < end; ++stop) {
      const insight::CollectiveRun& r = runs[stop];
      const size_t i = ids + V64(r.id);
      const size_t s = starts + V64(WireFormatLite::ZigZagEncode64(r.start_ns - prev));
      const size_t d = durations + V64(static_cast<uint64_t>(r.duration_ns));
      const size_t st = steps + V64(WireFormatLite::ZigZagEncode64(r.step));
      const size_t k = kernels + V32(static_cast<uint32_t>(r.kernel_key + 1));
      const size_t c = carries + V32(WireFormatLite::ZigZagEncode32(r.end_carry));
      const size_t bytes = Scalar(Int32Wire(ordinal)) + Packed(i) + Packed(s) + Packed(d) +
                           Packed(st) + Packed(k) + Packed(c);
      if (Delimited(bytes) > parts->budget() && stop > begin) break;
      ids = i, starts = s, durations = d, steps = st, kernels = k, carries = c;
      prev = r.start_ns;
    }
    RETURN_IF_ERROR(parts->Row(0, [&](v1::HostSummaryPart* part) {
      v1::CollectiveArrivals* a = part->mutable_arrivals();
      a->set_chip_ordinal(ordinal);
      int64_t last = 0;
      for (size_t j = begin; j < stop; ++j) {
        const insight::CollectiveRun& r = runs[j];
        a->add_collective_id(r.id);
        a->add_start_ns(r.start_ns - last);
        last = r.start_ns;
        a->add_duration_ns(r.duration_ns);
        a->add_step(r.step);
        a->add_kernel_id(static_cast<uint32_t>(r.kernel_key + 1));
        a->add_end_carry(r.end_carry);
      }
    }));
    RETURN_IF_ERROR(parts->Flush());
    begin = stop;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint64_t> StreamSummary(const analysis::HostSummary& summary,
                                       const std::vector<trace::Chip>& chips,
                                       size_t max_chunk_bytes, ChunkSink* sink,
                                       ChunkCounts* counts) {
  SummaryParts parts(max_chunk_bytes, sink, counts);
  for (const trace::KernelStats& st : summary.stats) {
    v1::KernelStatsRow row;
    row.set_chip_ordinal(chips[st.chip].ordinal);
    row.set_kernel_id(st.kernel + 1);
    row.set_count(st.count);
    row.set_total_ps(st.total_ps);
    row.set_min_ps(st.min_ps);
    row.set_max_ps(st.max_ps);
    row.set_sketch(st.sketch.Serialize());
    RETURN_IF_ERROR(parts.Row(row.ByteSizeLong(),
                              [&](v1::HostSummaryPart* p) { *p->add_stats() = std::move(row); }));
  }
  for (const trace::KernelCounter& a : summary.attributions) {
    v1::CounterAttributionRow row;
    row.set_chip_ordinal(chips[a.chip].ordinal);
    row.set_kernel_id(a.kernel + 1);
    row.set_counter(Cut(a.counter, kMaxNameBytes));  // as the series' own name travels
    row.set_cumulative(a.kind == trace::CounterKind::kCumulative);
    row.set_integral(a.integral);
    row.set_covered_ps(a.covered_ps);
    row.set_executions(a.executions);
    RETURN_IF_ERROR(parts.Row(row.ByteSizeLong(), [&](v1::HostSummaryPart* p) {
      *p->add_attributions() = std::move(row);
    }));
  }
  for (const trace::KernelScope& sc : summary.scopes) {
    v1::ScopeRow row;
    row.set_chip_ordinal(chips[sc.chip].ordinal);
    row.set_kernel_id(sc.kernel + 1);
    row.set_line(Cut(sc.line, kMaxNameBytes));  // as the block's line travels
    row.set_name_kernel_id(sc.scope_kernel + 1);
    row.set_count(sc.count);
    row.set_total_ps(sc.total_ps);
    RETURN_IF_ERROR(parts.Row(row.ByteSizeLong(),
                              [&](v1::HostSummaryPart* p) { *p->add_scopes() = std::move(row); }));
  }
  // Arrivals in the order they came, a run of one chip's at a time.
  const std::vector<insight::CollectiveRun>& runs = summary.arrivals;
  uint64_t arrival_parts = 0;
  for (size_t begin = 0; begin < runs.size();) {
    size_t end = begin;
    while (end < runs.size() && runs[end].chip_key == runs[begin].chip_key) ++end;
    const uint64_t before = parts.rows();
    RETURN_IF_ERROR(StreamArrivals(runs, begin, end, chips[runs[begin].chip_key].ordinal, &parts));
    arrival_parts += parts.rows() - before;
    begin = end;
  }
  RETURN_IF_ERROR(parts.Flush());
  // Rows: the arrivals count one each, not their parts.
  return parts.rows() - arrival_parts + runs.size();
}

absl::Status StreamCapture(const trace::HostCapture& capture, const v1::HostInfo& host,
                           const std::vector<v1::CounterSeries>& extra_counters,
                           size_t max_chunk_bytes, ChunkSink* sink, ChunkCounts* counts,
                           bool columns) {
  RETURN_IF_ERROR(StreamHost(host, max_chunk_bytes, sink, counts));
  RETURN_IF_ERROR(StreamPiece(capture, 0, max_chunk_bytes, sink, counts, columns));
  return StreamCounters(extra_counters, max_chunk_bytes, sink, counts);
}

v1::CaptureChunk EncodeTrailer(v1::CaptureTrailer trailer, size_t max_chunk_bytes) {
  v1::CaptureChunk chunk;
  std::vector<std::string> warnings(trailer.warnings().begin(), trailer.warnings().end());
  trailer.clear_warnings();
  *chunk.mutable_trailer() = trailer;
  // Room for the note saying how many were left out.
  const size_t note = Delimited(64);
  size_t bytes = chunk.ByteSizeLong() + 8;  // + the trailer's own length growing
  size_t kept = 0;
  for (; kept < warnings.size(); ++kept) {
    const size_t w = Delimited(std::min(warnings[kept].size(), kMaxWarningBytes));
    if (bytes + w + note > max_chunk_bytes) break;
    bytes += w;
    chunk.mutable_trailer()->add_warnings(Cut(warnings[kept], kMaxWarningBytes));
  }
  if (kept < warnings.size()) {
    chunk.mutable_trailer()->add_warnings(
        absl::StrCat(warnings.size() - kept, " more warnings not sent (chunk limit)"));
  }
  return chunk;
}

}  // namespace podprof::stream
