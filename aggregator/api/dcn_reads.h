// A stored capture's cross-slice (DCN) ops read for the analysis (insight/dcn.h), by its two
// readers: GetDcn (Queries::Dcn, dcn_query.cc) and the Perfetto export, whose arrows from each
// send to its receive are the analysis' pairs (export_stream.cc hands them to the writer:
// export/ does not analyse).
#ifndef PODPROF_AGGREGATOR_API_DCN_READS_H_
#define PODPROF_AGGREGATOR_API_DCN_READS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/api/store_reads.h"
#include "export/trace_export.h"
#include "insight/dcn.h"
#include "storage/rows.h"

namespace podprof::aggregator {

struct DcnHosts {
  std::vector<insight::DcnHost> hosts;  // those with DCN ops, in the store's host order
  size_t runs = 0;                      // their DCN op runs, together
};

// The DCN ops of the capture's hosts that `only` selects (its hosts and chip ordinals; its
// line kinds and counters are set here: the `XLA Ops` and `XLA Modules` lines, the kernels'
// texts, no counters). With `own_clock`, each host on its own clock with its correction beside
// it (XProf's figures are per host, on its clock); without, on the aggregator's clock with an
// identity correction, as the timeline exports have the events. Only each host's DCN runs are
// kept. NotFound for an unknown capture.
absl::StatusOr<DcnHosts> ReadDcnHosts(const StoreReads& reads, const std::string& capture_id,
                                      storage::HostSelection only, bool own_clock);

// Flows drawn at most: a viewer slows past about this many arrows.
inline constexpr size_t kMaxHostFlows = 100'000;

struct DcnFlows {
  std::vector<exporter::HostFlow> flows;  // the longest waits' first, at most the bound
  uint64_t transfers = 0;                 // paired transfers (flows.size() unless cut)
};

// A flow from each paired transfer's send (its begin on the sender's chip) to its recv-done
// (its end on the receiver's chip), on the aggregator's clock, for the hosts and chips `only`
// selects: AnalyseDcn's pairing over ReadDcnHosts(..., own_clock = false). Past `max`, the
// transfers with the longest waits keep theirs.
absl::StatusOr<DcnFlows> ReadDcnFlows(const StoreReads& reads, const std::string& capture_id,
                                      const storage::HostSelection& only,
                                      size_t max = kMaxHostFlows);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_DCN_READS_H_
