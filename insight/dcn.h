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
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trace/clock_correction.h"
#include "trace/model.h"

namespace podprof::insight {

enum class DcnOpKind { kSend, kSendDone, kRecv, kRecvDone };

// What one host-transfer instruction's HLO text says; parsed once per kernel definition.
struct DcnInstruction {
  DcnOpKind kind = DcnOpKind::kSend;
  std::string name;             // "send.101" (the kernel's short name)
  std::string rendezvous;       // `_xla_host_transfer_rendezvous`; empty when absent
  bool has_rendezvous = false;  // present (XProf tells an absent name from an empty one)
  std::string transfer_type;    // `_xla_megascale_transfer_type`, e.g. "ONE_TO_ONE"; "" absent
  int64_t channel_id = 0;       // `channel_id=`; 0 when absent (as XProf takes it)
  // The shape's size as XProf counts it: an array's bytes (elements x element bytes, sub-byte
  // types packed only where the layout says `E(n)`), or a tuple's elements summed (a token 0,
  // u32[] 4); 0 when the shape cannot be read.
  int64_t bytes = 0;
  // (source chip, destination chip) by Chip::global_id; empty when the text has none.
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;
};

// The kind of a host-transfer op from its `hlo_category`; false for any other kernel.
bool DcnOpKindOfCategory(const std::string& category, DcnOpKind* kind);
// Parses `k` (category, name, hlo_text); false when it is not a host-transfer op: its category
// contains neither `host send` nor `host recv` (XProf's test), or neither the text's opcode nor
// the category's exact name gives the kind. The kind is the text's opcode where it can be read
// (XProf's is the instruction's), else the category's. Any text is safe: one pass, bounded
// nesting; a part that cannot be read is left absent.
bool ParseDcnInstruction(const trace::KernelDef& k, DcnInstruction* out);

// One execution of a host-transfer op on one chip. Its start is kept as its line's start plus
// the event's offset, as the capture has it: ps since the epoch do not fit 64 bits, and XProf's
// figures come from the two parts' own integer and double arithmetic.
struct DcnOpRun {
  int32_t instruction = 0;  // index into DcnHost::instructions
  int32_t chip = 0;         // index into DcnHost::chips
  int64_t base_ns = 0;      // the line's start on the host's own clock, ns since the epoch
  int64_t offset_ps = 0;    // the event's start after base_ns (XEvent.offset_ps)
  int64_t duration_ps = 0;
  // The line's `timestamp_ns` as the XSpace holds it, which XProf reads: a capture with a
  // `Task Environment` plane stores line times relative to the profile's start (the reader
  // makes them absolute in base_ns), an older one absolute.
  int64_t xprof_line_ns = 0;
  // Inside an `XLA Modules` event of its chip as XProf's context tracker finds it (over every
  // op of the line, in line order); XProf skips the others.
  bool xprof_in_module = true;

  // On the host's clock, ns since the epoch (floor).
  int64_t StartNs() const { return base_ns + FloorDiv(offset_ps, 1000); }
  int64_t EndNs() const { return base_ns + FloorDiv(offset_ps + duration_ps, 1000); }

 private:
  static int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }
};

// What the Megascale runtime measured of one transfer a chip received (docs/MEGASCALE.md, "The
// runtime's action graph"): the data's arrival and its network latency, with the budgets the
// runtime ran it under; ns, -1 where the capture does not say.
struct DcnRuntimeSample {
  int64_t at_ns = 0;        // the arrival (the `NetworkReceive END`'s end), on the host's own clock
  int64_t latency_ns = -1;  // `network_transport_latency_us`
  int64_t transmission_budget_ns = -1;
  int64_t delay_budget_ns = -1;
};

// Per chip (index into DcnHost::chips), per rendezvous name: the samples in time order.
using DcnRuntimeSamples = std::vector<std::map<std::string, std::vector<DcnRuntimeSample>>>;

// The runtime's samples of `capture`, from its `megascale/<rendezvous>/...` counter series
// (trace/megascale_trace.h); empty when it has none.
DcnRuntimeSamples DcnRuntimeFromCapture(const trace::HostCapture& capture);

// One host's DCN ops, as read from its stored capture.
struct DcnHost {
  std::string host;
  int slice = -1;                     // the host's slice (HostRow::slice); -1 when unknown
  trace::ClockCorrection correction;  // host clock -> aggregator clock
  // How far that correction may be off (HostRow::clock_uncertainty_ns). Hosts of one slice are
  // tied by their collectives; across slices only by probes and by the slices' own device
  // mappings (docs/MEGASCALE.md, "Clocks across slices"), so this is what a cross-slice
  // difference of times cannot vouch for.
  int64_t clock_uncertainty_ns = 0;
  std::vector<trace::Chip> chips;  // ordinal and global_id are used
  std::vector<DcnInstruction> instructions;
  std::vector<DcnOpRun> runs;  // by chip, then start (line order where starts tie)
  DcnRuntimeSamples runtime;   // what the runtime measured; empty when the capture has none
};

// The host's DCN ops from its capture: the TPU chips' `XLA Ops` lines (blocks still encoded
// are skipped: decode them first, trace/columns.h), on the host's own clock; a host without
// any has no runs. Only the kernels ParseDcnInstruction accepts are kept, each once. With them
// the runtime's samples (DcnRuntimeFromCapture; series still encoded are skipped too).
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
  uint64_t recv_duration_us = 0;        // corrected: the mean recv duration in microseconds
  uint64_t recv_stall_us_as_xprof = 0;  // XProf's, divided by 10^6 twice (0 below 1 s)
  uint64_t bytes_transmitted = 0;       // the last instance's, as XProf keeps it
};

// XProf's per-rendezvous figures for one host, by rendezvous name (XProf lists them in its hash
// map's order, which is no order: compare by name). What XProf reads that a DcnHost lacks:
// - the group size (`dcn_collective_info` on the send) is taken as 1 for a ONE_TO_ONE send
//   (its one_to_one_groups) and 0 otherwise, which XProf gives a send without the stat: bytes
//   are XProf's for ONE_TO_ONE transfers and 0 for the others;
// - the instruction is taken from its kernel's text, not looked up by the containing module's
//   name in the `/host:metadata` HLO (a capture whose text and HLO disagree differs);
// - `host_stall` is absent, as in the tool (no DCN host plane is given to it).
std::vector<XprofRendezvousRow> HostXprofFigures(const DcnHost& host);

// One receive paired with the send that fed it, on the aggregator's clock.
struct DcnTransfer {
  std::string rendezvous;
  // The instance's index among the rendezvous' instances in the capture, in time order, from 0:
  // the receiver's own count of its recv-dones of the rendezvous, aligned across chips (a chip
  // whose capture starts an instance later starts its count at the instance nearest in time to
  // its first).
  int64_t step = -1;
  int src_slice = -1, dst_slice = -1;
  std::string src_host, dst_host;
  int src_chip = 0, dst_chip = 0;  // ordinals
  int64_t send_start_ns = 0;       // the sender's send
  int64_t send_done_end_ns = 0;    // the sender's send-done end
  int64_t recv_done_start_ns = 0;  // the receiver's recv-done
  int64_t recv_done_end_ns = 0;
  int64_t consumer_ready_ns = 0;  // the receiver's own send start: when it was ready
  // What the runtime measured of this transfer on the receiving chip (its latest sample of the
  // rendezvous after the chip's previous recv-done of it and by this one's end); -1 for none.
  int64_t runtime_latency_ns = -1;
  int64_t transmission_budget_ns = -1;
  int64_t delay_budget_ns = -1;
  int64_t transit_ns = 0;  // recv_done_end - send_done_end
  int64_t wait_ns = 0;     // the receiver's recv-done duration
  // The two ends' clock uncertainties summed: how far their times may be off each other.
  int64_t clock_uncertainty_ns = 0;
  // Of the wait, the network's part. When the transfer has the runtime's latency and the report
  // uses them (DcnReport::runtime_network): that latency beyond the expected one (the transfer's
  // transmission budget, else DcnReport::expected_runtime_latency_ns), within the wait, which
  // needs no clock across slices. Otherwise: what came after the data was due. Due:
  // the send-done's end + the expected transit + the clock uncertainty, or, for a receiver that
  // came later than that, its recv-done's start + the expected copy
  // (DcnReport::expected_copy_ns): a late receiver's own copy is not the network's, and what
  // the two clocks cannot vouch for is nobody's.
  int64_t network_ns = 0;
  // Of the rest of the wait, the producer's lateness: its send start after consumer_ready, less
  // the clock uncertainty.
  int64_t producer_ns = 0;
  // Of producer_ns, what the producer did not inherit: less the time its chip itself waited in
  // recv-dones since its previous send of this rendezvous. A late slice makes its receivers
  // late senders in turn (the ring passes the delay on); only the first is late on its own.
  int64_t producer_own_ns = 0;
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
  // The waiting it caused over its instances: a slice's producer_own_ns, a link's network_ns.
  int64_t caused_ns = 0;
  // A link's median transit beyond the expected transit (with the runtime's figures, its median
  // runtime latency beyond the expected one).
  int64_t excess_ns = 0;
  double p_value = 1;
  bool named = false;
};

struct DcnReport {
  int slices = 0;  // distinct slices seen
  int64_t transfers = 0;
  int64_t unpaired = 0;             // receives whose sender's send was not found (capture edges)
  int64_t instances = 0;            // (rendezvous, step) instances judged, with known slices
  int64_t expected_transit_ns = 0;  // the capture's nominal transit (see AnalyseDcn)
  // Every receiving host carried the runtime's latencies: the network parts and the links'
  // verdicts come from them (a transfer that missed its sample at the capture's edge keeps the
  // transit's split and says nothing of its link), against the expected runtime latency: the
  // median transmission budget when every sampled transfer has one, else the smallest of the
  // links' median latencies.
  bool runtime_network = false;
  int64_t expected_runtime_latency_ns = 0;
  bool runtime_budget = false;  // expected_runtime_latency_ns is the runtime's budget
  // How far the clocks may have moved it: the median clock uncertainty of the transfers it
  // was taken from. A transfer's data is due only after both this and its own.
  int64_t expected_transit_uncertainty_ns = 0;
  // What a recv-done takes once its data is there: the 10th percentile of the recv-dones that
  // started after their data was due; 0 when none did.
  int64_t expected_copy_ns = 0;
  // The network's noise: the interquartile range of the transits of the link with the smallest
  // median. An instance whose largest network excess is no more than this has no last link.
  int64_t network_floor_ns = 0;
  // The median of the transfers' clock uncertainties. A link is slow only when its median
  // transit is beyond the expected one by more than the floor, its own transfers' median
  // uncertainty and the expected transit's.
  int64_t clock_uncertainty_ns = 0;
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
// stands out against the others without any runtime figure; with no link of known slices, the
// median over all transfers. Producers are judged on producer_own_ns. Transfers touching a host
// of unknown slice (-1) are paired and listed but judge nothing.
DcnReport AnalyseDcn(const std::vector<DcnHost>& hosts, const DcnOptions& options = {});

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_DCN_H_
