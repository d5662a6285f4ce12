#include "cli/sql_command.h"

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/exit_codes.h"
#include "cli/report.h"
#include "common/status_macros.h"
#include "report/sql_rows.h"
#include "report/table.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

class SqlCommand : public AggregatorCommand {
 public:
  SqlCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    cmd->add_option("capture", options_.capture_id, "Capture id")->required();
    cmd->add_option("statement", options_.statement,
                    "One read-only statement over the tables events, kernels, collectives, "
                    "counters and telemetry")
        ->required();
    cmd->add_option("--max-rows", options_.max_rows,
                    "Rows returned at most (default 1,000, at most 10,000)");
    cmd->footer(
        "Examples:\n"
        "  podprof sql cap-1796003829474-cf16 \"SELECT host, chip, start_ns, duration_ns FROM "
        "events WHERE kernel = 'fusion.7' ORDER BY duration_ns DESC LIMIT 10\"\n"
        "  podprof sql cap-1796003829474-cf16 \"SELECT step, host, chip FROM collectives WHERE "
        "kernel = 'all-reduce.3' AND last = 1 ORDER BY step\"\n"
        "Tables and columns: docs/SQL.md");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    options_.format = context.format;
    absl::Status s = RunSql(client, options_, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  SqlOptions options_;
};

void WriteTable(const v1::SqlResponse& answer, std::ostream& out) {
  std::vector<TextTable::Column> columns;
  for (const std::string& c : answer.columns()) {
    columns.push_back({c, TextTable::Align::kLeft, 60});
  }
  TextTable table(std::move(columns));
  for (const v1::SqlRow& row : answer.rows()) {
    std::vector<std::string> cells;
    for (const v1::SqlValue& v : row.values()) {
      cells.push_back(report::SqlValueText(v, /*exact=*/false));
    }
    table.AddRow(std::move(cells));
  }
  table.Write(out);
  out << "(" << answer.rows_size() << " row" << (answer.rows_size() == 1 ? "" : "s")
      << (answer.truncated() ? ", more left out: raise --max-rows or narrow the statement" : "")
      << "; capture " << answer.provenance().capture_id() << ", " << answer.provenance().hosts()
      << " hosts, clock error up to " << answer.provenance().clock_error_ns() << " ns)\n";
}

}  // namespace

std::unique_ptr<Command> AddSqlCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<SqlCommand>(
      app.add_subcommand("sql",
                         "Run one read-only SQL statement over a capture's events, "
                         "kernels, collectives, counters and telemetry"),
      context);
}

absl::Status RunSql(AggregatorClient& client, const SqlOptions& options, std::ostream& out) {
  v1::SqlRequest request;
  request.set_capture_id(options.capture_id);
  request.set_statement(options.statement);
  request.set_max_rows(options.max_rows);
  v1::SqlResponse answer;
  RETURN_IF_ERROR(client.Call(&Stub::Sql, request, &answer));
  switch (options.format) {
    case OutputFormat::kJson:
      out << report::SqlAnswerJsonText(answer) << "\n";
      break;
    case OutputFormat::kCsv:
      report::WriteSqlCsv(answer, out);
      break;
    default:
      WriteTable(answer, out);
  }
  return FlushOutput(out);
}

}  // namespace podprof::cli
