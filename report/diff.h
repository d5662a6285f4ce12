// Two captures compared kernel by kernel (the aggregator's CompareCaptures), written one way
// for `podprof diff --format csv|json` and the HTTP API's /api/v1/diff.
#ifndef PODPROF_REPORT_DIFF_H_
#define PODPROF_REPORT_DIFF_H_

#include <ostream>

#include "nlohmann/json_fwd.hpp"
#include "proto/podprof_aggregator.pb.h"
#include "report/mxu.h"

namespace podprof::report {

// The CSV header of a diff.
extern const char* const kDiffCsvHeader;

// The threshold the aggregator applied: 0 in the request means its default (5%).
double EffectiveThreshold(const v1::CompareCapturesRequest& request);

// The MXU's figure on one side, as `stats` shows it (report/mxu.h); unknown when the side is
// absent.
MxuFigure MxuOf(bool present, const v1::KernelStats& side);

// kDiffCsvHeader and a line per kernel; an absent side's fields are empty.
void WriteDiffCsv(const v1::CompareCapturesResponse& response, std::ostream& out);

// {"baseline", "candidate", "threshold", "regression_count", "deltas": [...]}, a side absent
// from one capture as null. A delta pairs kernels by (module, op name), which may be different
// kernel ids on the two sides (recompiles), so it carries no kernel_id.
nlohmann::json DiffJson(const v1::CompareCapturesRequest& request,
                        const v1::CompareCapturesResponse& response);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_DIFF_H_
