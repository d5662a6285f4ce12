#include "insight/insight_proto.h"

namespace podprof::insight {
namespace {

void RowsToProto(const std::vector<UtilizationRow>& rows,
                 google::protobuf::RepeatedPtrField<v1::UtilizationRow>* out) {
  for (const UtilizationRow& r : rows) {
    v1::UtilizationRow* row = out->Add();
    row->set_name(r.name);
    row->set_achieved(r.achieved);
    row->set_peak(r.peak);
    row->set_unit(r.unit);
  }
}

}  // namespace

void ProfileToProto(const KernelProfile& profile, v1::KernelProfile* out) {
  for (const auto& [unit, share] : profile.units) (*out->mutable_units())[unit] = share;
  out->set_cycles(profile.cycles);
  out->set_throttled(profile.throttled);
  out->set_power_manager(profile.power_manager);
  out->set_sync_wait(profile.sync_wait);
  out->set_missing(profile.missing);
  RowsToProto(profile.rows, out->mutable_rows());
  for (const DieProfile& d : profile.dies) {
    v1::KernelDieProfile* die = out->add_dies();
    die->set_die(d.die);
    for (const auto& [unit, share] : d.units) (*die->mutable_units())[unit] = share;
    die->set_cycles(d.cycles);
    die->set_throttled(d.throttled);
    die->set_power_manager(d.power_manager);
    die->set_missing(d.missing);
    RowsToProto(d.rows, die->mutable_rows());
  }
}

void VerdictToProto(const KernelFacts& facts, const Verdict& verdict, v1::KernelInsight* out) {
  out->set_verdict(BoundName(verdict.bound));
  out->set_verdict_text(verdict.text);
  out->set_cause(verdict.cause);
  out->set_arithmetic_intensity(verdict.intensity);
  out->set_ridge_point(verdict.ridge);
  out->set_roofline_fraction(verdict.roofline_fraction);
  out->set_wait_fraction(verdict.wait_fraction);
  out->set_wait_ps(facts.wait_ps);
  out->set_straggler(facts.straggler);
  out->set_has_counters(verdict.has_counters);
  out->set_stall_fraction(verdict.stall_fraction);
  out->set_dominant_stall(verdict.dominant_stall);
  for (const auto& [name, mean] : facts.gauges) (*out->mutable_utilization())[name] = mean;
  if (verdict.profile.present) ProfileToProto(verdict.profile, out->mutable_kernel_profile());
}

void XprofRowToProto(const XprofRendezvousRow& x, v1::DcnXprofRow* out) {
  out->set_host_name(x.host);
  out->set_rendezvous(x.rendezvous);
  out->set_send_op_name(x.send_op_name);
  out->set_recv_op_name(x.recv_op_name);
  out->set_transfer_type(x.transfer_type);
  out->set_occurrences(x.occurrences);
  out->set_slack_us(x.slack_us);
  out->set_observed_duration_us(x.observed_duration_us);
  out->set_stall_duration_us(x.stall_duration_us);
  out->set_send_duration_us(x.send_duration_us);
  out->set_send_done_duration_us(x.send_done_duration_us);
  out->set_recv_done_duration_us(x.recv_done_duration_us);
  out->set_recv_duration_us(x.recv_duration_us);
  out->set_recv_stall_us_as_xprof(x.recv_stall_us_as_xprof);
  out->set_bytes_transmitted(x.bytes_transmitted);
}

}  // namespace podprof::insight
