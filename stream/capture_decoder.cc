#include "stream/capture_decoder.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
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

absl::Status CaptureDecoder::AddEncodedEvents(v1::EventBlock& e) {
  if (e.start_ps_size() > 0 || e.duration_ps_size() > 0 || e.kernel_id_size() > 0 ||
      e.collective_id_size() > 0) {
    return absl::InvalidArgumentError("carries both encoded columns and column fields");
  }
  // Kept encoded, to be stored as it arrived; what is wrong with it short of decoding shows
  // now, naming this chunk.
  absl::StatusOr<uint64_t> n = trace::CheckTimeline(e.columns(), kMaxSeriesRawBytes);
  if (!n.ok()) return absl::InvalidArgumentError(n.status().message());
  trace::EventBlock b;
  b.chip = ChipIndex(e.chip_ordinal(), nullptr);
  b.line = e.line_name();
  b.kind = trace::LineKindOfName(b.line);
  b.base_ns = e.base_ns();
  b.encoded = std::move(*e.mutable_columns());
  b.encoded_events = static_cast<int64_t>(*n);
  events_ += *n;
  if (trace::IsKernelLine(b.kind)) tally_.CountEncoded(b.chip, b.encoded_events);
  capture_.blocks.push_back(std::move(b));
  return absl::OkStatus();
}

absl::Status CaptureDecoder::AddEvents(v1::EventBlock& e) {
  if (!e.columns().empty()) return AddEncodedEvents(e);
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
  if (trace::IsKernelLine(b.kind)) tally_.Count(b.chip, b.kernel, b.collective);
  capture_.blocks.push_back(std::move(b));
  return absl::OkStatus();
}

absl::Status CaptureDecoder::AddCounters(v1::CounterSeries& cs) {
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
    series.encoded = std::move(*cs.mutable_samples());
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

absl::StatusOr<int> CaptureDecoder::SummaryChip(int ordinal, const char* what) const {
  for (size_t i = 0; i < capture_.host.chips.size(); ++i) {
    if (capture_.host.chips[i].ordinal == ordinal) return static_cast<int>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " names chip ", ordinal, ", which the stream never described"));
}

absl::StatusOr<uint32_t> CaptureDecoder::SummaryKernel(uint32_t id, const char* what) const {
  if (id == 0 || id > capture_.kernels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " names kernel id ", id, " but ids 1..",
                                                   capture_.kernels.size(), " are defined"));
  }
  return id - 1;
}

absl::Status CaptureDecoder::AddArrivals(const v1::CollectiveArrivals& a) {
  const int n = a.collective_id_size();
  if (a.start_ns_size() != n || a.duration_ns_size() != n || a.step_size() != n ||
      a.kernel_id_size() != n || a.end_carry_size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("arrivals of chip ", a.chip_ordinal(), " have columns of different lengths"));
  }
  if (n == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int chip, SummaryChip(a.chip_ordinal(), "arrivals"));
  int64_t t = 0;
  for (int i = 0; i < n; ++i) {
    insight::CollectiveRun r;
    ASSIGN_OR_RETURN(const uint32_t kernel, SummaryKernel(a.kernel_id(i), "an arrival"));
    t += a.start_ns(i);
    r.id = a.collective_id(i);
    r.start_ns = t;
    r.duration_ns = a.duration_ns(i);
    r.step = a.step(i);
    r.chip_key = chip;
    r.kernel_key = kernel;
    r.chip_ordinal = a.chip_ordinal();
    r.end_carry = a.end_carry(i);
    summary_.arrivals.push_back(r);
  }
  summary_rows_ += static_cast<uint64_t>(n);
  return absl::OkStatus();
}

absl::Status CaptureDecoder::AddSummary(const v1::HostSummaryPart& part) {
  for (const v1::KernelStatsRow& row : part.stats()) {
    trace::KernelStats st;
    ASSIGN_OR_RETURN(st.chip, SummaryChip(row.chip_ordinal(), "a statistics row"));
    ASSIGN_OR_RETURN(st.kernel, SummaryKernel(row.kernel_id(), "a statistics row"));
    st.count = row.count();
    st.total_ps = row.total_ps();
    st.min_ps = row.min_ps();
    st.max_ps = row.max_ps();
    absl::StatusOr<trace::DDSketch> sketch = trace::DDSketch::Deserialize(row.sketch());
    if (!sketch.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a statistics row's sketch: ", sketch.status().message()));
    }
    st.sketch = std::move(*sketch);
    summary_.stats.push_back(std::move(st));
  }
  for (const v1::CounterAttributionRow& row : part.attributions()) {
    trace::KernelCounter k;
    ASSIGN_OR_RETURN(k.chip, SummaryChip(row.chip_ordinal(), "an attribution row"));
    ASSIGN_OR_RETURN(k.kernel, SummaryKernel(row.kernel_id(), "an attribution row"));
    k.counter = row.counter();
    k.kind = row.cumulative() ? trace::CounterKind::kCumulative : trace::CounterKind::kGauge;
    k.integral = row.integral();
    k.covered_ps = row.covered_ps();
    k.executions = row.executions();
    summary_.attributions.push_back(std::move(k));
  }
  for (const v1::ScopeRow& row : part.scopes()) {
    trace::KernelScope sc;
    ASSIGN_OR_RETURN(sc.chip, SummaryChip(row.chip_ordinal(), "a scope row"));
    ASSIGN_OR_RETURN(sc.kernel, SummaryKernel(row.kernel_id(), "a scope row"));
    ASSIGN_OR_RETURN(sc.scope_kernel, SummaryKernel(row.name_kernel_id(), "a scope row's name"));
    sc.line = row.line();
    sc.name = capture_.kernels[sc.scope_kernel].name;  // as its definition arrived
    sc.count = row.count();
    sc.total_ps = row.total_ps();
    summary_.scopes.push_back(std::move(sc));
  }
  summary_rows_ +=
      static_cast<uint64_t>(part.stats_size() + part.attributions_size() + part.scopes_size());
  return part.has_arrivals() ? AddArrivals(part.arrivals()) : absl::OkStatus();
}

absl::Status CaptureDecoder::Add(const v1::CaptureChunk& c) {
  v1::CaptureChunk copy = c;
  return Add(std::move(copy));
}

absl::Status CaptureDecoder::Add(v1::CaptureChunk&& c) {
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
    case v1::CaptureChunk::kSummary:
      s = AddSummary(c.summary());
      if (s.ok()) summarised_ = true;
      return s.ok() ? s : fault("summary", s);
    case v1::CaptureChunk::kEventBlock:
      if (summarised_) return fault("event_block", absl::InvalidArgumentError("after the summary"));
      s = AddEvents(*c.mutable_event_block());
      return s.ok() ? s
                    : fault(absl::StrCat("event_block of chip ", c.event_block().chip_ordinal(),
                                         " line \"", c.event_block().line_name(), "\"")
                                .c_str(),
                            s);
    case v1::CaptureChunk::kCounterSeries:
      if (summarised_) {
        return fault("counter_series", absl::InvalidArgumentError("after the summary"));
      }
      s = AddCounters(*c.mutable_counter_series());
      return s.ok() ? s : fault("counter_series", s);
    case v1::CaptureChunk::kTrailer:
      trailer_ = c.trailer();
      if (trailer_.summary_rows() != summary_rows_) {
        return fault("trailer", absl::InvalidArgumentError(
                                    absl::StrCat("it counts ", trailer_.summary_rows(),
                                                 " summary rows but ", summary_rows_, " arrived")));
      }
      analysis::OrderSummary(&summary_);
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
