// A hand-made multi-slice capture in podprof's layout (docs/MEGASCALE.md, "podprof's
// multi-slice layout"), stored through the ingest path, for the tests of the DCN answer (the
// query layer, the HTTP route, `podprof dcn`, the Python client through
// podprof-test-dcn-store). One host per slice with `chips` chips; each step is a program run
// (`XLA Modules`) in which every chip runs a compute op, then the four host-transfer ops of
// rendezvous `dcn_grads.0` (channel 101), sending to the chip of the same ordinal in slice
// (s + 1) mod S.
//
// Timing, on the aggregator's clock (each host's own clock is `clock_offset_ns` ahead of it):
// a slice reaches the DCN phase 500 us into the step (`late_ns` later for `late_slice`); send
// 2 us, recv 1 us, send-done 50 us; recv-done starts 1 us after send-done ends and ends 5 us
// (the copy) after the data arrived, or after it started when the data was already there. The
// data arrives `transit_ns` after the sender's send-done ended, `slow_ns` more over the link
// `slow_src` -> `slow_dst`.
#ifndef PODPROF_TESTS_UTIL_DCN_POD_H_
#define PODPROF_TESTS_UTIL_DCN_POD_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "ingest/capture_ingest.h"
#include "storage/capture_writer.h"
#include "trace/clock_correction.h"
#include "trace/model.h"

namespace podprof::testing {

struct DcnPod {
  std::string id = "dcn-1";
  int slices = 2;
  int chips = 2;
  int steps = 20;
  int64_t start_ns = 1'800'000'000'000'000'000;
  int64_t step_ns = 2'000'000;
  int64_t transit_ns = 100'000;
  int late_slice = -1;
  int64_t late_ns = 0;
  int slow_src = -1, slow_dst = -1;
  int64_t slow_ns = 0;
  // Per slice: its host's clock minus the aggregator's. Hosts with an entry are stored on their
  // own clock with that correction (as an agent's captures are); the rest on the aggregator's.
  std::vector<int64_t> clock_offset_ns;
  // False: the compute ops only (a capture without DCN ops).
  bool dcn = true;
};

inline std::string DcnHostName(int slice) { return absl::StrCat("slice", slice, "-host0"); }

namespace dcn_pod_internal {

constexpr int64_t kUs = 1'000;

// The HLO text of op `op` ("send", "recv", "send-done", "recv-done") of the rendezvous.
inline std::string HloText(const DcnPod& p, const std::string& op) {
  std::vector<std::string> pairs;
  for (int s = 0; s < p.slices; ++s) {
    for (int c = 0; c < p.chips; ++c) {
      pairs.push_back(
          absl::StrCat("{", s * p.chips + c, ",", ((s + 1) % p.slices) * p.chips + c, "}"));
    }
  }
  const std::string attrs = absl::StrCat(
      ", channel_id=101, is_host_transfer=true, frontend_attributes={"
      "_xla_host_transfer_rendezvous=\"dcn_grads.0\",_xla_megascale_transfer_type=\"ONE_TO_ONE\","
      "_xla_send_recv_source_target_pairs=\"{",
      absl::StrJoin(pairs, ","), "}\"}");
  const std::string buffer = "(bf16[524288]{0}, u32[], token[])";
  if (op == "send") {
    return absl::StrCat("%send.101 = ", buffer,
                        " send(bf16[524288]{0} %reduce-scatter.0, token[] %after-all.101)", attrs);
  }
  if (op == "recv") {
    return absl::StrCat("%recv.101 = ", buffer, " recv(token[] %after-all.101)", attrs);
  }
  if (op == "send-done") {
    return absl::StrCat("%send-done.101 = token[] send-done(", buffer, " %send.101)", attrs);
  }
  return absl::StrCat("%recv-done.101 = (bf16[524288]{0}, token[]) recv-done(", buffer,
                      " %recv.101)", attrs);
}

// When slice `s` reaches the DCN phase of step `k`, and when its send-done ends.
inline int64_t PhaseNs(const DcnPod& p, int s, int k) {
  return p.start_ns + 1'000 * kUs + k * p.step_ns + 500 * kUs + (s == p.late_slice ? p.late_ns : 0);
}
inline int64_t SendDoneEndNs(const DcnPod& p, int s, int k) { return PhaseNs(p, s, k) + 53 * kUs; }

}  // namespace dcn_pod_internal

// Slice `slice`'s host as its agent would deliver it: on its own clock.
inline trace::HostCapture DcnHostCapture(const DcnPod& p, int slice) {
  using dcn_pod_internal::kUs;
  const int64_t offset =
      slice < static_cast<int>(p.clock_offset_ns.size()) ? p.clock_offset_ns[slice] : 0;
  trace::HostCapture c;
  c.host.name = DcnHostName(slice);
  c.host.profile_start_ns = p.start_ns + offset;
  c.host.profile_stop_ns = p.start_ns + offset + (p.steps + 1) * p.step_ns + 1'000 * kUs;
  const char* const ops[] = {"fusion", "send", "recv", "send-done", "recv-done", "module"};
  for (const char* op : ops) {
    trace::KernelDef k;
    k.module = "jit_train_step";
    k.program_id = 7;
    if (std::string(op) == "module") {
      k.name = "jit_train_step(7)";
      k.category = "xla module";
    } else if (std::string(op) == "fusion") {
      k.name = "fusion.1";
      k.category = "convolution fusion";
    } else {
      k.name = absl::StrCat(op, ".101");
      k.category = absl::StrCat("host ", op);
      k.hlo_text = dcn_pod_internal::HloText(p, op);
      k.hlo_hash = std::hash<std::string>()(k.hlo_text);
    }
    c.kernels.push_back(std::move(k));
  }
  const int src = (slice + p.slices - 1) % p.slices;  // whom this slice receives from
  for (int chip = 0; chip < p.chips; ++chip) {
    trace::Chip x;
    x.ordinal = chip;
    x.global_id = slice * p.chips + chip;
    x.generation = "v5p";
    c.host.chips.push_back(x);
    trace::EventBlock b, modules;
    b.chip = modules.chip = chip;
    b.line = "XLA Ops";
    modules.line = "XLA Modules";
    modules.kind = trace::LineKind::kModules;
    b.base_ns = modules.base_ns = p.start_ns + offset;
    auto add_to = [&](trace::EventBlock& to, uint32_t kernel, int64_t start_ns,
                      int64_t duration_ns) {
      to.start_ps.push_back((start_ns + offset - to.base_ns) * 1000);
      to.duration_ps.push_back(duration_ns * 1000);
      to.kernel.push_back(kernel);
      to.collective.push_back(0);
    };
    auto add = [&](uint32_t kernel, int64_t start_ns, int64_t duration_ns) {
      add_to(b, kernel, start_ns, duration_ns);
    };
    for (int k = 0; k < p.steps; ++k) {
      const int64_t step = p.start_ns + 1'000 * kUs + k * p.step_ns;
      add_to(modules, 5, step, p.step_ns - 100 * kUs);
      const int64_t t = dcn_pod_internal::PhaseNs(p, slice, k);
      add(0, step, t - step - kUs);
      if (!p.dcn) continue;
      add(1, t, 2 * kUs);
      add(2, t + 2 * kUs, kUs);
      add(3, t + 3 * kUs, 50 * kUs);
      const int64_t recv_done = t + 54 * kUs;
      const int64_t arrival = dcn_pod_internal::SendDoneEndNs(p, src, k) + p.transit_ns +
                              (src == p.slow_src && slice == p.slow_dst ? p.slow_ns : 0);
      add(4, recv_done, std::max(recv_done, arrival) + 5 * kUs - recv_done);
    }
    c.blocks.push_back(std::move(b));
    c.blocks.push_back(std::move(modules));
  }
  return c;
}

// Stores the pod as one capture, as the aggregator's ingest does: each host analysed, those
// with a clock offset kept on their own clock with the correction beside them.
inline absl::Status StoreDcnPod(storage::CaptureWriter& writer, const DcnPod& p) {
  ingest::PodAnalysis pod;
  std::vector<ingest::AnalysedHost> hosts;
  for (int s = 0; s < p.slices; ++s) {
    trace::HostCapture capture = DcnHostCapture(p, s);
    ASSIGN_OR_RETURN(ingest::AnalysedHost h,
                     ingest::AnalyseHost(writer, static_cast<size_t>(s), capture, &pod));
    h.write.host = DcnHostName(s);
    h.write.slice = s;
    if (s < static_cast<int>(p.clock_offset_ns.size())) {
      trace::ClockCorrection c;
      c.offset_ns = p.clock_offset_ns[s];
      c.mid_ns = p.start_ns;
      ingest::SetHostClock(c, &h);
    }
    hosts.push_back(std::move(h));
  }
  storage::CaptureWrite w;
  w.id = p.id;
  w.start_ns = p.start_ns;
  w.end_ns = p.start_ns + (p.steps + 1) * p.step_ns + 1'000'000;
  w.created_ns = w.end_ns;
  return ingest::WriteAnalysed(writer, std::move(w), std::move(hosts), &pod);
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_DCN_POD_H_
