// XProf's `megascale_stats` figures for one host: DcnTracker of
// xprof/convert/xspace_to_dcn_slack_analysis.cc (openxla/xprof a27d00aa), its integer and
// double arithmetic reproduced step by step, over the DcnHost's chip ordinal 0.
//
// Event times as XEventVisitor gives them (xla/tsl/profiler/utils/xplane_visitor.h):
// TimestampNs() = line.timestamp_ns + offset_ps / 1e3, an int64 plus a double, truncated back
// to int64 (at epoch times a double's step is 256 ns, so the sum is rounded); DurationNs() =
// duration_ps / 1e3 as a double; EndTimestampNs() = TimestampNs() + DurationNs(), truncated.
// Every DcnSlack and DcnSlackSummary field is a uint64: each double stored into one is
// truncated, each subtraction wraps.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "insight/dcn.h"

namespace podprof::insight {
namespace {

// tsl/profiler/utils/math_utils.h.
double PicoToNano(uint64_t p) { return static_cast<double>(p) / 1E3; }
double PicoToMicro(uint64_t p) { return static_cast<double>(p) / 1E6; }
double NanoToMicro(uint64_t n) { return static_cast<double>(n) / 1E3; }
double SafeDivide(double dividend, double divisor) {
  constexpr double kEpsilon = 1.0E-10;
  if ((-kEpsilon < divisor) && (divisor < kEpsilon)) return 0.0;
  return dividend / divisor;
}

// A double stored into a uint64 proto field: truncated. (A negative or too large value is
// undefined in C++; none arises from a capture's times, but a hostile one must not crash.)
uint64_t U64(double d) {
  if (!(d >= 0)) return 0;
  if (d >= 18446744073709551615.0) return UINT64_MAX;
  return static_cast<uint64_t>(d);
}

int64_t TimestampNs(const DcnOpRun& r) {
  const double t =
      static_cast<double>(r.xprof_line_ns) + PicoToNano(static_cast<uint64_t>(r.offset_ps));
  if (!(t > -9.2e18 && t < 9.2e18)) return 0;
  return static_cast<int64_t>(t);
}
double DurationNs(const DcnOpRun& r) { return PicoToNano(static_cast<uint64_t>(r.duration_ps)); }
int64_t EndTimestampNs(const DcnOpRun& r) {
  const double t = static_cast<double>(TimestampNs(r)) + DurationNs(r);
  if (!(t > -9.2e18 && t < 9.2e18)) return 0;
  return static_cast<int64_t>(t);
}

struct OpInstance {
  uint64_t duration_ps = 0;
};

// DcnOpState.
struct OpState {
  uint64_t start_time = 0;
  uint64_t overlapping_duration = 0;
  std::string transfer_type;
  uint64_t stall_duration_ns = 0;
  std::string send_op_name;
  int replica_group_size = 0;
  OpInstance send, send_done, recv, recv_done;
};

// DcnSlack: one instance.
struct Slack {
  std::string rendezvous, transfer_type, recv_op_name, send_op_name;
  uint64_t send_start_time_us = 0, recv_done_end_time_us = 0, slack_us = 0;
  uint64_t bytes_transmitted_over_network = 0, stall_duration_us = 0;
  OpInstance send, send_done, recv, recv_done;
};

// DcnTracker::ComputeTransmittedDataSize, with the recv-done's size.
uint64_t ComputeTransmittedDataSize(int64_t recv_buffer_size, int group_size,
                                    const std::string& transfer_type) {
  if (group_size == 0) return 0;
  const int64_t g = group_size;
  if (transfer_type == "ONE_TO_ONE") return static_cast<uint64_t>(g * recv_buffer_size);
  if (transfer_type == "ALL_GATHER") {
    return U64(SafeDivide(static_cast<double>((g - 1) * recv_buffer_size), static_cast<double>(g)));
  }
  if (transfer_type == "ALL_REDUCE") {
    return U64(2 * SafeDivide(static_cast<double>(g - 1), static_cast<double>(g)) *
               static_cast<double>(recv_buffer_size));
  }
  if (transfer_type == "ALL_TO_ALL") {
    return U64(SafeDivide(static_cast<double>(g - 1), static_cast<double>(g)) *
               static_cast<double>(recv_buffer_size));
  }
  if (transfer_type == "REDUCE_SCATTER") {
    return static_cast<uint64_t>(recv_buffer_size * (g - 1));
  }
  return 0;
}

// DcnTracker::VisitOp over chip ordinal 0's ops, in line order.
class Tracker {
 public:
  void VisitOp(const DcnInstruction& instr, const DcnOpRun& run) {
    std::string rendezvous_name;
    if (instr.has_rendezvous) {
      rendezvous_name = instr.rendezvous;
      channel_to_rendezvous_[instr.channel_id] = rendezvous_name;
    } else {
      auto it = channel_to_rendezvous_.find(instr.channel_id);
      if (it == channel_to_rendezvous_.end()) return;  // no send/recv seen on the channel yet
      rendezvous_name = it->second;
    }
    OpState& op_state = states_[rendezvous_name];
    op_state.stall_duration_ns =
        U64(static_cast<double>(op_state.stall_duration_ns) + DurationNs(run));
    const uint64_t duration_ps = static_cast<uint64_t>(run.duration_ps);
    switch (instr.kind) {
      case DcnOpKind::kSend:
        op_state.start_time = static_cast<uint64_t>(TimestampNs(run));
        op_state.transfer_type = instr.transfer_type;
        op_state.overlapping_duration = 0;
        op_state.stall_duration_ns = U64(DurationNs(run));
        op_state.send_op_name = instr.name;
        op_state.send.duration_ps = duration_ps;
        op_state.replica_group_size = ReplicaGroupSize(rendezvous_name, instr);
        break;
      case DcnOpKind::kRecv:
        op_state.recv.duration_ps = duration_ps;
        break;
      case DcnOpKind::kSendDone:
        op_state.send_done.duration_ps = duration_ps;
        break;
      case DcnOpKind::kRecvDone:
        op_state.recv_done.duration_ps = duration_ps;
        if (op_state.start_time != 0) {
          Slack& a = slacks_.emplace_back();
          a.rendezvous = rendezvous_name;
          a.transfer_type = op_state.transfer_type;
          a.send_start_time_us = U64(NanoToMicro(op_state.start_time));
          a.recv_done_end_time_us = U64(NanoToMicro(static_cast<uint64_t>(EndTimestampNs(run))));
          a.slack_us = U64(NanoToMicro(static_cast<uint64_t>(TimestampNs(run)) -
                                       op_state.start_time - op_state.overlapping_duration));
          a.bytes_transmitted_over_network = ComputeTransmittedDataSize(
              instr.bytes, op_state.replica_group_size, op_state.transfer_type);
          a.stall_duration_us = U64(NanoToMicro(op_state.stall_duration_ns));
          a.recv_op_name = instr.name;
          a.send_op_name = op_state.send_op_name;
          a.send = op_state.send;
          a.recv = op_state.recv;
          a.send_done = op_state.send_done;
          a.recv_done = op_state.recv_done;
        }
        break;
    }
    // UpdateActiveOps takes a uint64: the duration in ns, truncated, onto every rendezvous.
    const uint64_t d = U64(DurationNs(run));
    for (auto& [name, s] : states_) s.overlapping_duration += d;
  }

  const std::vector<Slack>& slacks() const { return slacks_; }

 private:
  // GetReplicaGroupSize: read at a rendezvous' first send and kept. XProf reads the send's
  // `dcn_collective_info` (1 for one_to_one_groups, the first endpoint group's size, else 0);
  // a KernelDef does not carry it, so a ONE_TO_ONE send counts as one-to-one groups.
  int ReplicaGroupSize(const std::string& rendezvous, const DcnInstruction& send) {
    auto [it, inserted] = group_sizes_.emplace(rendezvous, 0);
    if (inserted) it->second = send.transfer_type == "ONE_TO_ONE" ? 1 : 0;
    return it->second;
  }

  std::map<std::string, OpState> states_;
  std::map<int64_t, std::string> channel_to_rendezvous_;
  std::map<std::string, int> group_sizes_;
  std::vector<Slack> slacks_;
};

}  // namespace

std::vector<XprofRendezvousRow> HostXprofFigures(const DcnHost& host) {
  int chip0 = -1;
  for (size_t c = 0; c < host.chips.size(); ++c) {
    if (host.chips[c].kind == trace::DeviceKind::kTpu && host.chips[c].ordinal == 0) {
      chip0 = static_cast<int>(c);
      break;
    }
  }
  if (chip0 < 0) return {};
  Tracker tracker;
  for (const DcnOpRun& run : host.runs) {
    if (run.chip != chip0 || !run.xprof_in_module) continue;
    if (run.instruction < 0 || static_cast<size_t>(run.instruction) >= host.instructions.size()) {
      continue;
    }
    tracker.VisitOp(host.instructions[static_cast<size_t>(run.instruction)], run);
  }

  // SummarizeDcnSlackAnalysis: sums into uint64 fields one instance at a time, then means.
  struct Sum {
    XprofRendezvousRow row;
    uint64_t recv_us = 0;  // the corrected recv sum, as the other durations are summed
  };
  std::map<std::string, Sum> summary;
  for (const Slack& a : tracker.slacks()) {
    Sum& sum = summary[a.rendezvous];
    XprofRendezvousRow& s = sum.row;
    s.slack_us += a.slack_us;
    s.occurrences += 1;
    s.rendezvous = a.rendezvous;
    s.transfer_type = a.transfer_type;
    s.bytes_transmitted = a.bytes_transmitted_over_network;
    s.stall_duration_us += a.stall_duration_us;
    s.observed_duration_us =
        s.observed_duration_us + a.recv_done_end_time_us - a.send_start_time_us;
    s.recv_op_name = a.recv_op_name;
    s.send_op_name = a.send_op_name;
    s.send_duration_us =
        U64(static_cast<double>(s.send_duration_us) + PicoToMicro(a.send.duration_ps));
    // The unit bug: divided by 1e6 once more, and truncated at every addition.
    s.recv_stall_us_as_xprof =
        U64(static_cast<double>(s.recv_stall_us_as_xprof) + PicoToMicro(a.recv.duration_ps) / 1E6);
    sum.recv_us = U64(static_cast<double>(sum.recv_us) + PicoToMicro(a.recv.duration_ps));
    s.send_done_duration_us =
        U64(static_cast<double>(s.send_done_duration_us) + PicoToMicro(a.send_done.duration_ps));
    s.recv_done_duration_us =
        U64(static_cast<double>(s.recv_done_duration_us) + PicoToMicro(a.recv_done.duration_ps));
  }
  std::vector<XprofRendezvousRow> rows;
  rows.reserve(summary.size());
  for (auto& [name, sum] : summary) {
    XprofRendezvousRow& s = sum.row;
    const double n = static_cast<double>(s.occurrences);
    auto mean = [n](uint64_t total) { return U64(SafeDivide(static_cast<double>(total), n)); };
    s.host = host.host;
    s.slack_us = mean(s.slack_us);
    s.stall_duration_us = mean(s.stall_duration_us);
    s.observed_duration_us = mean(s.observed_duration_us);
    s.send_done_duration_us = mean(s.send_done_duration_us);
    s.recv_done_duration_us = mean(s.recv_done_duration_us);
    s.send_duration_us = mean(s.send_duration_us);
    s.recv_stall_us_as_xprof = mean(s.recv_stall_us_as_xprof);
    s.recv_duration_us = mean(sum.recv_us);
    rows.push_back(std::move(s));
  }
  return rows;
}

}  // namespace podprof::insight
