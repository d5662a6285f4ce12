#include "aggregator/api/dcn_reads.h"

#include <set>
#include <string>
#include <utility>

#include "common/status_macros.h"

namespace podprof::aggregator {

absl::StatusOr<DcnHosts> ReadDcnHosts(const StoreReads& reads, const std::string& capture_id,
                                      storage::HostSelection only, bool own_clock) {
  // The ops' HLO text names the rendezvous and the chips, and XProf counts only the ops inside
  // a program run (`XLA Modules`); of the counters, only what the Megascale runtime measured
  // (insight::DcnRuntimeFromCapture); nothing else of a capture is read.
  only.line_kinds = {trace::LineKind::kOps, trace::LineKind::kModules};
  only.counter_samples = std::set<std::string>();
  only.counter_sample_prefixes = {"megascale/"};
  only.kernel_texts = true;
  // A host stored on the aggregator's clock already (older captures, imports) comes as it is,
  // with nothing left to correct, either way.
  only.own_clock = own_clock;
  DcnHosts out;
  // A capture that ran no host transfer (most: every single-slice one) is answered from its
  // kernel roll-ups, without reading any host's timelines (the capture page asks for every
  // capture). An unknown capture goes on to ForEachHost's NotFound.
  ASSIGN_OR_RETURN(const bool sent, reads.kernels().RanCategory(capture_id, "host send"));
  ASSIGN_OR_RETURN(const bool received, reads.kernels().RanCategory(capture_id, "host recv"));
  if (!sent && !received) {
    RETURN_IF_ERROR(reads.captures().Get(capture_id).status());
    return out;
  }
  RETURN_IF_ERROR(
      reads.captures().ForEachHost(capture_id, only, [&](storage::StoredHost& h) -> absl::Status {
        const trace::ClockCorrection correction =
            own_clock && h.row.host_clock ? h.row.correction : trace::ClockCorrection();
        // Only the DCN runs stay: the host's capture goes when this returns.
        insight::DcnHost d = insight::DcnHostFromCapture(h.capture, h.row.slice, correction);
        if (d.runs.empty()) return absl::OkStatus();
        d.clock_uncertainty_ns = h.row.clock_uncertainty_ns;
        out.runs += d.runs.size();
        out.hosts.push_back(std::move(d));
        return absl::OkStatus();
      }));
  return out;
}

absl::StatusOr<DcnFlows> ReadDcnFlows(const StoreReads& reads, const std::string& capture_id,
                                      const storage::HostSelection& only, size_t max) {
  ASSIGN_OR_RETURN(DcnHosts read, ReadDcnHosts(reads, capture_id, only, false));
  DcnFlows out;
  if (read.hosts.empty()) return out;
  insight::DcnOptions options;
  options.max_worst = read.runs;  // every transfer (a receive is one run), longest waits first
  const insight::DcnReport report = insight::AnalyseDcn(read.hosts, options);
  out.transfers = static_cast<uint64_t>(report.transfers);
  for (const insight::DcnTransfer& t : report.worst) {
    if (out.flows.size() == max) break;
    exporter::HostFlow& f = out.flows.emplace_back();
    f.from_host = t.src_host;
    f.from_chip = t.src_chip;
    f.from_begin_ns = t.send_start_ns;
    f.to_host = t.dst_host;
    f.to_chip = t.dst_chip;
    f.to_end_ns = t.recv_done_end_ns;
  }
  return out;
}

}  // namespace podprof::aggregator
