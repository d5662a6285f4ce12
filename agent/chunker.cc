#include "agent/chunker.h"

#include <algorithm>

namespace podprof::agent {
namespace {

// Worst case of one event on the wire: 10-byte varints for start and duration, 5 for the
// kernel id, 10 for the collective id.
constexpr size_t kMaxEventBytes = 35;
// Bounds on a kernel definition's longer texts: an HLO instruction, and a Mosaic kernel's MLIR.
constexpr size_t kMaxHloTextBytes = 8 << 10;
constexpr size_t kMaxMlirBytes = 64 << 10;

// The first `n` bytes of `s`, cut back to a UTF-8 character boundary: protobuf refuses a
// string field holding half a character.
std::string Cut(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

bool Send(const podprof::v1::CaptureChunk& chunk, ChunkSink* sink, ChunkCounts* counts) {
  counts->chunks++;
  counts->bytes += chunk.ByteSizeLong();
  return sink->Write(chunk);
}

}  // namespace

bool StreamCapture(const trace::HostCapture& capture, const podprof::v1::HostInfo& host,
                   const std::vector<podprof::v1::CounterSeries>& extra_counters,
                   size_t max_chunk_bytes, ChunkSink* sink, ChunkCounts* counts) {
  podprof::v1::CaptureChunk chunk;
  *chunk.mutable_host_info() = host;
  if (!Send(chunk, sink, counts)) return false;

  // Kernel definitions, batched up to the chunk size (at least one per chunk); each field is
  // bounded (long names and texts cut).
  for (size_t i = 0; i < capture.kernels.size();) {
    chunk.Clear();
    auto* batch = chunk.mutable_kernel_defs();
    size_t batch_bytes = 0;
    for (; i < capture.kernels.size(); ++i) {
      const size_t def_bytes = 512 +
                               std::min(capture.kernels[i].hlo_text.size(), kMaxHloTextBytes) +
                               std::min(capture.kernels[i].mlir.size(), kMaxMlirBytes) +
                               std::min<size_t>(capture.kernels[i].source_stack.size(), 4096) +
                               std::min<size_t>(capture.kernels[i].tf_op.size(), 1024);
      if (batch->kernels_size() > 0 && batch_bytes + def_bytes > max_chunk_bytes) break;
      batch_bytes += def_bytes;
      const trace::KernelDef& k = capture.kernels[i];
      auto* d = batch->add_kernels();
      d->set_kernel_id(i + 1);
      d->set_module(Cut(k.module, 128));
      d->set_op_name(Cut(k.name, 200));
      d->set_hlo_text_hash(k.hlo_hash);
      d->set_category(Cut(k.category, 64));
      d->set_program_id(k.program_id);
      d->set_flops(k.flops);
      d->set_bytes_accessed(k.bytes_accessed);
      d->set_source(Cut(k.source, 100));
      // Identity for `podprof kernel`, bounded so one kernel cannot crowd a chunk out.
      d->set_hlo_text(Cut(k.hlo_text, kMaxHloTextBytes));
      d->set_tf_op(Cut(k.tf_op, 1024));
      d->set_source_stack(Cut(k.source_stack, 4096));
      d->set_mlir(Cut(k.mlir, kMaxMlirBytes));
    }
    counts->kernels += batch->kernels_size();
    if (!Send(chunk, sink, counts)) return false;
  }

  const size_t events_per_chunk = std::max<size_t>(1, max_chunk_bytes / kMaxEventBytes);
  for (const trace::EventBlock& b : capture.blocks) {
    for (size_t begin = 0; begin < b.size(); begin += events_per_chunk) {
      const size_t end = std::min(b.size(), begin + events_per_chunk);
      chunk.Clear();
      auto* e = chunk.mutable_event_block();
      e->set_chip_ordinal(capture.host.chips[b.chip].ordinal);
      e->set_line_name(b.line);
      e->set_base_ns(b.base_ns);
      e->mutable_start_ps()->Reserve(static_cast<int>(end - begin));
      e->mutable_duration_ps()->Reserve(static_cast<int>(end - begin));
      e->mutable_kernel_id()->Reserve(static_cast<int>(end - begin));
      e->mutable_collective_id()->Reserve(static_cast<int>(end - begin));
      int64_t prev = 0;
      for (size_t i = begin; i < end; ++i) {
        e->add_start_ps(b.start_ps[i] - prev);  // delta from the previous event's start
        prev = b.start_ps[i];
        e->add_duration_ps(b.duration_ps[i]);
        e->add_kernel_id(b.kernel[i] + 1);
        e->add_collective_id(b.collective[i]);
      }
      counts->events += end - begin;
      if (!Send(chunk, sink, counts)) return false;
    }
  }

  auto send_series = [&](const podprof::v1::CounterSeries& s) {
    chunk.Clear();
    *chunk.mutable_counter_series() = s;
    counts->counter_samples += s.value_size();
    return Send(chunk, sink, counts);
  };
  const size_t samples_per_chunk = std::max<size_t>(1, max_chunk_bytes / 16);
  for (const trace::CounterSeries& c : capture.counters) {
    for (size_t begin = 0; begin < c.value.size(); begin += samples_per_chunk) {
      const size_t end = std::min(c.value.size(), begin + samples_per_chunk);
      podprof::v1::CounterSeries s;
      s.set_chip_ordinal(capture.host.chips[c.chip].ordinal);
      s.set_name(c.name);
      for (size_t i = begin; i < end; ++i) {
        s.add_timestamp_ns(c.time_ns[i]);
        s.add_value(c.value[i]);
      }
      if (!send_series(s)) return false;
    }
  }
  for (const podprof::v1::CounterSeries& s : extra_counters) {
    if (!send_series(s)) return false;
  }
  return true;
}

}  // namespace podprof::agent
