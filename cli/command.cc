#include "cli/command.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <map>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "cli/one_of.h"
#include "security/tls.h"

namespace podprof::cli {

absl::StatusOr<std::unique_ptr<AggregatorClient>> CliContext::Connect() {
  if (!tls.cert.empty() || !tls.key.empty() || !tls.ca.empty()) {
    if (tls.cert.empty() || tls.key.empty() || tls.ca.empty()) {
      return absl::InvalidArgumentError("--tls-cert, --tls-key and --tls-ca go together");
    }
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        security::ChannelCredentials({false, tls.cert, tls.key, tls.ca}, clock.NowNs());
    if (!credentials.ok()) return credentials.status();
    target.credentials = *credentials;
  }
  return std::make_unique<AggregatorClient>(target, clock);
}

int AggregatorCommand::Run(CliContext& context, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<AggregatorClient>> client = context.Connect();
  if (!client.ok()) return Failed(err, client.status(), kExitUsage);
  return RunWith(**client, context, out, err);
}

int AggregatorCommand::Failed(std::ostream& err, const absl::Status& status, int exit_code) const {
  return Fail(err, app()->get_name().c_str(), status, exit_code);
}

void AddFormatFlag(CLI::App* cmd, OutputFormat& format) {
  cmd->add_option("--format", format, "Output format: table, json or csv")
      ->transform(OneOf<OutputFormat>({{"table", OutputFormat::kTable},
                                       {"json", OutputFormat::kJson},
                                       {"csv", OutputFormat::kCsv}}))
      ->option_text("table|json|csv");
}

void AddWideFlag(CLI::App* cmd, TableFit& fit) {
  cmd->add_flag("--wide", fit.wide,
                "Print every column of the table, whole (by default the table fits the "
                "terminal, $COLUMNS wide where set, and leaves out columns without values)");
}

size_t TerminalWidth(const char* columns_env, int fd) {
  size_t columns = 0;
  if (columns_env != nullptr && absl::SimpleAtoi(columns_env, &columns) && columns > 0) {
    return columns;
  }
  struct winsize ws {};
  if (::isatty(fd) && ::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 0;
}

// The environment variables named in these texts are applied by ApplyCliEnvironment before
// the parse, not through CLI11's envname (cli/cli_profile.h says why).
void AddTlsFlags(CLI::App* cmd, TlsFiles& tls) {
  cmd->add_option("--tls-cert", tls.cert,
                  "This operator's certificate, PEM (or $PODPROF_TLS_CERT)");
  cmd->add_option("--tls-key", tls.key, "Its private key, PEM (or $PODPROF_TLS_KEY)");
  cmd->add_option("--tls-ca", tls.ca,
                  "CA bundle the aggregator's certificate must chain to (or $PODPROF_TLS_CA); "
                  "without the three TLS flags the CLI speaks plaintext");
}

CLI::Option* AddAggregatorFlags(CLI::App* cmd, CliContext& context, bool with_format) {
  AddTlsFlags(cmd, context.tls);
  cmd->add_option("--aggregator", context.target.address,
                  "Aggregator address, host:port (or $PODPROF_AGGREGATOR)")
      ->capture_default_str();
  CLI::Option* timeout =
      cmd->add_option("--timeout", context.target.timeout_ns,
                      "Deadline of each call to the aggregator, e.g. 30s, 2m (default 30s); for "
                      "import and export it covers the whole transfer")
          ->transform(PositiveDuration())
          ->option_text("DURATION");
  if (with_format) AddFormatFlag(cmd, context.format);
  return timeout;
}

void AddStartRangeFlags(CLI::App* cmd, StartRange& range, const char* since_example) {
  auto ago_ns = std::make_shared<int64_t>(0);
  CLI::Option* since =
      cmd->add_option(
             "--since", *ago_ns,
             absl::StrCat("Only captures that started at most this long ago, e.g. ", since_example))
          ->transform(PositiveDuration())
          ->option_text("DURATION");
  cmd->add_option("--since-ns", range.since_ns,
                  "Only captures that started at or after this instant, ns since the Unix epoch")
      ->excludes(since);
  cmd->add_option("--until-ns", range.until_ns,
                  "Only captures that started before this instant, ns since the Unix epoch");
  // An option binds a plain value; "given" is known once the command line is parsed.
  cmd->parse_complete_callback([ago_ns, since, &range] {
    if (since->count() > 0) range.since_ago_ns = *ago_ns;
  });
}

CLI::Validator PositiveDuration() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<int64_t> ns = ParseDurationNs(text);
        if (!ns.ok()) return std::string(ns.status().message());
        if (*ns <= 0) return absl::StrCat("duration \"", text, "\" must be positive");
        text = absl::StrCat(*ns);
        return "";
      },
      "DURATION");
}

CLI::Validator NonNegativeDuration() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<int64_t> ns = ParseDurationNs(text);
        if (!ns.ok()) return std::string(ns.status().message());
        if (*ns < 0) return absl::StrCat("duration \"", text, "\" must not be negative");
        text = absl::StrCat(*ns);
        return "";
      },
      "DURATION");
}

int Fail(std::ostream& err, const char* command, const absl::Status& status, int exit_code) {
  err << "podprof " << command << ": " << status.message() << "\n";
  if (status.GetPayload(kUnreachablePayload).has_value()) return kExitUnreachable;
  if (status.code() == absl::StatusCode::kPermissionDenied) return kExitDenied;
  if (status.code() == absl::StatusCode::kNotFound) return kExitNotFound;
  return exit_code;
}

}  // namespace podprof::cli
