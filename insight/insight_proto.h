// A verdict in the API's form (podprof.v1.KernelInsight). The aggregator's answers and
// `podprof inspect` both fill it here, so that a kernel is described the same way whether it
// came from a stored capture or from one file.
#ifndef PODPROF_INSIGHT_INSIGHT_PROTO_H_
#define PODPROF_INSIGHT_INSIGHT_PROTO_H_

#include "insight/dcn.h"
#include "insight/verdict.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::insight {

// Sets the verdict, its figures, the collective wait and the counter gauges of `out` from
// `facts` and Decide(facts). Totals of running counters and the covered time are the caller's:
// only the store knows them.
void VerdictToProto(const KernelFacts& facts, const Verdict& verdict, v1::KernelInsight* out);
// A kernel profile's figures (present profiles only).
void ProfileToProto(const KernelProfile& profile, v1::KernelProfile* out);
// One host's XProf `megascale_stats` row (HostXprofFigures): the aggregator's GetDcn and
// `podprof inspect --megascale` fill it here alike.
void XprofRowToProto(const XprofRendezvousRow& x, v1::DcnXprofRow* out);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_INSIGHT_PROTO_H_
