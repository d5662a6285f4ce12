// The CLI prints with report/'s writers (output formats, CSV fields, tables, kernel rows), the
// ones the aggregator's HTTP API answers with too, so a CSV from `podprof stats` and one from
// /api/v1 have the same columns. Its names are the CLI's own.
#ifndef PODPROF_CLI_REPORT_H_
#define PODPROF_CLI_REPORT_H_

#include "report/diff.h"
#include "report/format.h"
#include "report/history.h"
#include "report/kernel_rows.h"
#include "report/proto_json.h"

namespace podprof::cli {
using namespace ::podprof::report;  // NOLINT(build/namespaces): one vocabulary for output
}  // namespace podprof::cli

#endif  // PODPROF_CLI_REPORT_H_
