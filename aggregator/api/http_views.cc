// The routes behind the web pages: what the pages draw (the pod timeline per window, the
// collective waits heatmap), the query RPCs the CLI's `kernel` and `diff` print, answered in
// the same JSON and CSV, and exports as downloads.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "aggregator/api/export_stream.h"
#include "aggregator/api/http_api.h"
#include "aggregator/api/http_params.h"
#include "aggregator/api/overviews.h"
#include "aggregator/api/timeline_view.h"
#include "common/checked.h"
#include "common/json_text.h"
#include "common/logging.h"
#include "common/pattern.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"
#include "report/diff.h"
#include "report/kernel_rows.h"

namespace podprof::aggregator {
namespace {

using http::Request;
using http::Response;
using Json = nlohmann::json;

Response JsonResponse(const Json& j) {
  return Response::Text(200, JsonText(j) + "\n", "application/json");
}

// ?hosts=a,b as the store's selection (empty: every host).
storage::HostSelection HostsParam(const Request& req) {
  storage::HostSelection only;
  for (absl::string_view h : absl::StrSplit(Param(req, "hosts"), ',', absl::SkipEmpty())) {
    only.hosts.insert(std::string(h));
  }
  return only;
}

// GET /api/v1/captures/{id}/timeline?from_ns=&to_ns=&width=&counters=a,b|auto|default&hosts=a,b
// &waits=1: the window [from_ns, to_ns) (ns from the capture's start; the whole capture by
// default) at `width` pixels (timeline_view.h); with waits=1 the waits heatmap too, from the
// same reading of the hosts (a page's first view needs both). The whole capture comes from its
// kept overview (overviews.h); other windows are read from the store.
Response Timeline(const HttpApiSources& src, Overviews& overviews, const Request& req) {
  absl::StatusOr<storage::CaptureRow> row = src.queries->StoredCapture(req.params.at("id"));
  if (!row.ok()) return Response::Error(row.status());
  const int64_t length = std::max<int64_t>(1, row->end_ns - row->start_ns);
  absl::StatusOr<int64_t> from = IntParam(req, "from_ns", 0);
  absl::StatusOr<int64_t> to = IntParam(req, "to_ns", length);
  absl::StatusOr<int64_t> width = IntParam(req, "width", 1000);
  for (const auto* v : {&from, &to, &width}) {
    if (!v->ok()) return Response::Error(v->status());
  }
  if (*from >= *to || *width < 1 || *width > 8192) {
    return Response::Error(absl::InvalidArgumentError(
        absl::StrCat("from_ns=", *from, " to_ns=", *to, " width=", *width,
                     ": the window must not be empty and the width 1..8192 pixels")));
  }
  const bool waits = Param(req, "waits") == "1";
  Json fields = {
      {"capture", row->id}, {"start_ns", row->start_ns}, {"from_ns", *from}, {"to_ns", *to}};
  std::set<std::string> counters;
  if (Param(req, "counters") == "default") {
    counters = DefaultCounters(*row);
  } else {
    for (absl::string_view c : absl::StrSplit(Param(req, "counters"), ',', absl::SkipEmpty())) {
      counters.insert(std::string(c));
    }
  }
  // The whole capture, as a page first shows it: from the kept overview.
  if (*from == 0 && *to == length && Param(req, "hosts").empty() &&
      row->status != storage::CaptureState::kRunning && *width <= Overviews::WidthFor(row->chips)) {
    absl::StatusOr<std::shared_ptr<const Overview>> ov = overviews.Get(*row, counters);
    if (!ov.ok()) return Response::Error(ov.status());
    if (waits) fields["waits"] = (*ov)->waits;
    const std::string text = *width == (*ov)->view.width_px()
                                 ? (*ov)->view.Finish(std::move(fields))
                                 : (*ov)->view.Resampled(static_cast<int>(*width)).Finish(fields);
    return Response::Text(200, text + "\n", "application/json");
  }
  // Offsets from the start: checked, so that to_ns=9223372036854775807 is refused, not wrapped.
  const std::optional<int64_t> from_ns = CheckedAdd(row->start_ns, *from);
  const std::optional<int64_t> to_ns = CheckedAdd(row->start_ns, *to);
  if (!from_ns || !to_ns) {
    return Response::Error(absl::InvalidArgumentError(
        absl::StrCat("from_ns=", *from, " to_ns=", *to,
                     ": must be ns from the capture's start, "
                     "at most ",
                     std::numeric_limits<int64_t>::max() - row->start_ns)));
  }
  TimelineWindow w;
  w.from_ns = *from_ns;
  w.to_ns = *to_ns;
  w.width_px = static_cast<int>(*width);
  w.counters = counters;
  absl::StatusOr<Overview> view = ReadView(*src.reads, *row, std::move(w), HostsParam(req), waits);
  if (!view.ok()) return Response::Error(view.status());
  if (waits) fields["waits"] = view->waits;
  return Response::Text(200, view->view.Finish(std::move(fields)) + "\n", "application/json");
}

// The waits heatmap alone: the kept overview's when it has one, else from one reading of the
// hosts asked for.
Response Waits(const HttpApiSources& src, Overviews& overviews, const Request& req) {
  absl::StatusOr<storage::CaptureRow> row = src.queries->StoredCapture(req.params.at("id"));
  if (!row.ok()) return Response::Error(row.status());
  Json j;
  if (Param(req, "hosts").empty() && row->status != storage::CaptureState::kRunning) {
    absl::StatusOr<std::shared_ptr<const Overview>> ov = overviews.Get(*row, DefaultCounters(*row));
    if (!ov.ok()) return Response::Error(ov.status());
    j = (*ov)->waits;
  } else {
    TimelineWindow w;  // the narrowest view: only its reading of the hosts is wanted
    w.from_ns = row->start_ns;
    w.to_ns = std::max(row->end_ns, row->start_ns + 1);
    w.width_px = 1;
    absl::StatusOr<Overview> read = ReadView(*src.reads, *row, std::move(w), HostsParam(req), true);
    if (!read.ok()) return Response::Error(read.status());
    j = std::move(read->waits);
  }
  j["capture"] = row->id;
  return JsonResponse(j);
}

// GET /api/v1/kernels/{name}?capture=&module=: `podprof kernel NAME --format json`; with
// ?format=csv its Utilization Viewer rows, as `podprof kernel NAME --format csv`.
Response Kernel(const HttpApiSources& src, const Request& req) {
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!csv.ok()) return Response::Error(csv.status());
  podprof::v1::DescribeKernelRequest r;
  r.set_op_name(req.params.at("name"));
  r.set_module(Param(req, "module"));
  r.set_capture_id(Param(req, "capture"));
  absl::StatusOr<podprof::v1::DescribeKernelResponse> out = src.queries->DescribeKernel(r);
  if (!out.ok()) return Response::Error(out.status());
  if (!*csv) return JsonResponse(report::KernelJson(*out));
  std::ostringstream text;
  report::WriteKernelProfileCsv(*out, text);
  return Response::Text(200, text.str(), "text/csv; charset=utf-8");
}

// GET /api/v1/diff?baseline=&candidate=&threshold=&kernel=: `podprof diff A B`, JSON or CSV.
Response Diff(const HttpApiSources& src, const Request& req) {
  podprof::v1::CompareCapturesRequest r;
  r.set_baseline_capture_id(Param(req, "baseline"));
  r.set_candidate_capture_id(Param(req, "candidate"));
  r.mutable_filter()->set_op_regex(Param(req, "kernel"));
  if (absl::Status s = CheckUserPattern("kernel", r.filter().op_regex()); !s.ok()) {
    return Response::Error(s);
  }
  const std::string threshold = Param(req, "threshold");
  double t = 0;
  if (!threshold.empty() && (!absl::SimpleAtod(threshold, &t) || t <= 0)) {
    return Response::Error(absl::InvalidArgumentError(
        absl::StrCat("threshold='", threshold, "' is not a positive fraction")));
  }
  r.set_regression_threshold(t);
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!csv.ok()) return Response::Error(csv.status());
  absl::StatusOr<podprof::v1::CompareCapturesResponse> out = src.queries->Compare(r);
  if (!out.ok()) return Response::Error(out.status());
  if (!*csv) return JsonResponse(report::DiffJson(r, *out));
  std::ostringstream text;
  report::WriteDiffCsv(*out, text);
  return Response::Text(200, text.str(), "text/csv; charset=utf-8");
}

// A tar (ustar) member header: XProf sessions are a folder of files, one download.
std::string TarHeader(const std::string& path, uint64_t size, int64_t mtime_s) {
  std::string h(512, '\0');
  path.copy(&h[0], std::min<size_t>(path.size(), 99));
  std::snprintf(&h[100], 8, "%07o", 0644);
  std::snprintf(&h[108], 8, "%07o", 0);
  std::snprintf(&h[116], 8, "%07o", 0);
  std::snprintf(&h[124], 12, "%011llo", static_cast<unsigned long long>(size));
  std::snprintf(&h[136], 12, "%011llo", static_cast<unsigned long long>(mtime_s));
  h[156] = '0';
  h.replace(257, 6, "ustar\0", 6);
  h.replace(263, 2, "00", 2);
  std::fill(h.begin() + 148, h.begin() + 156, ' ');
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(&h[148], 8, "%06o", sum);
  return h;
}

// Whether `path` may be a tar member: relative, without a ".." part, and whole in the header's
// 100-byte name field. A member such as "../x" would be written outside the folder a user
// unpacks into.
bool SafeMemberPath(const std::string& path) {
  if (path.empty() || path.size() > 99 || path.front() == '/') return false;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return false;
  }
  return true;
}

// Writes the body in HTTP/1.1 chunks, so that a download cut short by an error is seen as
// cut short (no closing chunk) rather than as a whole file.
bool WriteChunk(http::StreamWriter& w, const std::string& data) {
  if (data.empty()) return true;
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return w.Write(absl::StrCat(size, data, "\r\n"));
}

// GET /api/v1/captures/{id}/export?format=perfetto|chrome|xprof|csv (&from_ns, &to_ns,
// &hosts, &kernel as `podprof export` narrows): a download; XProf sessions as a tar of the
// per-host .xplane.pb files under plugins/profile/<run>/.
Response Export(const HttpApiSources& src, const Request& req) {
  podprof::v1::ExportCaptureRequest r;
  r.set_capture_id(req.params.at("id"));
  const std::string format = Param(req, "format", "perfetto");
  std::string file = r.capture_id();
  if (format == "perfetto") {
    r.set_format(podprof::v1::EXPORT_FORMAT_PERFETTO);
    file += ".pftrace";
  } else if (format == "chrome") {
    r.set_format(podprof::v1::EXPORT_FORMAT_CHROME_JSON);
    file += ".json";
  } else if (format == "xprof") {
    r.set_format(podprof::v1::EXPORT_FORMAT_XSPACE_DIR);
    file += "-xprof.tar";
  } else if (format == "csv") {
    r.set_format(podprof::v1::EXPORT_FORMAT_CSV);
    file += ".csv";
  } else {
    return Response::Error(absl::InvalidArgumentError(
        absl::StrCat("format='", format, "': use perfetto, chrome, xprof or csv")));
  }
  for (const char* name : {"from_ns", "to_ns"}) {
    absl::StatusOr<int64_t> v = IntParam(req, name, -1);
    if (!v.ok()) return Response::Error(v.status());
    if (*v >= 0) (name[0] == 'f' ? r.set_from_ns(*v) : r.set_to_ns(*v));
  }
  for (const std::string& h : HostsParam(req).hosts) r.add_host_names(h);
  r.set_kernel_regex(Param(req, "kernel"));
  if (absl::Status s = CheckUserPattern("kernel", r.kernel_regex()); !s.ok()) {
    return Response::Error(s);
  }
  absl::StatusOr<ExportPlan> planned = PlanExport(*src.reads, r);
  if (!planned.ok()) return Response::Error(planned.status());
  auto plan = std::make_shared<ExportPlan>(*std::move(planned));
  Response res;
  res.content_type = format == "chrome" ? "application/json"
                     : format == "csv"  ? "text/csv; charset=utf-8"
                                        : "application/octet-stream";
  res.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + file + "\"");
  res.headers.emplace_back("Transfer-Encoding", "chunked");
  res.stream = [src, plan, tar = format == "xprof"](http::StreamWriter& w) {
    // A tar member's header needs its size: the export says each file's before its first
    // chunk, so members stream through rather than being held whole.
    std::string path;
    uint64_t member_bytes = 0;
    bool ok = true;
    auto end_member = [&] {
      if (tar && !path.empty()) {
        ok = ok && WriteChunk(w, std::string((512 - member_bytes % 512) % 512, '\0'));
      }
    };
    ExportSink sink;
    sink.send = [&](const podprof::v1::ExportChunk& c) {
      if (tar && c.path() != path) ok = false;  // a file whose size was not told first
      if (tar) member_bytes += c.data().size();
      return ok = ok && WriteChunk(w, c.data());
    };
    if (tar) {
      sink.file_size = [&](const std::string& next, uint64_t bytes) {
        end_member();
        if (!SafeMemberPath(next)) {  // cut short: no member may leave the download's folder
          PODPROF_LOG(ERROR) << "XProf tar export: refused member \"" << EscapeForTerminal(next)
                             << "\"";
          return ok = false;
        }
        path = next;
        member_bytes = 0;
        return ok = ok && WriteChunk(w, TarHeader(path, bytes, plan->row.start_ns / 1'000'000'000));
      };
    }
    sink.cancelled = [&w] { return w.stopping(); };
    if (!WriteExport(*src.reads, *plan, sink).ok()) return;  // no closing chunk: cut short
    end_member();
    if (tar) ok = ok && WriteChunk(w, std::string(1024, '\0'));
    if (ok) w.Write("0\r\n\r\n");
  };
  return res;
}

}  // namespace

void AddViewRoutes(const HttpApiSources& src, http::Router& r) {
  auto overviews = std::make_shared<Overviews>(*src.reads, *src.clock);
  r.Add("GET", "/api/v1/captures/{id}/timeline",
        [src, overviews](const Request& q) { return Timeline(src, *overviews, q); });
  r.Add("GET", "/api/v1/captures/{id}/waits",
        [src, overviews](const Request& q) { return Waits(src, *overviews, q); });
  r.Add("GET", "/api/v1/captures/{id}/export", [src](const Request& q) { return Export(src, q); });
  r.Add("GET", "/api/v1/kernels/{name}", [src](const Request& q) { return Kernel(src, q); });
  r.Add("GET", "/api/v1/diff", [src](const Request& q) { return Diff(src, q); });
  // What the pages need to know: where "Open in Perfetto" goes, and whether this caller may
  // start and cancel captures (the form is shown only then).
  r.Add("GET", "/api/v1/ui", [src](const Request& q) {
    const bool op =
        src.writes_refused.empty() &&
        src.access->Get()->operators.CheckIdentities(q.identities, q.roles, "an operator").ok();
    return JsonResponse({{"perfetto_ui", src.perfetto_ui}, {"operator", op}});
  });
}

}  // namespace podprof::aggregator
