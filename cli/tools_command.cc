#include "cli/tools_command.h"

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "report/format.h"
#include "report/table.h"
#include "tools/registry.h"

namespace podprof::cli {
namespace {

class ToolsCommand : public Command {
 public:
  ToolsCommand(CLI::App* cmd, CliContext& context) : Command(cmd) {
    AddFormatFlag(cmd, context.format);
    AddWideFlag(cmd, context.table_fit);
    cmd->footer(
        "Each tool is one question podprof answers, as the HTTP API, the CLI, Python and MCP "
        "ask it; --format json gives each one's parameters (types, units, defaults), role, "
        "example and input schema.\n"
        "Examples:\n  podprof tools\n  podprof tools --format json");
  }

  int Run(CliContext& context, std::ostream& out, std::ostream&) override {
    WriteTools(context.format, context.table_fit, out);
    return 0;
  }
};

std::vector<std::string> Cells(const tools::Tool& t) {
  return {t.name, tools::RoleName(t.role), absl::StrCat(t.method, " ", t.route),
          t.cli.empty() ? "-" : t.cli, t.summary};
}

}  // namespace

std::unique_ptr<Command> AddToolsCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<ToolsCommand>(
      app.add_subcommand("tools", "List the questions podprof answers (the tool registry)"),
      context);
}

void WriteTools(OutputFormat format, const TableFit& fit, std::ostream& out) {
  switch (format) {
    case OutputFormat::kJson: {
      nlohmann::json tools = nlohmann::json::array();
      for (const tools::Tool& t : tools::Registry()) tools.push_back(tools::ToolJson(t));
      nlohmann::json not_tools = nlohmann::json::array();
      for (const tools::NotATool& n : tools::NotTools()) {
        not_tools.push_back({{"what", n.what}, {"why", n.why}});
      }
      out << nlohmann::json{{"tools", tools}, {"not_tools", not_tools}}.dump(1) << "\n";
      return;
    }
    case OutputFormat::kCsv:
      out << "name,role,route,cli,summary\n";
      for (const tools::Tool& t : tools::Registry()) {
        std::vector<std::string> cells = Cells(t);
        for (std::string& c : cells) c = report::CsvField(c);
        out << absl::StrJoin(cells, ",") << "\n";
      }
      return;
    case OutputFormat::kTable: {
      using Align = TextTable::Align;
      // The summary goes first when the terminal is narrow; the name never.
      TextTable table({{"NAME"},
                       {"ROLE", Align::kLeft, 0, 3},
                       {"ROUTE", Align::kLeft, 0, 2},
                       {"CLI", Align::kLeft, 0, 4},
                       {"SUMMARY", Align::kLeft, 0, 1, 20}});
      for (const tools::Tool& t : tools::Registry()) table.AddRow(Cells(t));
      table.Write(out, fit);
      return;
    }
  }
}

}  // namespace podprof::cli
