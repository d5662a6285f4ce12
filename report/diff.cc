#include "report/diff.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "report/format.h"

namespace podprof::report {
namespace {

nlohmann::json DeltaSideJson(bool present, const v1::KernelStats& s) {
  if (!present) return nullptr;
  nlohmann::json j = {{"count", s.count()},     {"total_ps", s.total_ps()},
                      {"mean_ps", s.mean_ps()}, {"p50_ps", s.p50_ps()},
                      {"p90_ps", s.p90_ps()},   {"p99_ps", s.p99_ps()},
                      {"max_ps", s.max_ps()},   {"verdict", s.insight().verdict()}};
  if (const MxuFigure mxu = MxuOf(s.insight()); mxu.known()) {
    j["mxu"] = mxu.busy;
    j["mxu_source"] = MxuSourceName(mxu.source);
  }
  if (s.insight().has_kernel_profile()) {
    const v1::KernelProfile& p = s.insight().kernel_profile();
    // Throttling only where the power manager counted it: nothing else measures it.
    if (p.power_manager()) j["throttled"] = p.throttled();
    j["sync_wait"] = p.sync_wait();
  }
  return j;
}

}  // namespace

const char* const kDiffCsvHeader =
    "kernel,module,baseline_mean_ps,candidate_mean_ps,mean_change,baseline_p99_ps,"
    "candidate_p99_ps,p99_change,regression,baseline_mxu,candidate_mxu,baseline_verdict,"
    "candidate_verdict";

double EffectiveThreshold(const v1::CompareCapturesRequest& request) {
  return request.regression_threshold() > 0 ? request.regression_threshold() : 0.05;
}

MxuFigure MxuOf(bool present, const v1::KernelStats& side) {
  return present ? MxuOf(side.insight()) : MxuFigure{};
}

void WriteDiffCsv(const v1::CompareCapturesResponse& response, std::ostream& out) {
  out << kDiffCsvHeader << "\n";
  for (const v1::KernelDelta& d : response.deltas()) {
    const bool both = d.has_baseline() && d.has_candidate();
    auto side = [](bool present, int64_t v) { return present ? absl::StrCat(v) : ""; };
    out << CsvField(d.kernel().op_name()) << ',' << CsvField(d.kernel().module()) << ','
        << side(d.has_baseline(), std::llround(d.baseline().mean_ps())) << ','
        << side(d.has_candidate(), std::llround(d.candidate().mean_ps())) << ','
        << (both ? CsvDouble(d.mean_change()) : "") << ','
        << side(d.has_baseline(), d.baseline().p99_ps()) << ','
        << side(d.has_candidate(), d.candidate().p99_ps()) << ','
        << (both ? CsvDouble(d.p99_change()) : "") << ',' << (d.regression() ? "true" : "false");
    const MxuFigure a = MxuOf(d.has_baseline(), d.baseline());
    const MxuFigure b = MxuOf(d.has_candidate(), d.candidate());
    out << ',' << (a.known() ? CsvDouble(a.busy) : "") << ','
        << (b.known() ? CsvDouble(b.busy) : "") << ','
        << CsvField(d.has_baseline() ? d.baseline().insight().verdict() : "") << ','
        << CsvField(d.has_candidate() ? d.candidate().insight().verdict() : "") << "\n";
  }
}

nlohmann::json DiffJson(const v1::CompareCapturesRequest& request,
                        const v1::CompareCapturesResponse& response) {
  nlohmann::json deltas = nlohmann::json::array();
  for (const v1::KernelDelta& d : response.deltas()) {
    deltas.push_back({{"kernel", d.kernel().op_name()},
                      {"module", d.kernel().module()},
                      {"category", d.kernel().category()},
                      {"baseline", DeltaSideJson(d.has_baseline(), d.baseline())},
                      {"candidate", DeltaSideJson(d.has_candidate(), d.candidate())},
                      {"mean_change", d.mean_change()},
                      {"p50_change", d.p50_change()},
                      {"p99_change", d.p99_change()},
                      {"total_ps_change", d.total_ps_change()},
                      {"regression", d.regression()}});
  }
  return {{"baseline", request.baseline_capture_id()},
          {"candidate", request.candidate_capture_id()},
          {"threshold", EffectiveThreshold(request)},
          {"regression_count", response.regression_count()},
          {"deltas", std::move(deltas)}};
}

}  // namespace podprof::report
