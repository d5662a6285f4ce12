// Queries::Dcn: a stored capture's cross-slice (DCN) transfers, analysed when asked (nothing of
// it is stored: the analysis reads the capture's `XLA Ops` lines, which the store keeps).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "aggregator/api/dcn_reads.h"
#include "aggregator/api/queries.h"
#include "common/status_macros.h"
#include "insight/dcn.h"
#include "insight/dcn_cells.h"
#include "insight/insight_proto.h"

namespace podprof::aggregator {
namespace {

// What a capture without any host-transfer op answers.
constexpr char kNoDcnVerdict[] = "no cross-slice transfers in this capture";

// The median of `v` (reordered; the upper one of an even count, as insight/dcn's); 0 for none.
int64_t Median(std::vector<int64_t>& v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// What the culprits' rows show beside their judgement: the transfers a slice sent or a link
// carried, their median transit and their network excess.
struct Carried {
  std::vector<int64_t> transits;
  int64_t network_ns = 0;
};

// Keyed (source slice, destination slice) for links, (slice, -1) for slices.
using CarriedBy = std::map<std::pair<int, int>, Carried>;

void FillCulprit(const insight::DcnCulprit& c, CarriedBy& carried, v1::DcnCulprit* out) {
  out->set_src_slice(c.src_slice);
  out->set_dst_slice(c.dst_slice);
  out->set_times_last(static_cast<uint64_t>(c.times_last));
  out->set_instances(static_cast<uint64_t>(c.instances));
  out->set_expected_last(c.expected_last);
  out->set_caused_ns(c.caused_ns);
  out->set_excess_ns(c.excess_ns);
  out->set_p_value(c.p_value);
  out->set_named(c.named);
  auto it = carried.find({c.src_slice, c.dst_slice});
  if (it == carried.end()) return;
  out->set_transfers(it->second.transits.size());
  out->set_median_transit_ns(Median(it->second.transits));
  out->set_network_ns(it->second.network_ns);
}

void FillTransfer(const insight::DcnTransfer& t, v1::DcnTransfer* out) {
  out->set_rendezvous(t.rendezvous);
  out->set_step(t.step);
  out->set_src_slice(t.src_slice);
  out->set_dst_slice(t.dst_slice);
  out->set_src_host(t.src_host);
  out->set_dst_host(t.dst_host);
  out->set_src_chip(t.src_chip);
  out->set_dst_chip(t.dst_chip);
  out->set_send_start_ns(t.send_start_ns);
  out->set_send_done_end_ns(t.send_done_end_ns);
  out->set_recv_done_start_ns(t.recv_done_start_ns);
  out->set_recv_done_end_ns(t.recv_done_end_ns);
  out->set_consumer_ready_ns(t.consumer_ready_ns);
  out->set_transit_ns(t.transit_ns);
  out->set_wait_ns(t.wait_ns);
  out->set_producer_ns(t.producer_ns);
  out->set_network_ns(t.network_ns);
  out->set_producer_own_ns(t.producer_own_ns);
  out->set_runtime_latency_ns(t.runtime_latency_ns);
  out->set_transmission_budget_ns(t.transmission_budget_ns);
  out->set_delay_budget_ns(t.delay_budget_ns);
}

void FillCells(const insight::DcnCells& c, v1::DcnCells* out) {
  for (int s : c.slices) out->add_slices(s);
  for (const insight::DcnInstance& i : c.instances) {
    out->add_instance_rendezvous(i.rendezvous);
    out->add_instance_step(i.step);
    out->add_instance_start_ns(i.start_ns);
  }
  out->mutable_wait_ns()->Add(c.wait_ns.begin(), c.wait_ns.end());
  out->mutable_producer_ns()->Add(c.producer_ns.begin(), c.producer_ns.end());
  out->set_instances_left_out(c.instances_left_out);
  out->set_slices_left_out(c.slices_left_out);
}

}  // namespace

absl::StatusOr<v1::GetDcnResponse> Queries::Dcn(const v1::GetDcnRequest& request) {
  if (request.capture_id().empty()) return absl::InvalidArgumentError("capture_id is empty");
  const int top = request.top() == 0
                      ? kDefaultDcnTop
                      : static_cast<int>(std::min<uint32_t>(request.top(), kMaxDcnTop));
  // XProf's figures are each host's own, on its own clock; AnalyseDcn moves the runs onto the
  // aggregator's by each host's correction.
  ASSIGN_OR_RETURN(DcnHosts read,
                   ReadDcnHosts(reads_, request.capture_id(), storage::HostSelection(), true));
  std::vector<insight::DcnHost>& hosts = read.hosts;
  const size_t runs = read.runs;

  v1::GetDcnResponse out;
  out.set_capture_id(request.capture_id());
  out.set_named_after_instances(-1);
  if (hosts.empty()) {
    out.set_verdict(kNoDcnVerdict);
    if (request.cells()) out.mutable_cells();  // asked for, and empty
    return out;
  }
  // Every transfer (a receive is one run, so the runs bound them): each link's median transit
  // is taken over all of its transfers, not the worst.
  insight::DcnOptions options;
  options.max_worst = runs;
  insight::DcnReport report = insight::AnalyseDcn(hosts, options);
  hosts.clear();
  hosts.shrink_to_fit();

  CarriedBy by_link, by_slice;
  for (const insight::DcnTransfer& t : report.worst) {
    for (Carried* c : {&by_link[{t.src_slice, t.dst_slice}], &by_slice[{t.src_slice, -1}]}) {
      c->transits.push_back(t.transit_ns);
      c->network_ns += t.network_ns;
    }
  }
  out.set_verdict(report.verdict);
  out.set_runtime_network(report.runtime_network);
  out.set_expected_runtime_latency_ns(report.expected_runtime_latency_ns);
  out.set_runtime_budget(report.runtime_budget);
  out.set_slices(report.slices);
  out.set_transfers(static_cast<uint64_t>(report.transfers));
  out.set_unpaired(static_cast<uint64_t>(report.unpaired));
  out.set_instances(static_cast<uint64_t>(report.instances));
  out.set_expected_transit_ns(report.expected_transit_ns);
  out.set_named_after_instances(report.named_after_instances);
  for (const auto& x : report.xprof) insight::XprofRowToProto(x, out.add_xprof());
  for (const auto& c : report.producers) FillCulprit(c, by_slice, out.add_producers());
  for (const auto& c : report.links) FillCulprit(c, by_link, out.add_links());
  if (request.cells()) FillCells(insight::DcnSliceCells(report.worst), out.mutable_cells());
  const size_t shown = std::min(report.worst.size(), static_cast<size_t>(top));
  for (size_t i = 0; i < shown; ++i) FillTransfer(report.worst[i], out.add_worst());
  return out;
}

}  // namespace podprof::aggregator
