// What insight/dcn.cc hands insight/dcn_judge.cc: the pod's paired transfers, judged by the
// stragglers' evidence rule into culprits and a verdict. Not part of the library's interface.
#ifndef PODPROF_INSIGHT_DCN_INTERNAL_H_
#define PODPROF_INSIGHT_DCN_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "insight/dcn.h"

namespace podprof::insight::dcn_internal {

// Fills report->producers, links, instances, verdict and named_after_instances from
// `transfers` (their producer_own_ns, network_ns, transit_ns already set) and
// report->expected_transit_ns. Transfers with a slice of -1 at either end are left out.
void JudgeDcn(const std::vector<DcnTransfer>& transfers, DcnReport* report);

// The runtime's sample of a transfer received by chip `chip` of `h` in `rendezvous`: its latest
// with a latency that arrived after `after_ns` and by `until_ns` (aggregator clock: the chip's
// previous recv-done end of the rendezvous, and this one's end); nullptr for none.
const DcnRuntimeSample* RuntimeSampleFor(const DcnHost& h, size_t chip,
                                         const std::string& rendezvous, int64_t after_ns,
                                         int64_t until_ns);

// The element at rank floor(q x (n - 1)); 0 for none.
int64_t Quantile(std::vector<int64_t> v, double q);
int64_t Median(std::vector<int64_t> v);

}  // namespace podprof::insight::dcn_internal

#endif  // PODPROF_INSIGHT_DCN_INTERNAL_H_
