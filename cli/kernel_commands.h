// `podprof kernel` (one kernel: what it is, its statistics, verdict and history) and
// `podprof stragglers` (who made the pod wait at a capture's collectives).
#ifndef PODPROF_CLI_KERNEL_COMMANDS_H_
#define PODPROF_CLI_KERNEL_COMMANDS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/aggregator_commands.h"
#include "proto/podprof_aggregator.grpc.pb.h"

namespace podprof::cli {

struct KernelOptions {
  std::string op_name;
  std::string module;      // empty: the newest stored kernel of that name
  std::string capture_id;  // empty: the newest capture holding it
  bool full = false;       // whole HLO and MLIR texts, not their first lines
  OutputFormat format = OutputFormat::kTable;
};

// Errors: those of AggregatorClient::Check (NOT_FOUND naming the kernel or the capture),
// Unavailable when `out` fails.
absl::Status RunKernel(AggregatorClient& client, const KernelOptions& options, std::ostream& out);
void WriteKernel(const v1::DescribeKernelResponse& response, const KernelOptions& options,
                 std::ostream& out);

struct StragglerOptions {
  std::string capture_id;
  int top = 10;  // worst instances shown in the table
  OutputFormat format = OutputFormat::kTable;
};

absl::Status RunStragglers(AggregatorClient& client, const StragglerOptions& options,
                           std::ostream& out);
void WriteStragglers(const v1::GetStragglersResponse& response, const StragglerOptions& options,
                     std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_KERNEL_COMMANDS_H_
