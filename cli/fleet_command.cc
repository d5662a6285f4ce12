#include "cli/fleet_command.h"

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli_profile.h"
#include "cli/exit_codes.h"
#include "cli/one_of.h"
#include "common/file_util.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "fleet/queries.h"
#include "nlohmann/json.hpp"
#include "report/fleet_rows.h"

namespace podprof::cli {
namespace {

using nlohmann::json;
using Stub = v1::Aggregator::StubInterface;

// How to reach ClickHouse: the flags, else the environment. The environment's values are set
// when the command is added, before the parse, so that a flag overwrites them
// (cli/cli_profile.h says why not CLI11's envname).
struct ClickHouseFlags {
  std::string url = EnvValue("PODPROF_CLICKHOUSE");
  std::string user = EnvValue("PODPROF_CLICKHOUSE_USER");
  std::string password_file = EnvValue("PODPROF_CLICKHOUSE_PASSWORD_FILE");
  std::string database = "podprof";
  int64_t timeout_ns = 30'000'000'000;

  void Add(CLI::App* cmd) {
    cmd->add_option("--clickhouse", url,
                    "ClickHouse's HTTP address, http://host:8123 (or $PODPROF_CLICKHOUSE)");
    cmd->add_option("--clickhouse-user", user,
                    "ClickHouse user, a read-only one will do (or $PODPROF_CLICKHOUSE_USER)");
    cmd->add_option("--clickhouse-password-file", password_file,
                    "File holding the user's password (or $PODPROF_CLICKHOUSE_PASSWORD_FILE; "
                    "without either, the password is $PODPROF_CLICKHOUSE_PASSWORD)");
    cmd->add_option("--database", database, "The fleet's database (default podprof)");
  }

  absl::StatusOr<fleet::ClickHouse> Connect() const {
    if (url.empty()) {
      return absl::InvalidArgumentError(
          "no ClickHouse to ask: give --clickhouse http://host:8123 or set $PODPROF_CLICKHOUSE");
    }
    fleet::ClickHouseOptions o;
    o.url = url;
    o.timeout_ns = timeout_ns;
    if (!user.empty()) o.user = user;
    if (!password_file.empty()) {
      absl::StatusOr<std::string> text = ReadFile(password_file);
      if (!text.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--clickhouse-password-file ", password_file,
                                                       ": ", text.status().message()));
      }
      o.password = std::string(absl::StripTrailingAsciiWhitespace(*text));
    } else {
      o.password = EnvValue("PODPROF_CLICKHOUSE_PASSWORD");
    }
    return fleet::ClickHouse::Create(o);
  }
};

// An answer (rows as report/fleet_rows.h holds them) in `format`: the writers the aggregator's
// /api/v1/fleet routes use too.
template <typename Row, typename Table>
void WriteAnswer(const std::vector<Row>& rows, const char* key, OutputFormat format,
                 void (*csv)(const std::vector<Row>&, std::ostream&),
                 nlohmann::json (*to_json)(const std::vector<Row>&), json extra, Table table,
                 std::ostream& out) {
  if (format == OutputFormat::kJson) {
    extra[key] = to_json(rows);
    WriteJson(extra, out);
  } else if (format == OutputFormat::kCsv) {
    csv(rows, out);
  } else {
    table(rows, out);
  }
}

}  // namespace

namespace {

int FleetFail(std::ostream& err, const char* sub, const absl::Status& s) {
  err << "podprof fleet " << sub << ": " << s.message() << "\n";
  if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) return kExitUnreachable;
  if (absl::IsPermissionDenied(s)) return kExitDenied;
  return kExitBadInput;
}

void WriteStatus(const v1::FleetStatus& f, int64_t now_ns, OutputFormat format, std::ostream& out) {
  if (format != OutputFormat::kTable) {
    json rejections = json::array();
    for (const auto& r : f.rejections()) {
      rejections.push_back({{"capture", r.capture_id()}, {"error", r.error()}});
    }
    json j = {{"enabled", f.enabled()},
              {"url", f.url()},
              {"database", f.database()},
              {"pod", f.pod()},
              {"pending", f.pending()},
              {"oldest_pending_ns", f.oldest_pending_unix_ns()},
              {"backlog_limit", f.backlog_limit()},
              {"rejected", f.rejected()},
              {"rejections", rejections},
              {"replicated", f.replicated()},
              {"last_success_ns", f.last_success_unix_ns()},
              {"last_error", f.last_error()}};
    if (format == OutputFormat::kJson) {
      WriteJson(j, out);
    } else {
      out << "enabled,url,database,pod,pending,oldest_pending_ns,backlog_limit,rejected,"
             "replicated,last_success_ns,last_error\n"
          << f.enabled() << ',' << CsvField(f.url()) << ',' << CsvField(f.database()) << ','
          << CsvField(f.pod()) << ',' << f.pending() << ',' << f.oldest_pending_unix_ns() << ','
          << f.backlog_limit() << ',' << f.rejected() << ',' << f.replicated() << ','
          << f.last_success_unix_ns() << ',' << CsvField(OneLine(f.last_error())) << "\n";
    }
    return;
  }
  if (!f.enabled()) {
    out << "fleet: off (no [fleet] clickhouse_url in the aggregator's configuration)\n";
    return;
  }
  out << "fleet: pod " << f.pod() << " -> " << f.url() << " database " << f.database() << "\n"
      << "backlog: " << CountOf(f.pending(), "capture") << " waiting of at most "
      << f.backlog_limit();
  if (f.pending() > 0) {
    out << ", oldest stored " << FormatDurationPs((now_ns - f.oldest_pending_unix_ns()) * 1000)
        << " ago";
  }
  out << "\nreplicated: " << f.replicated() << " since the aggregator started";
  if (f.last_success_unix_ns() > 0) {
    out << ", last at " << FormatTimestampNs(f.last_success_unix_ns());
  }
  out << "\n";
  if (!f.last_error().empty()) out << "last error: " << OneLine(f.last_error()) << "\n";
  if (f.rejected() > 0) {
    out << "rejected by ClickHouse: " << CountOf(f.rejected(), "capture") << "\n";
    for (const auto& r : f.rejections()) {
      out << "  " << r.capture_id() << ": " << OneLine(r.error()) << "\n";
    }
  }
}

class FleetCommand : public Command {
 public:
  FleetCommand(CLI::App* cmd, CliContext& context) : Command(cmd) {
    cmd->require_subcommand(1, 1);
    status_ =
        cmd->add_subcommand("status", "How the aggregator's replication to ClickHouse stands");
    AddAggregatorFlags(status_, context);
    history_ = cmd->add_subcommand("history", "A kernel's p50/p99 per capture, across every pod");
    history_->add_option("regex", regex_, "Kernel op names to match (RE2, partial match)")
        ->required();
    AddSince(history_, context, "30d", history_since_);
    history_->add_option("--label", labels_, "Only captures with this label, key=value; repeatable")
        ->allow_extra_args(false);
    top_ = cmd->add_subcommand("top", "Where the fleet's kernel time went");
    AddSince(top_, context, "24h", top_since_);
    top_->add_option("--by", by_, "Group by kernel, pod or host")
        ->transform(OneOf<fleet::TopBy>({{"kernel", fleet::TopBy::kKernel},
                                         {"pod", fleet::TopBy::kPod},
                                         {"host", fleet::TopBy::kHost}}));
    top_->add_option("--top", top_n_, "Rows to show (default 20)");
    regressions_ = cmd->add_subcommand(
        "regressions", "Kernels whose p50 or p99 rose beyond noise, this period against the last");
    AddSince(regressions_, context, "7d", regressions_since_);
    regressions_->add_option("--threshold", threshold_,
                             "Smallest rise that counts (0.05 = 5%; never under the sketch's "
                             "1.1% error)");
    cmd->footer(
        "Examples:\n  podprof fleet status\n"
        "  podprof fleet history 'fusion\\.1$' --since 30d --clickhouse http://ch:8123\n"
        "  podprof fleet top --by pod --since 24h\n"
        "  podprof fleet regressions --since 7d --threshold 0.05 --format csv");
  }

  int Run(CliContext& context, std::ostream& out, std::ostream& err) override {
    if (status_->parsed()) return RunStatus(context, out, err);
    CLI::App* sub = history_->parsed() ? history_ : top_->parsed() ? top_ : regressions_;
    const char* name = sub->get_name().c_str();
    absl::StatusOr<fleet::ClickHouse> ch = clickhouse_.Connect();
    if (!ch.ok()) return FleetFail(err, name, ch.status());
    fleet::FleetFilter filter;
    filter.database = clickhouse_.database;
    filter.pod = pod_;
    const int64_t now = context.clock.NowNs();
    const int64_t since = history_->parsed() ? history_since_
                          : top_->parsed()   ? top_since_
                                             : regressions_since_;
    filter.since_ns = now - since;
    absl::Status s;
    if (history_->parsed()) {
      absl::StatusOr<LabelMap> labels = ParseLabels(labels_);
      if (!labels.ok()) return FleetFail(err, name, labels.status());
      if (absl::Status re = CheckUserPattern("regex", regex_); !re.ok()) {
        return FleetFail(err, name, re);
      }
      filter.labels.insert(labels->begin(), labels->end());
      absl::StatusOr<std::vector<fleet::FleetPoint>> points =
          fleet::FleetHistory(*ch, regex_, filter);
      if (points.ok()) {
        WriteAnswer(fleet::HistoryRows(*points), "points", context.format,
                    report::WriteFleetHistoryCsv, report::FleetHistoryJson, json::object(),
                    report::WriteFleetHistoryTable, out);
      }
      s = points.status();
    } else if (top_->parsed()) {
      absl::StatusOr<std::vector<fleet::FleetTopRow>> rows =
          fleet::FleetTop(*ch, by_, filter, top_n_);
      if (rows.ok()) {
        const std::string by = fleet::TopByName(by_);
        WriteAnswer(
            fleet::TopRows(*rows), "rows", context.format, report::WriteFleetTopCsv,
            report::FleetTopJson, json{{"by", by}},
            [&](const auto& r, std::ostream& o) { report::WriteFleetTopTable(r, by, o); }, out);
      }
      s = rows.status();
    } else {
      absl::StatusOr<std::vector<fleet::FleetRegression>> rows =
          fleet::FleetRegressions(*ch, filter, now, since, threshold_);
      if (rows.ok()) {
        WriteAnswer(fleet::RegressionRows(*rows), "kernels", context.format,
                    report::WriteFleetRegressionsCsv, report::FleetRegressionsJson, json::object(),
                    report::WriteFleetRegressionsTable, out);
      }
      s = rows.status();
    }
    if (s.ok()) s = FlushOutput(out);
    return s.ok() ? 0 : FleetFail(err, name, s);
  }

 private:
  static constexpr int64_t kDay = 86'400'000'000'000;

  void AddSince(CLI::App* sub, CliContext& context, const char* example, int64_t& since_ns) {
    sub->add_option("--since", since_ns, absl::StrCat("How far back (default ", example, ")"))
        ->transform(PositiveDuration())
        ->option_text("DURATION");
    sub->add_option("--pod", pod_, "Only this pod");
    clickhouse_.Add(sub);
    AddFormatFlag(sub, context.format);
  }

  int RunStatus(CliContext& context, std::ostream& out, std::ostream& err) {
    absl::StatusOr<std::unique_ptr<AggregatorClient>> client = context.Connect();
    if (!client.ok()) return Fail(err, "fleet status", client.status(), kExitUsage);
    v1::ListAgentsResponse response;
    absl::Status s = (*client)->Call(&Stub::ListAgents, v1::ListAgentsRequest(), &response);
    if (!s.ok()) return Fail(err, "fleet status", s, kExitBadInput);
    WriteStatus(response.fleet(), context.clock.NowNs(), context.format, out);
    s = FlushOutput(out);
    return s.ok() ? 0 : Fail(err, "fleet status", s, kExitBadInput);
  }

  CLI::App *status_, *history_, *top_, *regressions_;
  ClickHouseFlags clickhouse_;
  std::string regex_, pod_;
  std::vector<std::string> labels_;
  int64_t history_since_ = 30 * kDay, top_since_ = kDay, regressions_since_ = 7 * kDay;
  fleet::TopBy by_ = fleet::TopBy::kKernel;
  int top_n_ = 20;
  double threshold_ = 0.05;
};

}  // namespace

std::unique_ptr<Command> AddFleetCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<FleetCommand>(
      app.add_subcommand("fleet",
                         "The fleet store in ClickHouse: replication status and "
                         "queries across every pod"),
      context);
}

}  // namespace podprof::cli
