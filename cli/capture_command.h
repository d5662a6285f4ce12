// `podprof capture`: every chosen host captured at one instant through the aggregator, with
// a live display while it runs; also what `podprof demo` runs and prints.
#ifndef PODPROF_CLI_CAPTURE_COMMAND_H_
#define PODPROF_CLI_CAPTURE_COMMAND_H_

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/capture_rows.h"
#include "cli/command.h"
#include "cli/report.h"
#include "nlohmann/json.hpp"

namespace podprof::cli {

// How the terminal may be used: a live display needs a terminal; colors can be turned off
// (--no-color, NO_COLOR).
struct Display {
  bool live = false;
  bool color = false;
  // Decides both for `out` being stdout: a terminal, TERM not "dumb", and for color also no
  // NO_COLOR in the environment and `no_color` false.
  static Display ForStdout(bool no_color);
  // `text` in the terminal's color `code` (an SGR code, "31" red) when color is on; else as is.
  std::string Paint(const std::string& text, const char* code) const;
};

struct CaptureOptions {
  std::vector<std::string> hosts;  // empty with `all` or a selector
  LabelMap selector;
  std::vector<int> slices;  // only hosts in these slices (HostInfo.slice); empty: any
  LabelMap labels;          // stored with the capture
  int64_t duration_ns = 2'000'000'000;
  int64_t delay_ns = 0;
  // `podprof snapshot`: duration_ns is the window before now, from the flight recorders.
  bool snapshot = false;
  // A snapshot's cause (stored as its labels trigger and reason); sent when it names a trigger.
  v1::SnapshotCause cause;
  uint32_t host_tracer_level = 0;   // 0 = the agent's default
  uint32_t metric_interval_ms = 0;  // runtime-metric sampling; 0 = the agent's default
  // Device and python tracer levels and the kernel-profiling settings (kernelprof/options.h),
  // sent as they are; host_tracer_level above overrides the one in here.
  v1::CaptureOptions profiling;
  // How long after the window the capture may take to finish (hosts writing, streaming, the
  // aggregator storing); past it the capture is cancelled and RunCapture fails with
  // DEADLINE_EXCEEDED naming the hosts not done. 0: ten minutes.
  int64_t timeout_ns = 0;
  int top = 10;  // top kernels printed at the end
  OutputFormat format = OutputFormat::kTable;
  Display display;
  // Extra fields to put in the JSON result of each host, by host name (the demo adds the
  // clock errors it injected).
  std::map<std::string, nlohmann::json> host_extras;
};

// The end of a capture as the CLI reports it.
struct CaptureResult {
  std::string capture_id;
  v1::CaptureStatus status = v1::CAPTURE_STATUS_UNSPECIFIED;
  v1::CaptureSummary summary;
  KernelRows top_kernels;
};

std::unique_ptr<Command> AddCaptureCommand(CLI::App& app, CliContext& context);
// `podprof snapshot` (capture_command.cc, sharing `capture`'s code).
std::unique_ptr<Command> AddSnapshotCommand(CLI::App& app, CliContext& context);

// Starts a capture, shows its progress while it runs (a live per-host display on a terminal,
// plain log lines to `err` otherwise), then writes the capture id, each host's outcome and
// clock correction, and the top kernels pod-wide to `out` in the chosen format. Past
// `options.timeout_ns` after the window the capture is cancelled: DEADLINE_EXCEEDED, its
// message naming the hosts that had not finished.
absl::StatusOr<CaptureResult> RunCapture(AggregatorClient& client, const CaptureOptions& options,
                                         std::ostream& out, std::ostream& err);

// Writes a finished capture (the result of RunCapture) in `options.format`; `extra` is merged
// into the JSON object (capture_output.cc, with Display's functions).
void WriteCaptureResult(const CaptureResult& result, const CaptureOptions& options,
                        const nlohmann::json& extra, std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_CAPTURE_COMMAND_H_
