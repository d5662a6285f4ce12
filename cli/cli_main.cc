#include "cli/cli_main.h"

#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/aggregator_commands.h"
#include "cli/demo.h"
#include "cli/exit_codes.h"
#include "cli/inspect.h"
#include "cli/kernel_commands.h"
#include "cli/pod_commands.h"
#include "common/clock.h"
#include "security/tls.h"

namespace podprof::cli {
namespace {

const std::map<std::string, OutputFormat> kFormats = {
    {"table", OutputFormat::kTable}, {"json", OutputFormat::kJson}, {"csv", OutputFormat::kCsv}};

void AddFormatFlag(CLI::App* cmd, OutputFormat& format) {
  cmd->add_option("--format", format, "Output format: table, json or csv")
      ->transform(CLI::CheckedTransformer(kFormats, CLI::ignore_case))
      ->option_text("table|json|csv");
}

// Turns a positive duration ("30s", "1.5h") into its ns, so that the option binds an int64_t.
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

// Turns a capture status name into the enum's number, so that the option binds the enum.
CLI::Validator CaptureStatusValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<v1::CaptureStatus> status = ParseCaptureStatus(text);
        if (!status.ok()) return std::string(status.status().message());
        text = absl::StrCat(static_cast<int>(*status));
        return "";
      },
      "STATUS");
}

// The CLI's TLS files: all three given (or none, for plaintext).
struct CliTls {
  std::string cert, key, ca;
};

void AddTlsFlags(CLI::App* cmd, CliTls& tls) {
  cmd->add_option("--tls-cert", tls.cert, "This operator's certificate, PEM (or $PODPROF_TLS_CERT)")
      ->envname("PODPROF_TLS_CERT");
  cmd->add_option("--tls-key", tls.key, "Its private key, PEM (or $PODPROF_TLS_KEY)")
      ->envname("PODPROF_TLS_KEY");
  cmd->add_option("--tls-ca", tls.ca,
                  "CA bundle the aggregator's certificate must chain to (or $PODPROF_TLS_CA); "
                  "without the three TLS flags the CLI speaks plaintext")
      ->envname("PODPROF_TLS_CA");
}

// Mutual TLS when the TLS files are given, plaintext when none is.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> CliCredentials(const CliTls& tls) {
  if (tls.cert.empty() && tls.key.empty() && tls.ca.empty()) return nullptr;
  if (tls.cert.empty() || tls.key.empty() || tls.ca.empty()) {
    return absl::InvalidArgumentError("--tls-cert, --tls-key and --tls-ca go together");
  }
  return security::ChannelCredentials({false, tls.cert, tls.key, tls.ca});
}

// The flags every aggregator command has: where the aggregator is, the deadline, the format.
void AddAggregatorFlags(CLI::App* cmd, AggregatorTarget& target, OutputFormat& format,
                        CliTls& tls) {
  AddTlsFlags(cmd, tls);
  cmd->add_option("--aggregator", target.address,
                  "Aggregator address, host:port (or $PODPROF_AGGREGATOR)")
      ->envname("PODPROF_AGGREGATOR")
      ->capture_default_str();
  cmd->add_option("--timeout", target.timeout_ns,
                  "Deadline of each call to the aggregator, e.g. 30s, 2m (default 30s); for "
                  "import it covers the whole upload")
      ->transform(PositiveDuration())
      ->option_text("DURATION");
  AddFormatFlag(cmd, format);
}

// Prints the one-line error of `podprof <command>` and returns `exit_code`, or
// kExitUnreachable when the aggregator could not be reached (AggregatorClient::Check).
int Fail(std::ostream& err, const char* command, const absl::Status& status, int exit_code) {
  err << "podprof " << command << ": " << status.message() << "\n";
  if (status.GetPayload(kUnreachablePayload).has_value()) return kExitUnreachable;
  return exit_code;
}

}  // namespace

int CliMain(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"podprof: profile TPU pods: capture kernel timelines, keep kernel statistics"};
  app.name("podprof");
  app.require_subcommand(1);
  // Global flags may come before or after the subcommand.
  app.fallthrough();
  bool no_color = false;
  app.add_flag("--no-color", no_color, "No colors in tables and the live display (also NO_COLOR)");
  app.footer(
      "Start with `podprof demo`: a simulated 4-host pod on this machine, captured once.\n"
      "Every command has --help with examples.");

  // ---- inspect
  InspectOptions inspect;
  std::string by;
  CLI::App* inspect_cmd =
      app.add_subcommand("inspect", "Print kernel statistics of one capture (.xplane.pb)");
  inspect_cmd->add_option("file", inspect.path, "XSpace capture file")->required();
  inspect_cmd->add_option("--top", inspect.top,
                          "Show only the N kernels with the most total time (0 = all; "
                          "default 25 for the table, all for csv and json)");
  inspect_cmd
      ->add_option("--by", by,
                   "Rows per chip and kernel (chip) or per kernel across chips (kernel); "
                   "default kernel for the table, chip for csv and json")
      ->check(CLI::IsMember({"chip", "kernel"}));
  AddFormatFlag(inspect_cmd, inspect.format);

  // Only one subcommand is parsed, so the aggregator commands share these.
  AggregatorTarget target;
  CliTls cli_tls;
  OutputFormat format = OutputFormat::kTable;
  // Also accepted before the subcommand ("podprof --aggregator h:7100 captures"); they bind the
  // same variables as the subcommands' own flags.
  CLI::Option* global_aggregator =
      app.add_option("--aggregator", target.address,
                     "Aggregator address for every subcommand, host:port")
          ->envname("PODPROF_AGGREGATOR");
  CLI::Option* global_format =
      app.add_option("--format", format, "Output format for every subcommand: table, json, csv")
          ->transform(CLI::CheckedTransformer(kFormats, CLI::ignore_case))
          ->option_text("table|json|csv");
  std::vector<std::string> label_flags;
  int64_t since_ago_ns = 0;

  // ---- captures
  CapturesOptions captures;
  CLI::App* captures_cmd =
      app.add_subcommand("captures", "List captures stored by the aggregator, newest first");
  AddAggregatorFlags(captures_cmd, target, format, cli_tls);
  CLI::Option* captures_since =
      captures_cmd
          ->add_option("--since", since_ago_ns,
                       "Only captures that started at most this long ago, e.g. 2h")
          ->transform(PositiveDuration())
          ->option_text("DURATION");
  captures_cmd
      ->add_option("--since-ns", captures.since_ns,
                   "Only captures that started at or after this instant, ns since the Unix epoch")
      ->excludes(captures_since);
  captures_cmd->add_option("--until-ns", captures.until_ns,
                           "Only captures that started before this instant, ns since the Unix "
                           "epoch");
  captures_cmd->add_option("--limit", captures.limit,
                           "Captures per call (default: the aggregator's, 100)");
  captures_cmd
      ->add_option("--status", captures.status,
                   "Only captures in this state: pending, running, complete, partial, failed, "
                   "cancelled")
      ->transform(CaptureStatusValidator())
      ->option_text("STATUS");
  // One value per --label, so that `import --label k=v PATH` leaves PATH to the positional.
  captures_cmd
      ->add_option("--label", label_flags, "Only captures with this label, key=value; repeatable")
      ->allow_extra_args(false);
  captures_cmd->add_flag("--all", captures.all, "Follow the pages until every capture is listed");

  // ---- stats
  StatsOptions stats;
  StatsGrouping stats_by = StatsGrouping::kKernel;
  int32_t stats_chip = 0;
  CLI::App* stats_cmd =
      app.add_subcommand("stats", "Print kernel statistics of one stored capture");
  AddAggregatorFlags(stats_cmd, target, format, cli_tls);
  stats_cmd->add_option("capture", stats.capture_id, "Capture id")->required();
  CLI::Option* stats_by_opt =
      stats_cmd
          ->add_option("--by", stats_by,
                       "Rows per kernel, per (host, chip, kernel), per (host, kernel) or per HLO "
                       "category; default kernel for the table, chip for csv and json")
          ->transform(CLI::CheckedTransformer(
              std::map<std::string, StatsGrouping>{{"kernel", StatsGrouping::kKernel},
                                                   {"chip", StatsGrouping::kChip},
                                                   {"host", StatsGrouping::kHost},
                                                   {"category", StatsGrouping::kCategory}},
              CLI::ignore_case))
          ->option_text("kernel|chip|host|category");
  stats_cmd->add_option("--kernel", stats.kernel_regex,
                        "Only kernels whose op name matches this regular expression");
  stats_cmd->add_option("--category", stats.category, "Only kernels of this HLO category");
  stats_cmd->add_option("--host", stats.host, "Only chips of this host");
  CLI::Option* stats_chip_opt =
      stats_cmd->add_option("--chip", stats_chip, "Only this chip ordinal");
  stats_cmd
      ->add_option("--sort", stats.order,
                   "Order of the rows: total (default), count, mean, p50, p99, max or name")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, v1::KernelOrder>{{"total", v1::KERNEL_ORDER_TOTAL_TIME},
                                                 {"count", v1::KERNEL_ORDER_COUNT},
                                                 {"mean", v1::KERNEL_ORDER_MEAN},
                                                 {"p50", v1::KERNEL_ORDER_P50},
                                                 {"p99", v1::KERNEL_ORDER_P99},
                                                 {"max", v1::KERNEL_ORDER_MAX},
                                                 {"name", v1::KERNEL_ORDER_NAME}},
          CLI::ignore_case))
      ->option_text("total|count|mean|p50|p99|max|name");
  stats_cmd->add_option("--top", stats.top,
                        "Show only the first N rows (0 = all; default 25 for the table, all for "
                        "csv and json)");

  // ---- history
  HistoryOptions history;
  CLI::App* history_cmd =
      app.add_subcommand("history", "Print how matching kernels behaved over the stored captures");
  AddAggregatorFlags(history_cmd, target, format, cli_tls);
  history_cmd
      ->add_option("kernel", history.kernel_regex,
                   "Regular expression matched against op names (e.g. 'fusion\\.1[0-9]')")
      ->required();
  history_cmd->add_option("--module", history.module,
                          "Only kernels whose module name contains this");
  CLI::Option* history_since =
      history_cmd
          ->add_option("--since", since_ago_ns,
                       "Only captures that started at most this long ago, e.g. 168h")
          ->transform(PositiveDuration())
          ->option_text("DURATION");
  history_cmd
      ->add_option("--since-ns", history.since_ns,
                   "Only captures that started at or after this instant, ns since the Unix epoch")
      ->excludes(history_since);
  history_cmd->add_option("--until-ns", history.until_ns,
                          "Only captures that started before this instant, ns since the Unix "
                          "epoch");
  history_cmd->add_option("--max-kernels", history.max_kernels,
                          "Most kernels, those with the largest total time (default: the "
                          "aggregator's, 20)");

  // ---- kernel
  KernelOptions kernel;
  CLI::App* kernel_cmd = app.add_subcommand(
      "kernel",
      "Show one kernel: what it is (HLO, source, MLIR), its statistics and verdict "
      "in a capture, per chip, and its history");
  AddAggregatorFlags(kernel_cmd, target, format, cli_tls);
  kernel_cmd->add_option("name", kernel.op_name, "The kernel's op name, exactly (e.g. fusion.3)")
      ->required();
  kernel_cmd->add_option("--capture", kernel.capture_id,
                         "Capture to show (default: the newest holding the kernel)");
  kernel_cmd->add_option("--module", kernel.module,
                         "Module of the kernel, where several modules have one of that name");
  kernel_cmd->add_flag("--full", kernel.full, "Print the whole HLO and MLIR texts");
  kernel_cmd->footer(
      "Examples:\n  podprof kernel fusion.3\n  podprof kernel flash_attention --full\n"
      "  podprof kernel all-gather.1 --capture cap-1796003829474-cf16 --format json");

  // ---- stragglers
  StragglerOptions stragglers;
  CLI::App* stragglers_cmd = app.add_subcommand(
      "stragglers", "Show which chips made the others wait at a capture's collectives");
  AddAggregatorFlags(stragglers_cmd, target, format, cli_tls);
  stragglers_cmd->add_option("capture", stragglers.capture_id, "Capture id")->required();
  stragglers_cmd->add_option("--top", stragglers.top, "Worst collectives shown (default 10)");
  stragglers_cmd->footer(
      "Examples:\n  podprof stragglers cap-1796003829474-cf16\n"
      "  podprof stragglers cap-1796003829474-cf16 --format json | jq '.chips[0]'");

  // ---- diff
  DiffOptions diff;
  bool fail_on_regression = false;
  CLI::App* diff_cmd =
      app.add_subcommand("diff", "Compare the kernels of two captures and flag regressions");
  AddAggregatorFlags(diff_cmd, target, format, cli_tls);
  diff_cmd->add_option("baseline", diff.baseline_capture_id, "Capture id of the reference")
      ->required();
  diff_cmd->add_option("candidate", diff.candidate_capture_id, "Capture id to judge")->required();
  diff_cmd->add_option("--kernel", diff.kernel_regex,
                       "Only kernels whose op name matches this regular expression");
  diff_cmd
      ->add_option("--threshold", diff.threshold,
                   "Relative p50 slowdown that counts as a regression (0.05 = 5%)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  diff_cmd->add_option("--top", diff.top,
                       "Show only the N kernels whose total time changed most (0 = all; "
                       "default 25 for the table, all for csv and json)");
  diff_cmd->add_flag("--fail-on-regression", fail_on_regression,
                     "Exit with status 1 when a kernel regressed");

  // ---- import
  ImportOptions import;
  std::vector<std::string> import_paths;
  CLI::App* import_cmd = app.add_subcommand(
      "import", "Upload .xplane.pb files (one per host) to the aggregator as a new capture");
  AddAggregatorFlags(import_cmd, target, format, cli_tls);
  import_cmd
      ->add_option("path", import_paths,
                   ".xplane.pb files, or XProf session directories whose *.xplane.pb files "
                   "are all imported")
      ->required();
  import_cmd
      ->add_option("--label", label_flags, "Label stored with the capture, key=value; repeatable")
      ->allow_extra_args(false);

  inspect_cmd->footer(
      "Examples:\n  podprof inspect host0.xplane.pb\n"
      "  podprof inspect host0.xplane.pb --by chip --format csv > kernels.csv");
  captures_cmd->footer(
      "Examples:\n  podprof captures --since 24h\n  podprof captures --label run=baseline "
      "--status complete --format json");
  stats_cmd->footer(
      "Examples:\n  podprof stats cap-1796003829474-cf16\n"
      "  podprof stats cap-1796003829474-cf16 --by host --kernel 'fusion\\..*' --top 10\n"
      "  podprof stats cap-1796003829474-cf16 --format csv > stats.csv");
  history_cmd->footer(
      "Examples:\n  podprof history 'fusion\\.5$' --since 168h\n"
      "  podprof history all-reduce --module jit_train_step --format csv");
  diff_cmd->footer(
      "Examples:\n  podprof diff cap-A cap-B\n"
      "  podprof diff cap-A cap-B --threshold 0.1 --fail-on-regression   # exit 1 on a "
      "regression");
  import_cmd->footer(
      "Examples:\n  podprof import /tmp/xprof/plugins/profile/2026_11_30_02_03_04\n"
      "  podprof import host0.xplane.pb host1.xplane.pb --label run=nightly");

  // ---- agents
  CLI::App* agents_cmd =
      app.add_subcommand("agents", "List the agents registered with the aggregator");
  AddAggregatorFlags(agents_cmd, target, format, cli_tls);
  agents_cmd
      ->add_option("--selector", label_flags, "Only agents with this label, key=value; repeatable")
      ->allow_extra_args(false);
  agents_cmd->footer(
      "Examples:\n  podprof agents --aggregator 10.0.0.5:7100\n"
      "  podprof agents --selector slice=s1 --format json");

  // ---- capture
  CaptureOptions capture;
  std::vector<std::string> capture_hosts;
  bool capture_all = false;
  CLI::App* capture_cmd = app.add_subcommand(
      "capture", "Capture every chosen host at one instant and store the merged timeline");
  AddAggregatorFlags(capture_cmd, target, format, cli_tls);
  CLI::Option* hosts_opt =
      capture_cmd->add_option("--hosts", capture_hosts, "Hosts to capture (comma-separated)")
          ->delimiter(',');
  CLI::Option* selector_opt =
      capture_cmd
          ->add_option("--selector", label_flags, "Hosts with this label, key=value; repeatable")
          ->allow_extra_args(false)
          ->excludes(hosts_opt);
  capture_cmd->add_flag("--all", capture_all, "Every online agent (the default)")
      ->excludes(hosts_opt)
      ->excludes(selector_opt);
  capture_cmd->add_option("--duration", capture.duration_ns, "Length of the window, e.g. 2s")
      ->transform(PositiveDuration())
      ->option_text("DURATION (default 2s)");
  int64_t delay_ns = 0;
  CLI::Option* delay_opt =
      capture_cmd->add_option("--delay", delay_ns, "Start the window this much later, e.g. 30s")
          ->transform(PositiveDuration())
          ->option_text("DURATION");
  capture_cmd->add_option("--host-tracer-level", capture.host_tracer_level,
                          "Host TraceMe verbosity 0-3 (default: the agent's, 2)");
  capture_cmd->add_option("--counter-interval", capture.counter_interval_ms,
                          "Runtime metric sampling interval, ms (default: the agent's)");
  capture_cmd->add_option("--top", capture.top, "Kernels listed at the end (default 10)");
  std::vector<std::string> capture_labels;
  capture_cmd
      ->add_option("--label", capture_labels,
                   "Label stored with the capture, key=value; repeatable")
      ->allow_extra_args(false);
  capture_cmd->footer(
      "Examples:\n  podprof capture --duration 2s\n"
      "  podprof capture --hosts tpu-0,tpu-1 --delay 30s --label run=baseline\n"
      "  podprof capture --selector slice=s1 --format json > capture.json\n"
      "Exit status: 0 complete, 1 partial (some hosts failed) or failed, 2 bad usage, 3 "
      "aggregator unreachable.");

  // ---- export
  ExportOptions export_opts;
  std::string export_format = "perfetto";
  AggregatorTarget export_target;
  export_target.timeout_ns = int64_t{600} * 1'000'000'000;
  CLI::App* export_cmd = app.add_subcommand(
      "export", "Write a stored capture's merged timeline for Perfetto, Chrome or XProf");
  export_cmd->add_option("capture", export_opts.capture_id, "Capture id")->required();
  AddTlsFlags(export_cmd, cli_tls);
  export_cmd
      ->add_option("--aggregator", export_target.address,
                   "Aggregator address, host:port (or $PODPROF_AGGREGATOR)")
      ->envname("PODPROF_AGGREGATOR")
      ->capture_default_str();
  export_cmd->add_option("--timeout", export_target.timeout_ns, "Deadline of the whole export")
      ->transform(PositiveDuration())
      ->option_text("DURATION (default 10m)");
  export_cmd
      ->add_option("--format", export_format,
                   "perfetto (.pftrace, for ui.perfetto.dev), chrome (JSON, for small captures) "
                   "or xprof (an XProf session directory)")
      ->check(CLI::IsMember({"perfetto", "chrome", "xprof"}))
      ->option_text("perfetto|chrome|xprof");
  export_cmd->add_option("-o,--output", export_opts.path,
                         "File (or directory for xprof) to write; default CAPTURE.pftrace or "
                         "CAPTURE.json in the current directory");
  export_cmd->footer(
      "Examples:\n  podprof export cap-1796003829474-cf16 -o pod.pftrace\n"
      "  podprof export cap-1796003829474-cf16 --format chrome -o pod.json");

  // ---- demo
  DemoOptions demo;
  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "Run a simulated pod on this machine, capture it once and show the results");
  demo_cmd->add_option("--hosts", demo.hosts, "Simulated hosts (1-64)")->capture_default_str();
  demo_cmd->add_option("--generation", demo.generation, "TPU generation: v4, v5e, v5p or v6e")
      ->capture_default_str();
  demo_cmd->add_option("--duration", demo.duration_ns, "Length of the capture window, e.g. 2s")
      ->transform(PositiveDuration())
      ->option_text("DURATION (default 2s)");
  demo_cmd->add_option("--seed", demo.seed, "Seed of the pod and of its clock errors")
      ->capture_default_str();
  demo_cmd->add_option("--dir", demo.dir,
                       "Directory for the database, logs and trace (default: a new one in /tmp)");
  demo_cmd->add_flag("--keep", demo.keep,
                     "Leave the aggregator, agents and simulated hosts running afterwards");
  AddFormatFlag(demo_cmd, demo.format);
  demo_cmd->footer(
      "Examples:\n  podprof demo\n  podprof demo --hosts 8 --generation v6e --duration 1s\n"
      "  podprof demo --format json | jq .hosts\n  podprof demo --keep   # then query it");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports help and usage errors by exception; this is the one place they stop.
    return app.exit(e, out, err) == 0 ? 0 : kExitUsage;
  }

  if (inspect_cmd->parsed()) {
    if (!by.empty()) {
      inspect.by_set = true;
      inspect.by = by == "chip" ? GroupBy::kChip : GroupBy::kKernel;
    }
    absl::Status s = RunInspect(inspect, out);
    return s.ok() ? 0 : Fail(err, "inspect", s, kExitBadInput);
  }

  if (demo_cmd->parsed()) {
    if (global_format->count() > 0 && demo.format == OutputFormat::kTable) demo.format = format;
    demo.display = Display::ForStdout(no_color);
    return RunDemo(demo, out, err);
  }
  RealClock clock;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = CliCredentials(cli_tls);
  if (!credentials.ok()) {
    err << "podprof: " << credentials.status().message() << "\n";
    return kExitUsage;
  }
  target.credentials = export_target.credentials = *credentials;
  if (export_cmd->parsed()) {
    if (global_aggregator->count() > 0 && export_target.address == AggregatorTarget().address) {
      export_target.address = target.address;
    }
    AggregatorClient export_client(export_target, clock);
    export_opts.kind = export_format == "chrome"  ? ExportKind::kChrome
                       : export_format == "xprof" ? ExportKind::kXprof
                                                  : ExportKind::kPerfetto;
    absl::StatusOr<std::string> path = RunExport(export_client, export_opts, err);
    if (!path.ok()) return Fail(err, "export", path.status(), kExitBadInput);
    out << *path << "\n";
    return 0;
  }
  AggregatorClient client(target, clock);
  absl::StatusOr<std::map<std::string, std::string>> labels = ParseLabels(label_flags);

  if (agents_cmd->parsed()) {
    if (!labels.ok()) return Fail(err, "agents", labels.status(), kExitUsage);
    AgentsOptions agents;
    agents.selector = *labels;
    agents.format = format;
    absl::Status s = RunAgents(client, agents, out);
    return s.ok() ? 0 : Fail(err, "agents", s, kExitBadInput);
  }
  if (capture_cmd->parsed()) {
    if (!labels.ok()) return Fail(err, "capture", labels.status(), kExitUsage);
    absl::StatusOr<std::map<std::string, std::string>> stored = ParseLabels(capture_labels);
    if (!stored.ok()) return Fail(err, "capture", stored.status(), kExitUsage);
    capture.hosts = capture_hosts;
    capture.selector = *labels;
    capture.labels = *stored;
    if (delay_opt->count() > 0) capture.delay_ns = delay_ns;
    capture.format = format;
    capture.display = Display::ForStdout(no_color);
    absl::StatusOr<CaptureResult> result = RunCapture(client, capture, out, err);
    if (!result.ok()) return Fail(err, "capture", result.status(), kExitBadInput);
    WriteCaptureResult(*result, capture, nlohmann::json::object(), out);
    if (absl::Status s = FlushOutput(out); !s.ok()) return Fail(err, "capture", s, kExitBadInput);
    return result->status == v1::CAPTURE_STATUS_COMPLETE ? 0 : kExitPartial;
  }
  if (captures_cmd->parsed()) {
    if (!labels.ok()) return Fail(err, "captures", labels.status(), kExitUsage);
    captures.labels = *labels;
    if (captures_since->count() > 0) captures.since_ago_ns = since_ago_ns;
    captures.format = format;
    absl::Status s = RunCaptures(client, captures, out);
    return s.ok() ? 0 : Fail(err, "captures", s, kExitBadInput);
  }
  if (stats_cmd->parsed()) {
    if (stats_by_opt->count() > 0) stats.by = stats_by;
    if (stats_chip_opt->count() > 0) stats.chip = stats_chip;
    stats.format = format;
    absl::Status s = RunStats(client, stats, out);
    return s.ok() ? 0 : Fail(err, "stats", s, kExitBadInput);
  }
  if (kernel_cmd->parsed()) {
    kernel.format = format;
    absl::Status s = RunKernel(client, kernel, out);
    return s.ok() ? 0 : Fail(err, "kernel", s, kExitBadInput);
  }
  if (stragglers_cmd->parsed()) {
    stragglers.format = format;
    absl::Status s = RunStragglers(client, stragglers, out);
    return s.ok() ? 0 : Fail(err, "stragglers", s, kExitBadInput);
  }
  if (history_cmd->parsed()) {
    if (history_since->count() > 0) history.since_ago_ns = since_ago_ns;
    history.format = format;
    absl::Status s = RunHistory(client, history, out);
    return s.ok() ? 0 : Fail(err, "history", s, kExitBadInput);
  }
  if (diff_cmd->parsed()) {
    diff.format = format;
    absl::StatusOr<uint32_t> regressions = RunDiff(client, diff, out);
    if (!regressions.ok()) return Fail(err, "diff", regressions.status(), kExitBadInput);
    return fail_on_regression && *regressions > 0 ? kExitRegression : 0;
  }
  if (import_cmd->parsed()) {
    if (!labels.ok()) return Fail(err, "import", labels.status(), kExitUsage);
    // Everything is checked before the first byte is sent, so a bad path uploads nothing.
    absl::StatusOr<std::vector<ImportFile>> files = ExpandImportPaths(import_paths);
    if (!files.ok()) return Fail(err, "import", files.status(), kExitBadInput);
    if (absl::Status s = CheckDistinctHosts(*files); !s.ok()) {
      return Fail(err, "import", s, kExitUsage);
    }
    import.files = *std::move(files);
    import.labels = *labels;
    import.format = format;
    absl::Status s = RunImport(client, import, out, err);
    return s.ok() ? 0 : Fail(err, "import", s, kExitBadInput);
  }
  return 0;
}

}  // namespace podprof::cli
