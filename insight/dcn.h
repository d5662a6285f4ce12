// Cross-slice (DCN) transfers of a multi-slice job: every send paired with its receive across
// hosts and slices on the aggregator's clock, XProf's per-host `megascale_stats` figures for each
// end, and who made the receivers wait: a late producer or the network.
//
// What a capture carries (docs/MEGASCALE.md, "podprof's multi-slice layout"): on each chip's
// `XLA Ops` line the four host-transfer ops of a rendezvous, with `hlo_category` `host send`,
// `host send-done`, `host recv` and `host recv-done`; their HLO text names the rendezvous
// (frontend attribute `_xla_host_transfer_rendezvous`), the transfer type
// (`_xla_megascale_transfer_type`), the channel (`channel_id=`), the buffer's shape, and who sends
// to whom (`_xla_send_recv_source_target_pairs`, pairs of pod-wide chip ids, Chip::global_id).
//
// Two views of the same ops:
// - XProf's, per host (HostXprofFigures): the state machine of `xspace_to_dcn_slack_analysis.cc`
//   over chip ordinal 0's ops on the host's own clock, with its integer truncations and its unit
//   bug (the recv stall divided by 10^6 twice) reproduced in `recv_stall_us_as_xprof`, the
//   corrected figure beside it. Equal to what `megascale_stats` reports for that host.
// - podprof's, pod-wide (AnalyseDcn): each receive paired with the send that fed it, both on the
//   aggregator's clock; the transit from the sender's send-done end to the receiver's recv-done
//   end; the receiver's wait (its recv-done) split into the producer's lateness, the network's
//   excess and the transfer's own nominal time; per slice and per link, the evidence rule of
//   today's stragglers (insight/evidence.h) before anything is named.
#ifndef PODPROF_INSIGHT_DCN_H_
#define PODPROF_INSIGHT_DCN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trace/clock_correction.h"
#include "trace/model.h"

namespace podprof::insight {

enum class DcnOpKind { kSend, kSendDone, kRecv, kRecvDone };

// What one host-transfer instruction's HLO text says; parsed once per kernel definition.
struct DcnInstruction {
  DcnOpKind kind = DcnOpKind::kSend;
  std::string name;        // "send.101" (the kernel's short name)
  std::string rendezvous;  // `_xla_host_transfer_rendezvous`; empty when absent
  std::string transfer_type;  // `_xla_megascale_transfer_type`, e.g. "ONE_TO_ONE"
  int64_t channel_id = 0;
  int64_t bytes = 0;  // the buffer's size: an array's bytes, or the sum over a tuple's arrays
  // (source chip, destination chip) by Chip::global_id; empty when the text has none.
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;
};

// The kind of a host-transfer op from its `hlo_category`; false for any other kernel.
bool DcnOpKindOfCategory(const std::string& category, DcnOpKind* kind);
// Parses `k` (category, name, hlo_text); false when it is not a host-transfer op.
bool ParseDcnInstruction(const trace::KernelDef& k, DcnInstruction* out);

// One execution of a host-transfer op on one chip.
struct DcnOpRun {
  int32_t instruction = 0;  // index into DcnHost::instructions
  int32_t chip = 0;         // index into DcnHost::chips
  int64_t start_ps = 0;     // on the host's own clock: ps since the Unix epoch
  int64_t duration_ps = 0;
};

// One host's DCN ops, as read from its stored capture.
struct DcnHost {
  std::string host;
  int slice = -1;  // the host's slice (HostRow::slice); -1 when unknown
  trace::ClockCorrection correction;  // host clock -> aggregator clock
  std::vector<trace::Chip> chips;     // ordinal and global_id are used
  std::vector<DcnInstruction> instructions;
  std::vector<DcnOpRun> runs;  // by chip, then start
};

// The host's DCN ops from its capture (the `XLA Ops` blocks, which must be decoded, on the
// host's own clock); a host without any has no runs.
DcnHost DcnHostFromCapture(const trace::HostCapture& capture, int slice,
                           const trace::ClockCorrection& correction);

// One rendezvous of one host as XProf's `megascale_stats` reports it (DcnSlackSummary, all in
// whole microseconds, truncated as XProf truncates them), from chip ordinal 0 only.
struct XprofRendezvousRow {
  std::string host;
  std::string rendezvous;
  std::string send_op_name, recv_op_name, transfer_type;
  uint64_t occurrences = 0;
  uint64_t slack_us = 0;
  uint64_t observed_duration_us = 0;
  uint64_t stall_duration_us = 0;
  uint64_t send_duration_us = 0, send_done_duration_us = 0, recv_done_duration_us = 0;
  uint64_t recv_duration_us = 0;         // corrected: the mean recv duration in microseconds
  uint64_t recv_stall_us_as_xprof = 0;   // XProf's, divided by 10^6 twice (0 below 1 s)
  uint64_t bytes_transmitted = 0;        // the last instance's, as XProf keeps it
};

// XProf's per-rendezvous figures for one host, in the order XProf lists them (by rendezvous
// name).
std::vector<XprofRendezvousRow> HostXprofFigures(const DcnHost& host);

// One receive paired with the send that fed it, on the aggregator's clock.
struct DcnTransfer {
  std::string rendezvous;
  // The instance's index among the rendezvous' instances in the capture, in time order, from 0.
  int64_t step = -1;
  int src_slice = -1, dst_slice = -1;
  std::string src_host, dst_host;
  int src_chip = 0, dst_chip = 0;  // ordinals
  int64_t send_start_ns = 0;       // the sender's send
  int64_t send_done_end_ns = 0;    // the sender's send-done end
  int64_t recv_done_start_ns = 0;  // the receiver's recv-done
  int64_t recv_done_end_ns = 0;
  int64_t consumer_ready_ns = 0;   // the receiver's own send start: when it was ready
  int64_t transit_ns = 0;          // recv_done_end - send_done_end
  int64_t wait_ns = 0;             // the receiver's recv-done duration
  int64_t producer_ns = 0;         // of the wait: the producer's lateness
  int64_t network_ns = 0;          // of the wait: transit beyond the expected transit
};

// A slice, or a link (source slice -> destination slice), judged by the stragglers' rule: per
// instance, the slice whose producers made receivers wait longest (or the link whose network
// excess was largest) is "last"; chance is 1 / the candidates; named when significantly often
// last and material (insight/evidence.h).
struct DcnCulprit {
  int src_slice = -1;  // the slice (late producer), or the link's source
  int dst_slice = -1;  // the link's destination; -1 for a slice
  int64_t times_last = 0, instances = 0;
  double expected_last = 0;
  int64_t caused_ns = 0;  // the waiting it caused over its instances
  double p_value = 1;
  bool named = false;
};

struct DcnReport {
  int slices = 0;  // distinct slices seen
  int64_t transfers = 0;
  int64_t expected_transit_ns = 0;  // the capture's nominal transit (see AnalyseDcn)
  std::vector<XprofRendezvousRow> xprof;  // every host's, by host then rendezvous
  std::vector<DcnCulprit> producers;      // one per slice, most caused first
  std::vector<DcnCulprit> links;          // one per link, most caused first
  std::vector<DcnTransfer> worst;         // the longest waits, worst first
  // One line: the named late slice and/or slow link with the evidence, or "no DCN culprit".
  std::string verdict;
  // The instance at which a culprit became significant, counted over the capture's instances
  // in time order (how soon it would have been named); -1 when nothing is named.
  int64_t named_after_instances = -1;
};

struct DcnOptions {
  size_t max_worst = 20;
};

// The pod-wide analysis over every host's DCN ops. The expected transit is the smallest of
// the links' median transits (the healthiest link shows what the network does), so a slow link
// stands out against the others without any runtime figure.
DcnReport AnalyseDcn(const std::vector<DcnHost>& hosts, const DcnOptions& options = {});

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_DCN_H_
