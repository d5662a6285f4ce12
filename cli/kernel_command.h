// `podprof kernel`: one kernel: what it is (HLO, source, MLIR), its statistics and verdict in
// a capture, per chip, and its history over the stored captures.
#ifndef PODPROF_CLI_KERNEL_COMMAND_H_
#define PODPROF_CLI_KERNEL_COMMAND_H_

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/command.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::cli {

struct KernelOptions {
  std::string op_name;
  std::string module;      // empty: the newest stored kernel of that name
  std::string capture_id;  // empty: the newest capture holding it
  bool full = false;       // whole HLO and MLIR texts, not their first lines
  OutputFormat format = OutputFormat::kTable;
  // How the table meets the terminal (report/table.h); csv and json are always whole.
  TableFit fit;
};

std::unique_ptr<Command> AddKernelCommand(CLI::App& app, CliContext& context);

// Errors: those of AggregatorClient::Check (NOT_FOUND naming the kernel or the capture),
// Unavailable when `out` fails.
absl::Status RunKernel(AggregatorClient& client, const KernelOptions& options, std::ostream& out);

// The table of `response`. (--format csv writes its Utilization Viewer rows instead,
// report::WriteKernelProfileCsv; json report::KernelJson.)
void WriteKernel(const v1::DescribeKernelResponse& response, const KernelOptions& options,
                 std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_KERNEL_COMMAND_H_
