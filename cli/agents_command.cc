#include "cli/agents_command.h"

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/exit_codes.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "report/pod_rows.h"
#include "report/states.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;
using nlohmann::json;

class AgentsCommand : public AggregatorCommand {
 public:
  AgentsCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    cmd->add_option("--selector", selector_, "Only agents with this label, key=value; repeatable")
        ->allow_extra_args(false);
    cmd->footer(
        "Examples:\n  podprof agents --aggregator 10.0.0.5:7100\n"
        "  podprof agents --selector slice=s1 --format json");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    absl::StatusOr<LabelMap> selector = ParseLabels(selector_);
    if (!selector.ok()) return Failed(err, selector.status(), kExitUsage);
    AgentsOptions options;
    options.selector = *selector;
    options.format = context.format;
    absl::Status s = RunAgents(client, options, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  std::vector<std::string> selector_;
};

}  // namespace

std::unique_ptr<Command> AddAgentsCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<AgentsCommand>(
      app.add_subcommand("agents", "List the agents registered with the aggregator"), context);
}

// What keeps a capture of the agent from working, most important first: the aggregator cannot
// dial it, it cannot reach its workload's profiler or metrics, what the agent found wrong with
// its own set-up at start-up; "-" when nothing does.
std::string Note(const v1::AgentStatus& a) {
  std::vector<std::string> notes;
  if (!a.dial_error().empty()) notes.push_back(absl::StrCat("cannot dial it: ", a.dial_error()));
  if (std::string w = report::WorkloadError(a); !w.empty()) notes.push_back(std::move(w));
  for (const std::string& w : a.agent_warnings()) notes.push_back(w);
  return notes.empty() ? "-" : absl::StrJoin(notes, "; ");
}

// Long: the three formats (JSON, CSV, table) side by side, so that a field added to one is seen
// missing from the others.
absl::Status RunAgents(AggregatorClient& client, const AgentsOptions& options, std::ostream& out) {
  v1::ListAgentsRequest request;
  for (const auto& [k, v] : options.selector) (*request.mutable_label_selector())[k] = v;
  v1::ListAgentsResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::ListAgents, request, &response));
  const int64_t now = client.clock().NowNs();
  switch (options.format) {
    case OutputFormat::kJson: {
      json agents = json::array();
      for (const auto& a : response.agents()) {
        agents.push_back({{"host", a.host().host_name()},
                          {"address", a.host().agent_address()},
                          {"state", AgentStateName(a.state())},
                          {"chips", a.host().chips_size()},
                          {"slice", report::SliceOf(a.host())},
                          {"slice_worker", report::SliceWorkerOf(a.host())},
                          {"labels", SortedLabels(a.host().labels())},
                          {"last_heartbeat_ns", a.last_heartbeat_ns()},
                          {"clock_offset_ns", a.clock().offset_ns()},
                          {"clock_uncertainty_ns", a.clock().uncertainty_ns()},
                          {"clock_drift_ppb", a.clock().drift_ppb()},
                          {"min_rtt_ns", a.clock().min_rtt_ns()},
                          {"probe_count", a.clock().probe_count()},
                          {"active_capture_id", a.active_capture_id()},
                          {"dial_error", a.dial_error()},
                          {"workload", report::WorkloadStateName(a)},
                          {"workload_error", report::WorkloadError(a)},
                          {"agent_warnings", a.agent_warnings()},
                          {"note", Note(a)}});
      }
      json j = {{"agents", agents}};
      if (response.fleet().enabled()) {
        j["fleet"] = {{"url", response.fleet().url()},
                      {"pod", response.fleet().pod()},
                      {"pending", response.fleet().pending()},
                      {"oldest_pending_ns", response.fleet().oldest_pending_unix_ns()},
                      {"rejected", response.fleet().rejected()},
                      {"last_error", response.fleet().last_error()}};
      }
      WriteJson(j, out);
      break;
    }
    case OutputFormat::kCsv:
      report::WriteAgentsCsv(response, out);
      break;
    case OutputFormat::kTable: {
      using Col = TextTable::Column;
      using A = TextTable::Align;
      TextTable t({Col{"HOST"}, Col{"ADDRESS"}, Col{"STATE"}, Col{"WORKLOAD"},
                   Col{"CHIPS", A::kRight}, Col{"SLICE", A::kRight}, Col{"LABELS", A::kLeft, 32},
                   Col{"HEARTBEAT", A::kRight}, Col{"CLOCK OFFSET", A::kRight},
                   Col{"+-", A::kRight}, Col{"DRIFT", A::kRight}, Col{"RTT", A::kRight},
                   Col{"CAPTURE"}, Col{"NOTE"}});
      for (const auto& a : response.agents()) {
        t.AddRow({a.host().host_name(), a.host().agent_address(), AgentStateName(a.state()),
                  report::WorkloadStateName(a), absl::StrCat(a.host().chips_size()),
                  report::SliceText(a.host()), JoinLabels(a.host().labels()),
                  absl::StrFormat("%.1f s ago", (now - a.last_heartbeat_ns()) / 1e9),
                  a.clock().probe_count() > 0 ? FormatSignedNs(a.clock().offset_ns()) : "-",
                  a.clock().probe_count() > 0 ? FormatSignedNs(a.clock().uncertainty_ns()) : "-",
                  a.clock().probe_count() > 1 ? FormatPpm(a.clock().drift_ppb() / 1e3) : "-",
                  a.clock().probe_count() > 0 ? FormatSignedNs(a.clock().min_rtt_ns()) : "-",
                  a.active_capture_id().empty() ? "-" : a.active_capture_id(), Note(a)});
      }
      out << response.agents_size() << " agents\n";
      if (const v1::FleetStatus& f = response.fleet(); f.enabled()) {
        // The backlog at a glance; `podprof fleet status` has the rest.
        out << "fleet: " << CountOf(f.pending(), "capture") << " waiting for " << f.url();
        if (f.rejected() > 0) out << ", " << f.rejected() << " rejected";
        if (!f.last_error().empty()) out << " (" << OneLine(f.last_error()) << ")";
        out << "\n";
      }
      if (t.rows() > 0) {
        out << "\n";
        t.Write(out);
      }
      break;
    }
  }
  return FlushOutput(out);
}

}  // namespace podprof::cli
