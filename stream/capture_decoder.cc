#include "stream/capture_decoder.h"

#include "absl/strings/str_cat.h"
#include "trace/columns.h"

namespace podprof::stream {
namespace {

namespace v1 = podprof::v1;

// An agent's run of encoded samples takes at most its chunk unencoded (StreamSeries), and no
// receiver accepts chunks past a few MiB: a blob claiming more is damaged or hostile.
constexpr uint64_t kMaxSeriesRawBytes = 64 << 20;

}  // namespace

int CaptureDecoder::ChipIndex(int ordinal, const v1::ChipInfo* info) {
  for (size_t i = 0; i < capture_.host.chips.size(); ++i) {
    if (capture_.host.chips[i].ordinal == ordinal) return static_cast<int>(i);
  }
  trace::Chip chip;
  chip.ordinal = ordinal;
  if (info != nullptr) {
    chip.global_id = info->global_chip_id();
    chip.generation = info->generation();
    chip.device_type = info->device_type_string();
    chip.peak_tflops = info->peak_tflops();
    chip.peak_hbm_gbps = info->peak_hbm_gbps();
  }
  capture_.host.chips.push_back(chip);
  return static_cast<int>(capture_.host.chips.size()) - 1;
}

absl::Status CaptureDecoder::AddKernels(const v1::KernelDefBatch& batch) {
  for (const auto& k : batch.kernels()) {
    if (k.kernel_id() != capture_.kernels.size() + 1) {
      return absl::InvalidArgumentError(absl::StrCat("kernel id ", k.kernel_id(), " where ",
                                                     capture_.kernels.size() + 1,
                                                     " was due (ids come in order from 1)"));
    }
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
  return absl::OkStatus();
}

absl::Status CaptureDecoder::AddEvents(const v1::EventBlock& e) {
  const int n = e.kernel_id_size();
  if (e.start_ps_size() != n || e.duration_ps_size() != n || e.collective_id_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "columns of different lengths (", e.start_ps_size(), " starts, ", e.duration_ps_size(),
        " durations, ", n, " kernel ids, ", e.collective_id_size(), " collective ids)"));
  }
  const size_t defined = capture_.kernels.size();
  for (int i = 0; i < n; ++i) {
    if (e.kernel_id(i) == 0 || e.kernel_id(i) > defined) {
      return absl::InvalidArgumentError(absl::StrCat("event ", i, " names kernel id ",
                                                     e.kernel_id(i), " but ids 1..", defined,
                                                     " are defined"));
    }
  }
  trace::EventBlock b;
  b.chip = ChipIndex(e.chip_ordinal(), nullptr);
  b.line = e.line_name();
  b.kind = trace::LineKindOfName(b.line);
  b.base_ns = e.base_ns();
  b.start_ps.resize(n);
  b.duration_ps.assign(e.duration_ps().begin(), e.duration_ps().end());
  b.kernel.resize(n);
  b.collective.assign(e.collective_id().begin(), e.collective_id().end());
  int64_t t = 0;
  for (int i = 0; i < n; ++i) {
    t += e.start_ps(i);
    b.start_ps[i] = t;
    b.kernel[i] = e.kernel_id(i) - 1;
  }
  events_ += static_cast<uint64_t>(n);
  capture_.blocks.push_back(std::move(b));
  return absl::OkStatus();
}

absl::Status CaptureDecoder::AddCounters(const v1::CounterSeries& cs) {
  trace::CounterSeries series;
  if (!cs.samples().empty()) {
    if (cs.timestamp_ns_size() > 0 || cs.value_size() > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "counter ", cs.name(), " carries both encoded samples and timestamp/value fields"));
    }
    // Kept encoded (the samples are decoded when the host is analysed); what is wrong with it
    // short of decoding shows now, naming this chunk.
    absl::Status s = trace::CheckCounters(cs.samples(), kMaxSeriesRawBytes);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("counter ", cs.name(), ": ", s.message()));
    }
    series.encoded = cs.samples();
  } else if (cs.timestamp_ns_size() != cs.value_size()) {
    return absl::InvalidArgumentError(absl::StrCat("counter ", cs.name(), " has ",
                                                   cs.timestamp_ns_size(), " timestamps but ",
                                                   cs.value_size(), " values"));
  } else {
    series.time_ns.assign(cs.timestamp_ns().begin(), cs.timestamp_ns().end());
    series.value.assign(cs.value().begin(), cs.value().end());
  }
  // Series are kept per chip; a host-wide one (ordinal -1) has nowhere to go yet.
  if (cs.chip_ordinal() < 0) {
    capture_.warnings.push_back(absl::StrCat("host-wide counter ", cs.name(), " not kept"));
    return absl::OkStatus();
  }
  series.chip = ChipIndex(cs.chip_ordinal(), nullptr);
  series.name = cs.name();
  capture_.counters.push_back(std::move(series));
  return absl::OkStatus();
}

absl::Status CaptureDecoder::Add(const v1::CaptureChunk& c) {
  const uint64_t index = chunks_++;
  auto fault = [index](const char* kind, const absl::Status& s) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", index, " (", kind, "): ", s.message()));
  };
  if (done_) return fault("after the trailer", absl::InvalidArgumentError("the stream had ended"));
  absl::Status s;
  switch (c.payload_case()) {
    case v1::CaptureChunk::kHostInfo:
      if (index != 0) return fault("host_info", absl::InvalidArgumentError("not the first chunk"));
      for (const auto& chip : c.host_info().chips()) ChipIndex(chip.ordinal(), &chip);
      return absl::OkStatus();
    case v1::CaptureChunk::kKernelDefs:
      s = AddKernels(c.kernel_defs());
      return s.ok() ? s : fault("kernel_defs", s);
    case v1::CaptureChunk::kEventBlock:
      s = AddEvents(c.event_block());
      return s.ok() ? s
                    : fault(absl::StrCat("event_block of chip ", c.event_block().chip_ordinal(),
                                         " line \"", c.event_block().line_name(), "\"")
                                .c_str(),
                            s);
    case v1::CaptureChunk::kCounterSeries:
      s = AddCounters(c.counter_series());
      return s.ok() ? s : fault("counter_series", s);
    case v1::CaptureChunk::kTrailer:
      trailer_ = c.trailer();
      for (const auto& w : trailer_.warnings()) capture_.warnings.push_back(w);
      capture_.host.profile_start_ns = trailer_.actual_start_ns();
      capture_.host.profile_stop_ns = trailer_.actual_end_ns();
      done_ = true;
      return absl::OkStatus();
    case v1::CaptureChunk::PAYLOAD_NOT_SET:
      break;
  }
  // A payload kind this build does not know (a newer agent's) is skipped, as protobuf skips
  // unknown fields.
  return absl::OkStatus();
}

}  // namespace podprof::stream
