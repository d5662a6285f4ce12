#include "aggregator/chunk_assembler.h"

#include "absl/strings/str_cat.h"

namespace podprof::aggregator {

bool ChunkAssembler::Add(const podprof::v1::CaptureChunk& c) {
  if (c.has_host_info()) {
    host_ = c.host_info();
    for (const auto& chip : host_.chips()) ChipIndex(chip.ordinal(), &chip);
  } else if (c.has_kernel_defs()) {
    for (const auto& k : c.kernel_defs().kernels()) {
      if (k.kernel_id() != capture_.kernels.size() + 1) return false;  // ids come in order
      trace::KernelDef d;
      d.module = k.module();
      d.name = k.op_name();
      d.hlo_hash = k.hlo_text_hash();
      d.category = k.category();
      d.program_id = k.program_id();
      d.flops = k.flops();
      d.bytes_accessed = k.bytes_accessed();
      d.source = k.source();
      d.hlo_text = k.hlo_text();
      d.tf_op = k.tf_op();
      d.source_stack = k.source_stack();
      d.mlir = k.mlir();
      capture_.kernels.push_back(std::move(d));
    }
  } else if (c.has_event_block()) {
    const auto& e = c.event_block();
    const int n = e.kernel_id_size();
    if (e.start_ps_size() != n || e.duration_ps_size() != n || e.collective_id_size() != n) {
      return false;
    }
    trace::EventBlock b;
    b.chip = ChipIndex(e.chip_ordinal(), nullptr);
    b.line = e.line_name();
    b.kind = trace::LineKindOfName(b.line);
    b.base_ns = e.base_ns();
    int64_t t = 0;
    for (int i = 0; i < n; ++i) {
      if (e.kernel_id(i) == 0 || e.kernel_id(i) > capture_.kernels.size()) return false;
      t += e.start_ps(i);
      b.start_ps.push_back(t);
      b.duration_ps.push_back(e.duration_ps(i));
      b.kernel.push_back(e.kernel_id(i) - 1);
      b.collective.push_back(e.collective_id(i));
    }
    events_ += static_cast<uint64_t>(n);
    capture_.blocks.push_back(std::move(b));
  } else if (c.has_counter_series()) {
    const auto& cs = c.counter_series();
    if (cs.timestamp_ns_size() != cs.value_size()) return false;
    // Series are kept per chip; a host-wide one (ordinal -1) has nowhere to go yet.
    if (cs.chip_ordinal() < 0) {
      capture_.warnings.push_back(absl::StrCat("host-wide counter ", cs.name(), " not kept"));
      return true;
    }
    trace::CounterSeries series;
    series.chip = ChipIndex(cs.chip_ordinal(), nullptr);
    series.name = cs.name();
    series.time_ns.assign(cs.timestamp_ns().begin(), cs.timestamp_ns().end());
    series.value.assign(cs.value().begin(), cs.value().end());
    capture_.counters.push_back(std::move(series));
  } else if (c.has_trailer()) {
    trailer_ = c.trailer();
    for (const auto& w : trailer_.warnings()) capture_.warnings.push_back(w);
    capture_.host.profile_start_ns = trailer_.actual_start_ns();
    capture_.host.profile_stop_ns = trailer_.actual_end_ns();
    done_ = true;
  }
  return true;
}

}  // namespace podprof::aggregator
