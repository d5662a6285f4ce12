#include "cli/demo_command.h"

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "cli/demo.h"
#include "cli/exit_codes.h"
#include "trace/chip_catalog.h"

namespace podprof::cli {
namespace {

class DemoCommand : public Command {
 public:
  DemoCommand(CLI::App* cmd, CliContext& context) : Command(cmd) {
    hosts_ = cmd->add_option("--hosts", options_.hosts,
                             "Simulated hosts (1-64; with --slices, 2 per slice by default)")
                 ->capture_default_str();
    cmd->add_option("--generation", options_.generation, "TPU generation: v4, v5e, v5p, v6e or v7x")
        ->capture_default_str();
    cmd->add_flag("--kernel-profiling", options_.kernel_profiling,
                  "Ask for XProf's standard kernel profiling: each kernel execution's performance "
                  "counters (v7x simulates them)");
    cmd->add_option("--throttle", options_.throttle,
                    "Throttle one simulated chip, HOST:CHIP:FRACTION (e.g. 1:0:0.3)");
    cmd->add_option("--duration", options_.duration_ns, "Length of the capture window, e.g. 2s")
        ->transform(PositiveDuration())
        ->option_text("DURATION (default 2s)");
    cmd->add_option("--timeout", options_.timeout_ns,
                    "How long after the window the capture may take before it is cancelled")
        ->transform(PositiveDuration())
        ->option_text("DURATION (default 90s)");
    cmd->add_option("--seed", options_.seed, "Seed of the pod and of its clock errors")
        ->capture_default_str();
    cmd->add_option("--dir", options_.dir,
                    "Directory for the database, logs and trace (default: a new one in /tmp)");
    cmd->add_flag("--keep", options_.keep,
                  "Leave the aggregator, agents and simulated hosts running afterwards");
    cmd->add_option("--slices", options_.slices,
                    "Run the pod as a multi-slice job of N slices joined over DCN (the hosts "
                    "split evenly) and show the capture's cross-slice view, as podprof dcn does")
        ->option_text("N");
    cmd->add_option("--dcn-delay-at", options_.dcn_delays,
                    "With --slices, from T on the DCN data slice SLICE sends arrives US "
                    "microseconds late (a slow link), T:SLICE:US, e.g. 0s:1:300 (repeatable)")
        ->option_text("T:SLICE:US");
    cmd->add_option("--slow-slice", options_.slow_slices,
                    "With --slices, a slice whose chips compute FACTOR times slower (a late "
                    "producer), SLICE:FACTOR, e.g. 2:1.3 (repeatable)")
        ->option_text("SLICE:FACTOR");
    cmd->add_flag("--recorder", options_.recorder,
                  "The flight recorder instead: arm the agents' recorders, inject a fault, and "
                  "show the snapshot its trigger takes");
    cmd->add_option("--scenario", options_.scenario,
                    "With --recorder, the fault: straggler (a chip turns 1.6x slower), hang (the "
                    "job stops issuing steps) or duty-drop (40% of the steps are not issued)")
        ->check(CLI::IsMember({"straggler", "hang", "duty-drop"}))
        ->capture_default_str();
    cmd->add_option("--fault-at", options_.fault_at_ns,
                    "With --recorder, when the fault starts, from the demo's start")
        ->transform(PositiveDuration())
        ->option_text("DURATION (default 15s)");
    cmd->add_option("--trigger-timeout", options_.trigger_timeout_ns,
                    "With --recorder, how long after the fault to wait for a triggered snapshot "
                    "before giving up (exit 1)")
        ->transform(PositiveDuration())
        ->option_text("DURATION (default 45s)");
    AddFormatFlag(cmd, context.format);
    cmd->footer(
        "Examples:\n  podprof demo\n  podprof demo --hosts 8 --generation v6e --duration 1s\n"
        "  podprof demo --generation v7x --kernel-profiling --throttle 1:0:0.3 --keep\n"
        "  podprof demo --format json | jq .hosts\n  podprof demo --keep   # then query it\n"
        "  podprof demo --slices 4                     # a 4-slice job and its DCN view\n"
        "  podprof demo --slices 4 --dcn-delay-at 0s:1:300   # the link slice 1 -> 2 slow\n"
        "  podprof demo --recorder                     # a straggler's triggered snapshot\n"
        "  podprof demo --recorder --scenario hang --keep");
  }

  int Run(CliContext& context, std::ostream& out, std::ostream& err) override {
    // Checked before anything starts: a simulated host refusing it says only that it exited.
    if (trace::FindGenerationByName(options_.generation) == nullptr) {
      std::vector<std::string> names;
      for (const trace::ChipGeneration& g : trace::ChipGenerations()) names.push_back(g.name);
      err << "podprof demo: --generation " << options_.generation
          << ": no such TPU generation; use one of " << absl::StrJoin(names, ", ") << "\n";
      return kExitUsage;
    }
    if (options_.slices != 0 && options_.recorder) {
      err << "podprof demo: --slices is for the one-capture demo, not --recorder\n";
      return kExitUsage;
    }
    // Two hosts per slice unless told: each slice then synchronises across hosts over ICI too.
    if (options_.slices > 0 && hosts_->count() == 0) {
      options_.hosts = 2 * options_.slices <= 64 ? 2 * options_.slices : options_.slices;
    }
    options_.format = context.format;
    options_.display = Display::ForStdout(context.no_color);
    return RunDemo(options_, out, err);
  }

 private:
  DemoOptions options_;
  CLI::Option* hosts_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> AddDemoCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<DemoCommand>(
      app.add_subcommand("demo",
                         "Run a simulated pod on this machine, capture it once and show the "
                         "results"),
      context);
}

}  // namespace podprof::cli
