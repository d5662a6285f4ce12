// The cross-slice (DCN) answer (`podprof dcn`, GET /api/v1/captures/{id}/dcn) as JSON, CSV and
// the table for people, one writer per form shared by the CLI and the aggregator's HTTP API,
// so that `podprof dcn --format json` and the route's JSON are the same bytes, as are their
// CSVs of each table.
#ifndef PODPROF_REPORT_DCN_ROWS_H_
#define PODPROF_REPORT_DCN_ROWS_H_

#include <map>
#include <ostream>
#include <string>

#include "proto/podprof_aggregator.pb.h"

namespace podprof::report {

// The answer's tables: the links (slice -> slice), the producing slices, the worst transfers
// and XProf's per-host rows.
enum class DcnTable { kLinks, kProducers, kTransfers, kXprof };

// The tables by the names `--table` and `?table=` take: links, producers, transfers, xprof.
const std::map<std::string, DcnTable>& DcnTablesByName();

// The whole answer as JSON text (indented, ending in a newline): capture, verdict, slices,
// transfers, expected_transit_ns, named_after_instances, then the rows of each table under
// `links`, `producers`, `worst` and `xprof`, each row with the columns its CSV has but
// `capture`, and `columns`: each of the four's CSV columns (`capture` first), which a table
// without rows has too; where the answer holds the slices x instances matrix (asked for with
// `cells`), `cells` last: `slices`, `instances` (each its rendezvous, step and start_ns),
// `wait_ns` and `producer_ns` (a row of figures per slice, a figure per instance) and what the
// bounds left out. Durations in ns, instants ns since the Unix epoch on the aggregator's
// clock; XProf's figures in us.
std::string DcnJsonText(const v1::GetDcnResponse& response);

// One table as CSV: a header line, then a row each, the columns the JSON's rows have, in
// order (capture first). A table without rows is its header alone.
void WriteDcnCsv(const v1::GetDcnResponse& response, DcnTable table, std::ostream& out);

// The table for people: the verdict first, then the links, the producing slices and the
// `top` worst transfers (all when negative); with `xprof`, every host's XProf rows too.
void WriteDcnTable(const v1::GetDcnResponse& response, int top, bool xprof, std::ostream& out);

// XProf's per-host rows alone, as WriteDcnTable shows them (`podprof inspect --megascale`).
void WriteDcnXprofTable(const v1::GetDcnResponse& response, std::ostream& out);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_DCN_ROWS_H_
