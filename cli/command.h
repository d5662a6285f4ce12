// The shape of a `podprof` subcommand and what the subcommands share.
//
// Each subcommand lives in cli/<name>_command.{h,cc}: an Add<Name>Command function adds it to
// the command line with its own flags and returns a Command, whose Run is called when the
// command line named it. CliMain (cli/cli_main.h) only lists the commands. The flags every
// aggregator command has (address, deadline, TLS files, output format) bind one CliContext,
// so that they may also come before the subcommand.
#ifndef PODPROF_CLI_COMMAND_H_
#define PODPROF_CLI_COMMAND_H_

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/aggregator_client.h"
#include "cli/capture_rows.h"
#include "cli/report.h"
#include "common/clock.h"

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI

namespace podprof::cli {

// The CLI's TLS files: all three given (or none, for plaintext).
struct TlsFiles {
  std::string cert, key, ca;
};

// What the flags of every command set, and the clock they all read.
struct CliContext {
  explicit CliContext(Clock& c) : clock(c) {}

  Clock& clock;
  AggregatorTarget target;
  TlsFiles tls;
  OutputFormat format = OutputFormat::kTable;
  // How tables meet the terminal: its width (TerminalWidth) and --wide.
  TableFit table_fit;
  bool no_color = false;
  // `podprof export`'s default --max-size (the profile's max_size); 0 for the aggregator's.
  uint64_t export_max_bytes = 0;
  // Whether the profile set `timeout`: then it is export's deadline too, over export's own
  // longer default (a flag beats both).
  bool timeout_from_profile = false;
  // The aggregator's HTTP API (the profile's `http`, e.g. "https://agg.pod-a:7180"): the
  // CLI speaks gRPC and does not use it; the Python client reads it from the same profile.
  std::string http_url;

  // A client of the aggregator at `target`, over mutual TLS when the TLS files are given.
  // Errors (InvalidArgument): only some of the three TLS files given, or unreadable ones.
  absl::StatusOr<std::unique_ptr<AggregatorClient>> Connect();
};

// One subcommand, added to the command line by its Add<Name>Command function.
class Command {
 public:
  explicit Command(CLI::App* app) : app_(app) {}
  virtual ~Command() = default;
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  // The subcommand's part of the command line; parsed() tells whether it was named.
  CLI::App* app() const { return app_; }

  // Runs the command after the command line was parsed. Writes results to `out` and
  // diagnostics to `err`; returns the process's exit status (cli/exit_codes.h).
  virtual int Run(CliContext& context, std::ostream& out, std::ostream& err) = 0;

 private:
  CLI::App* const app_;
};

// A command that talks to the aggregator: Run connects as the flags say (a bad set of TLS
// files is a usage error) and hands the client to RunWith.
class AggregatorCommand : public Command {
 public:
  using Command::Command;
  int Run(CliContext& context, std::ostream& out, std::ostream& err) final;

 protected:
  virtual int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
                      std::ostream& err) = 0;
  // Fail() under this command's name.
  int Failed(std::ostream& err, const absl::Status& status, int exit_code) const;
};

// --format table|json|csv, bound to `format`.
void AddFormatFlag(CLI::App* cmd, OutputFormat& format);

// --wide: tables show every column, whole, instead of fitting the terminal (report/table.h).
void AddWideFlag(CLI::App* cmd, TableFit& fit);

// The width tables are fitted to: `columns_env` ($COLUMNS) when it is a positive number, else
// the terminal's when `fd` is one, else 0: no limit, so that a pipe or a file gets every
// column that has values.
size_t TerminalWidth(const char* columns_env, int fd);

// --tls-cert, --tls-key and --tls-ca (also from $PODPROF_TLS_*), bound to `tls`.
void AddTlsFlags(CLI::App* cmd, TlsFiles& tls);

// What every aggregator command has: the TLS flags, --aggregator, --timeout and (unless the
// command has a --format of its own) --format, bound to `context`. Returns the --timeout
// option, for commands whose default deadline differs.
CLI::Option* AddAggregatorFlags(CLI::App* cmd, CliContext& context, bool with_format = true);

// --since DURATION (e.g. `since_example` ago), --since-ns and --until-ns, bound to `range`.
void AddStartRangeFlags(CLI::App* cmd, StartRange& range, const char* since_example);

// A validator that turns a positive duration ("30s", "1.5h") into its ns, so that the option
// binds an int64_t.
CLI::Validator PositiveDuration();
// The same for a duration that may also be zero ("0", "200ms").
CLI::Validator NonNegativeDuration();

// Prints the one-line error of `podprof <command>` and returns `exit_code`, or
// kExitUnreachable when the aggregator could not be reached (AggregatorClient::Check),
// kExitDenied when it refused the caller, kExitNotFound when what was named does not exist.
int Fail(std::ostream& err, const char* command, const absl::Status& status, int exit_code);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_COMMAND_H_
