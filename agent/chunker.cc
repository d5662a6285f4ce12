#include "agent/chunker.h"

#include <algorithm>

namespace podprof::agent {
namespace {

// Worst case of one event on the wire: 10-byte varints for start and duration, 5 for the
// kernel id, 10 for the collective id.
constexpr size_t kMaxEventBytes = 35;
constexpr size_t kMaxKernelDefBytes = 512;

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

  // Kernel definitions, batched; each field is bounded by the chunk size (long names cut).
  const size_t defs_per_chunk = std::max<size_t>(1, max_chunk_bytes / kMaxKernelDefBytes);
  for (size_t i = 0; i < capture.kernels.size();) {
    chunk.Clear();
    auto* batch = chunk.mutable_kernel_defs();
    for (size_t n = 0; n < defs_per_chunk && i < capture.kernels.size(); ++n, ++i) {
      const trace::KernelDef& k = capture.kernels[i];
      auto* d = batch->add_kernels();
      d->set_kernel_id(i + 1);
      d->set_module(k.module.substr(0, 128));
      d->set_op_name(k.name.substr(0, 200));
      d->set_hlo_text_hash(k.hlo_hash);
      d->set_category(k.category.substr(0, 64));
      d->set_program_id(k.program_id);
      d->set_flops(k.flops);
      d->set_bytes_accessed(k.bytes_accessed);
      d->set_source(k.source.substr(0, 100));
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
