#include "report/dcn_rows.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/json_text.h"
#include "nlohmann/json.hpp"
#include "report/format.h"
#include "report/table.h"

namespace podprof::report {
namespace {

using Json = nlohmann::ordered_json;  // keys in the order written: the CSV's columns follow it

// "0->1": a link as the table and the rows name it.
std::string LinkName(const v1::DcnCulprit& c) {
  return absl::StrCat(c.src_slice(), "->", c.dst_slice());
}

Json LinkRow(const v1::DcnCulprit& c) {
  return {{"link", LinkName(c)},
          {"src_slice", c.src_slice()},
          {"dst_slice", c.dst_slice()},
          {"transfers", c.transfers()},
          {"median_transit_ns", c.median_transit_ns()},
          {"network_ns", c.network_ns()},
          {"excess_ns", c.excess_ns()},
          {"times_last", c.times_last()},
          {"instances", c.instances()},
          {"expected_last", c.expected_last()},
          {"caused_ns", c.caused_ns()},
          {"p_value", c.p_value()},
          {"named", c.named()}};
}

Json ProducerRow(const v1::DcnCulprit& c) {
  return {{"slice", c.src_slice()},
          {"transfers", c.transfers()},
          {"median_transit_ns", c.median_transit_ns()},
          {"times_last", c.times_last()},
          {"instances", c.instances()},
          {"expected_last", c.expected_last()},
          {"caused_ns", c.caused_ns()},
          {"p_value", c.p_value()},
          {"named", c.named()}};
}

Json TransferRow(const v1::DcnTransfer& t) {
  return {{"rendezvous", t.rendezvous()},
          {"step", t.step()},
          {"src_slice", t.src_slice()},
          {"src_host", t.src_host()},
          {"src_chip", t.src_chip()},
          {"dst_slice", t.dst_slice()},
          {"dst_host", t.dst_host()},
          {"dst_chip", t.dst_chip()},
          {"send_start_ns", t.send_start_ns()},
          {"send_done_end_ns", t.send_done_end_ns()},
          {"recv_done_start_ns", t.recv_done_start_ns()},
          {"recv_done_end_ns", t.recv_done_end_ns()},
          {"consumer_ready_ns", t.consumer_ready_ns()},
          {"transit_ns", t.transit_ns()},
          {"wait_ns", t.wait_ns()},
          {"producer_ns", t.producer_ns()},
          {"producer_own_ns", t.producer_own_ns()},
          {"network_ns", t.network_ns()},
          {"runtime_latency_ns", t.runtime_latency_ns()},
          {"transmission_budget_ns", t.transmission_budget_ns()},
          {"delay_budget_ns", t.delay_budget_ns()}};
}

Json XprofRow(const v1::DcnXprofRow& x) {
  return {{"host", x.host_name()},
          {"rendezvous", x.rendezvous()},
          {"send_op", x.send_op_name()},
          {"recv_op", x.recv_op_name()},
          {"transfer_type", x.transfer_type()},
          {"occurrences", x.occurrences()},
          {"slack_us", x.slack_us()},
          {"observed_duration_us", x.observed_duration_us()},
          {"stall_duration_us", x.stall_duration_us()},
          {"send_duration_us", x.send_duration_us()},
          {"send_done_duration_us", x.send_done_duration_us()},
          {"recv_done_duration_us", x.recv_done_duration_us()},
          {"recv_duration_us", x.recv_duration_us()},
          {"recv_stall_us_as_xprof", x.recv_stall_us_as_xprof()},
          {"bytes_transmitted", x.bytes_transmitted()}};
}

// The rows of one table, each a flat object.
Json Rows(const v1::GetDcnResponse& r, DcnTable table) {
  Json out = Json::array();
  switch (table) {
    case DcnTable::kLinks:
      for (const auto& c : r.links()) out.push_back(LinkRow(c));
      break;
    case DcnTable::kProducers:
      for (const auto& c : r.producers()) out.push_back(ProducerRow(c));
      break;
    case DcnTable::kTransfers:
      for (const auto& t : r.worst()) out.push_back(TransferRow(t));
      break;
    case DcnTable::kXprof:
      for (const auto& x : r.xprof()) out.push_back(XprofRow(x));
      break;
  }
  return out;
}

// The column names of a table, from a row of it (a table without rows still has its header).
std::vector<std::string> Header(DcnTable table) {
  Json sample;
  switch (table) {
    case DcnTable::kLinks:
      sample = LinkRow({});
      break;
    case DcnTable::kProducers:
      sample = ProducerRow({});
      break;
    case DcnTable::kTransfers:
      sample = TransferRow({});
      break;
    case DcnTable::kXprof:
      sample = XprofRow({});
      break;
  }
  std::vector<std::string> out = {"capture"};
  for (auto it = sample.begin(); it != sample.end(); ++it) out.push_back(it.key());
  return out;
}

// The slices x instances matrix as the slice view reads it: a row of figures per slice.
Json CellsJson(const v1::DcnCells& c) {
  const int width = c.instance_step_size();
  Json instances = Json::array();
  for (int i = 0; i < width; ++i) {
    instances.push_back({{"rendezvous", c.instance_rendezvous(i)},
                         {"step", c.instance_step(i)},
                         {"start_ns", c.instance_start_ns(i)}});
  }
  // A matrix whose figures do not fill its rows (a damaged answer) is cut to whole rows.
  auto rows = [&](const google::protobuf::RepeatedField<int64_t>& v) {
    Json out = Json::array();
    for (int s = 0; s < c.slices_size() && (s + 1) * width <= v.size(); ++s) {
      out.push_back(Json(std::vector<int64_t>(v.begin() + s * width, v.begin() + (s + 1) * width)));
    }
    return out;
  };
  return {{"slices", std::vector<int32_t>(c.slices().begin(), c.slices().end())},
          {"instances", std::move(instances)},
          {"wait_ns", rows(c.wait_ns())},
          {"producer_ns", rows(c.producer_ns())},
          {"instances_left_out", c.instances_left_out()},
          {"slices_left_out", c.slices_left_out()}};
}

std::string CsvCell(const Json& v) {
  if (v.is_string()) return CsvField(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_float()) return CsvDouble(v.get<double>());
  return v.dump();
}

std::string Ns(int64_t ns) { return FormatDurationPs(ns * 1000); }
std::string Us(uint64_t us) { return FormatDurationPs(static_cast<int64_t>(us) * 1'000'000); }
std::string Chance(const v1::DcnCulprit& c) { return absl::StrFormat("%.1f", c.expected_last()); }
std::string PValue(const v1::DcnCulprit& c) { return absl::StrFormat("%.2g", c.p_value()); }

}  // namespace

const std::map<std::string, DcnTable>& DcnTablesByName() {
  static const auto* const kTables =
      new std::map<std::string, DcnTable>{{"links", DcnTable::kLinks},
                                          {"producers", DcnTable::kProducers},
                                          {"transfers", DcnTable::kTransfers},
                                          {"xprof", DcnTable::kXprof}};
  return *kTables;
}

std::string DcnJsonText(const v1::GetDcnResponse& r) {
  Json j = {{"capture", r.capture_id()},
            {"verdict", r.verdict()},
            {"slices", r.slices()},
            {"transfers", r.transfers()},
            {"unpaired", r.unpaired()},
            {"instances", r.instances()},
            {"expected_transit_ns", r.expected_transit_ns()},
            {"runtime_network", r.runtime_network()},
            {"expected_runtime_latency_ns", r.expected_runtime_latency_ns()},
            {"runtime_budget", r.runtime_budget()},
            {"named_after_instances", r.named_after_instances()},
            {"links", Rows(r, DcnTable::kLinks)},
            {"producers", Rows(r, DcnTable::kProducers)},
            {"worst", Rows(r, DcnTable::kTransfers)},
            {"xprof", Rows(r, DcnTable::kXprof)}};
  // Each table's CSV columns, so that a table without rows still says what it would hold.
  Json columns = Json::object();
  for (const auto& [key, table] :
       {std::pair{"links", DcnTable::kLinks}, std::pair{"producers", DcnTable::kProducers},
        std::pair{"worst", DcnTable::kTransfers}, std::pair{"xprof", DcnTable::kXprof}}) {
    columns[key] = Header(table);
  }
  j["columns"] = std::move(columns);
  if (r.has_cells()) j["cells"] = CellsJson(r.cells());
  return JsonText(j, 2) + "\n";
}

void WriteDcnCsv(const v1::GetDcnResponse& r, DcnTable table, std::ostream& out) {
  const std::vector<std::string> header = Header(table);
  out << absl::StrJoin(header, ",") << "\n";
  const std::string capture = CsvField(r.capture_id());
  for (const Json& row : Rows(r, table)) {
    std::vector<std::string> cells = {capture};
    for (auto it = row.begin(); it != row.end(); ++it) cells.push_back(CsvCell(*it));
    out << absl::StrJoin(cells, ",") << "\n";
  }
}

namespace {

void WriteLinks(const v1::GetDcnResponse& r, std::ostream& out) {
  out << "\nlinks:\n";
  TextTable links({{"LINK", TextTable::Align::kLeft},
                   {"TRANSFERS", TextTable::Align::kRight},
                   {"MEDIAN TRANSIT", TextTable::Align::kRight},
                   {"NETWORK EXCESS", TextTable::Align::kRight},
                   {"CAUSED WAIT", TextTable::Align::kRight},
                   {"WORST", TextTable::Align::kRight},
                   {"OF", TextTable::Align::kRight},
                   {"CHANCE", TextTable::Align::kRight},
                   {"P", TextTable::Align::kRight},
                   {"NAMED", TextTable::Align::kLeft}});
  for (const auto& c : r.links()) {
    links.AddRow({LinkName(c), absl::StrCat(c.transfers()), Ns(c.median_transit_ns()),
                  Ns(c.excess_ns()), Ns(c.caused_ns()), absl::StrCat(c.times_last()),
                  absl::StrCat(c.instances()), Chance(c), PValue(c), c.named() ? "yes" : "no"});
  }
  links.Write(out);
}

void WriteProducers(const v1::GetDcnResponse& r, std::ostream& out) {
  out << "\nproducing slices:\n";
  TextTable producers({{"SLICE", TextTable::Align::kRight},
                       {"TRANSFERS", TextTable::Align::kRight},
                       {"CAUSED WAIT", TextTable::Align::kRight},
                       {"WORST", TextTable::Align::kRight},
                       {"OF", TextTable::Align::kRight},
                       {"CHANCE", TextTable::Align::kRight},
                       {"P", TextTable::Align::kRight},
                       {"NAMED", TextTable::Align::kLeft}});
  for (const auto& c : r.producers()) {
    producers.AddRow({absl::StrCat(c.src_slice()), absl::StrCat(c.transfers()), Ns(c.caused_ns()),
                      absl::StrCat(c.times_last()), absl::StrCat(c.instances()), Chance(c),
                      PValue(c), c.named() ? "yes" : "no"});
  }
  producers.Write(out);
}

void WriteWorst(const v1::GetDcnResponse& r, int top, std::ostream& out) {
  out << "\nworst transfers:\n";
  TextTable worst({{"RENDEZVOUS", TextTable::Align::kLeft, 24},
                   {"STEP", TextTable::Align::kRight},
                   {"FROM", TextTable::Align::kLeft, 32},
                   {"TO", TextTable::Align::kLeft, 32},
                   {"WAIT", TextTable::Align::kRight},
                   {"PRODUCER", TextTable::Align::kRight},
                   {"NETWORK", TextTable::Align::kRight},
                   {"TRANSIT", TextTable::Align::kRight},
                   {"RUNTIME LATENCY", TextTable::Align::kRight}});
  const int n = top < 0 ? r.worst_size() : std::min(top, r.worst_size());
  for (int i = 0; i < n; ++i) {
    const v1::DcnTransfer& t = r.worst(i);
    worst.AddRow({t.rendezvous(), t.step() >= 0 ? absl::StrCat(t.step()) : "-",
                  absl::StrCat("slice ", t.src_slice(), " ", t.src_host(), " chip ", t.src_chip()),
                  absl::StrCat("slice ", t.dst_slice(), " ", t.dst_host(), " chip ", t.dst_chip()),
                  Ns(t.wait_ns()), Ns(t.producer_ns()), Ns(t.network_ns()), Ns(t.transit_ns()),
                  t.runtime_latency_ns() >= 0 ? Ns(t.runtime_latency_ns()) : "-"});
  }
  worst.Write(out);
}

}  // namespace

void WriteDcnXprofTable(const v1::GetDcnResponse& r, std::ostream& out) {
  out << "\nXProf megascale_stats per host (chip 0, host clock; RECV STALL as XProf shows it, "
         "divided by 10^6 twice, and corrected):\n";
  TextTable rows({{"HOST", TextTable::Align::kLeft, 24},
                  {"RENDEZVOUS", TextTable::Align::kLeft, 24},
                  {"SLACK", TextTable::Align::kRight},
                  {"OBSERVED", TextTable::Align::kRight},
                  {"STALL", TextTable::Align::kRight},
                  {"OCCURRENCES", TextTable::Align::kRight},
                  {"RECV STALL (XPROF)", TextTable::Align::kRight},
                  {"RECV STALL (CORRECTED)", TextTable::Align::kRight}});
  for (const auto& x : r.xprof()) {
    rows.AddRow({x.host_name(), x.rendezvous(), Us(x.slack_us()), Us(x.observed_duration_us()),
                 Us(x.stall_duration_us()), absl::StrCat(x.occurrences()),
                 Us(x.recv_stall_us_as_xprof()), Us(x.recv_duration_us())});
  }
  rows.Write(out);
}

void WriteDcnTable(const v1::GetDcnResponse& r, int top, bool xprof, std::ostream& out) {
  // The verdict first: some link always tops the table, slow or not.
  out << "capture " << r.capture_id() << ": " << r.verdict() << "\n";
  if (r.transfers() == 0 && r.xprof().empty()) return;
  out << CountOf(r.transfers(), "transfer") << " between " << CountOf(r.slices(), "slice")
      << ", expected transit " << Ns(r.expected_transit_ns());
  if (r.named_after_instances() >= 0) {
    out << "; named after " << CountOf(r.named_after_instances(), "instance");
  }
  out << "\n";
  if (r.runtime_network()) {
    out << "the network's part from the runtime's own latency (network_transport_latency_us) "
        << (r.runtime_budget() ? "beyond its transmission budget, "
                               : "beyond the healthiest "
                                 "link's, ")
        << Ns(r.expected_runtime_latency_ns()) << "\n";
  }
  if (r.unpaired() > 0) {
    out << "warning: " << CountOf(r.unpaired(), "receive")
        << " whose send is not in the capture (cut by its edges) left out\n";
  }
  if (!r.links().empty()) WriteLinks(r, out);
  if (!r.producers().empty()) WriteProducers(r, out);
  if (!r.worst().empty() && top != 0) WriteWorst(r, top, out);
  if (xprof && !r.xprof().empty()) WriteDcnXprofTable(r, out);
}

}  // namespace podprof::report
