#include "cli/aggregator_commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/errno_status.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "trace/byte_source.h"
#include "trace/xspace_reader.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;
using Json = nlohmann::json;
using StatsRows = google::protobuf::RepeatedPtrField<v1::KernelStats>;

constexpr int kDefaultTableRows = 25;
constexpr absl::string_view kXPlaneSuffix = ".xplane.pb";

// Statistics of every kernel of a large capture, one sketch per row, can pass gRPC's 4 MiB
// default; the bound still stops a confused server from exhausting memory.
constexpr int kMaxResponseBytes = 256 << 20;

std::string OneLine(absl::string_view s) {
  return std::string(
      absl::StripAsciiWhitespace(absl::StrReplaceAll(s, {{"\r\n", " "}, {"\n", " "}})));
}

// The lower time bound of a query: `ago_ns` before now when set, else `since_ns`.
int64_t SinceNs(Clock& clock, const std::optional<int64_t>& ago_ns, int64_t since_ns) {
  return ago_ns.has_value() ? clock.NowNs() - *ago_ns : since_ns;
}

int DefaultTop(int top, OutputFormat format) {
  if (top >= 0) return top;
  return format == OutputFormat::kTable ? kDefaultTableRows : 0;
}

void WriteJson(const Json& j, std::ostream& out) {
  // Kernel names come from captures and may hold invalid UTF-8: replace, never throw.
  out << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

// A number for CSV: six significant digits, enough for rates and relative changes.
std::string CsvDouble(double v) { return absl::StrCat(v); }

// "1 capture", "2 captures".
std::string Count(uint64_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

std::string FormatMeanPs(double mean_ps) { return FormatDurationPs(std::llround(mean_ps)); }

// Proto maps have no order; sort so that output is stable.
std::map<std::string, std::string> SortedLabels(
    const google::protobuf::Map<std::string, std::string>& labels) {
  return std::map<std::string, std::string>(labels.begin(), labels.end());
}

std::string JoinLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  return absl::StrJoin(SortedLabels(labels), ";", absl::PairFormatter("="));
}

void AddLabels(const std::map<std::string, std::string>& labels,
               google::protobuf::Map<std::string, std::string>* to) {
  for (const auto& [key, value] : labels) (*to)[key] = value;
}

// ---- captures

std::string CaptureDuration(const v1::CaptureSummary& c) {
  if (c.start_ns() <= 0 || c.end_ns() <= c.start_ns()) return "-";
  return FormatDurationPs((c.end_ns() - c.start_ns()) * 1000);
}

Json CaptureJson(const v1::CaptureSummary& c) {
  Json hosts = Json::array();
  for (const v1::HostCaptureResult& h : c.hosts()) hosts.push_back(h.host_name());
  return {{"capture", c.capture_id()},
          {"created_ns", c.created_ns()},
          {"start_ns", c.start_ns()},
          {"end_ns", c.end_ns()},
          {"status", CaptureStatusName(c.status())},
          {"hosts", c.hosts_size()},
          {"host_names", std::move(hosts)},
          {"chips", c.chip_count()},
          {"kernels", c.kernel_count()},
          {"events", c.event_count()},
          {"labels", SortedLabels(c.labels())},
          {"error_message", c.error_message()}};
}

// ---- stats

v1::KernelGrouping ToProto(StatsGrouping by) {
  switch (by) {
    case StatsGrouping::kKernel:
      return v1::KERNEL_GROUPING_KERNEL;
    case StatsGrouping::kChip:
      return v1::KERNEL_GROUPING_CHIP;
    case StatsGrouping::kHost:
      return v1::KERNEL_GROUPING_HOST;
    case StatsGrouping::kCategory:
      return v1::KERNEL_GROUPING_CATEGORY;
  }
  return v1::KERNEL_GROUPING_UNSPECIFIED;
}

// Roll-ups leave the host empty and the chip -1, and category rows the op name empty:
// print `*` for "all of them", as `inspect` does.
std::string HostLabel(const v1::KernelStats& s) {
  return s.host_name().empty() ? "*" : s.host_name();
}
std::string ChipLabel(const v1::KernelStats& s) {
  return s.chip_ordinal() < 0 ? "*" : absl::StrCat(s.chip_ordinal());
}
std::string KernelLabel(const v1::KernelStats& s) {
  return s.kernel().op_name().empty() ? "*" : s.kernel().op_name();
}

// A counter's mean over the row, or empty where no counter of that name covered it.
std::string InsightCsv(const v1::KernelStats& s, const std::string& counter) {
  auto it = s.insight().utilization().find(counter);
  return it == s.insight().utilization().end() ? "" : CsvDouble(it->second);
}

// The insight of a row for JSON: the verdict, and counter figures only where counters were.
Json InsightJson(const v1::KernelInsight& in) {
  Json j = {{"verdict", in.verdict()},
            {"verdict_text", in.verdict_text()},
            {"arithmetic_intensity", in.arithmetic_intensity()},
            {"ridge_point", in.ridge_point()},
            {"roofline_fraction", in.roofline_fraction()},
            {"wait_fraction", in.wait_fraction()},
            {"wait_ps", in.wait_ps()},
            {"straggler", in.straggler()},
            {"has_counters", in.has_counters()}};
  if (in.has_counters()) {
    Json u = Json::object(), t = Json::object();
    for (const auto& [k, v] : in.utilization()) u[k] = v;
    for (const auto& [k, v] : in.totals()) t[k] = v;
    j["utilization"] = u;
    j["totals"] = t;
    j["stall_fraction"] = in.stall_fraction();
    j["dominant_stall"] = in.dominant_stall();
    j["counter_covered_ps"] = in.counter_covered_ps();
  }
  return j;
}

void WriteStatsCsvRows(const std::string& capture_id, const StatsRows& rows, std::ostream& out) {
  out << kStatsCsvHeader << "\n";
  for (const v1::KernelStats& s : rows) {
    out << CsvField(capture_id) << ',' << CsvField(HostLabel(s)) << ',' << ChipLabel(s) << ','
        << CsvField(KernelLabel(s)) << ',' << CsvField(s.kernel().category()) << ',' << s.count()
        << ',' << s.total_ps() << ',' << s.min_ps() << ',' << s.max_ps() << ','
        << std::llround(s.mean_ps()) << ',' << s.p50_ps() << ',' << s.p90_ps() << ',' << s.p99_ps()
        << ',' << s.kernel().flops() << ',' << s.kernel().bytes_accessed() << ','
        << CsvField(s.insight().verdict()) << ',' << InsightCsv(s, "mxu_busy") << ','
        << (s.insight().has_counters() ? CsvDouble(s.insight().stall_fraction()) : "") << ','
        << CsvDouble(s.insight().wait_fraction()) << "\n";
  }
}

Json StatsRowJson(const v1::KernelStats& s) {
  return {{"host", HostLabel(s)},
          {"chip", s.chip_ordinal() < 0 ? Json("*") : Json(s.chip_ordinal())},
          {"kernel", KernelLabel(s)},
          {"module", s.kernel().module()},
          {"category", s.kernel().category()},
          {"kernel_id", s.kernel().kernel_id()},
          {"program_id", s.kernel().program_id()},
          {"count", s.count()},
          {"total_ps", s.total_ps()},
          {"min_ps", s.min_ps()},
          {"max_ps", s.max_ps()},
          {"mean_ps", s.mean_ps()},
          {"p50_ps", s.p50_ps()},
          {"p90_ps", s.p90_ps()},
          {"p99_ps", s.p99_ps()},
          {"flops", s.kernel().flops()},
          {"bytes_accessed", s.kernel().bytes_accessed()},
          {"chip_count", s.chip_count()},
          {"achieved_tflops", s.achieved_tflops()},
          {"achieved_hbm_gbps", s.achieved_hbm_gbps()},
          {"fraction_of_peak_flops", s.fraction_of_peak_flops()},
          {"fraction_of_peak_hbm", s.fraction_of_peak_hbm()},
          {"insight", InsightJson(s.insight())}};
}

Json StatsRowsJson(const StatsRows& rows) {
  Json j = Json::array();
  for (const v1::KernelStats& s : rows) j.push_back(StatsRowJson(s));
  return j;
}

// The columns of `inspect`'s table, with HOST and CHIP where the grouping has them.
void WriteStatsTable(const StatsRows& rows, StatsGrouping by, std::ostream& out) {
  using Align = TextTable::Align;
  const bool has_host = by == StatsGrouping::kChip || by == StatsGrouping::kHost;
  const bool has_kernel = by != StatsGrouping::kCategory;
  std::vector<TextTable::Column> columns;
  if (has_host) columns.push_back({"HOST", Align::kLeft, 24});
  if (by == StatsGrouping::kChip) columns.push_back({"CHIP", Align::kRight});
  if (has_kernel) {
    columns.push_back({"KERNEL", Align::kLeft, 32});
    columns.push_back({"MODULE", Align::kLeft, 20});
  }
  columns.push_back({"CATEGORY", Align::kLeft, has_kernel ? size_t{18} : size_t{32}});
  for (const char* h : {"COUNT", "TOTAL", "MEAN", "P50", "P99", "MAX", "TFLOP/S", "%PEAK", "GB/S",
                        "%HBM", "MXU", "STALL", "WAIT"}) {
    columns.push_back({h, Align::kRight});
  }
  if (has_kernel) columns.push_back({"VERDICT", Align::kLeft, 22});
  TextTable table(std::move(columns));
  for (const v1::KernelStats& s : rows) {
    std::vector<std::string> cells;
    if (has_host) cells.push_back(HostLabel(s));
    if (by == StatsGrouping::kChip) cells.push_back(ChipLabel(s));
    if (has_kernel) {
      cells.push_back(KernelLabel(s));
      cells.push_back(s.kernel().module().empty() ? "-" : s.kernel().module());
    }
    cells.push_back(s.kernel().category().empty() ? "-" : s.kernel().category());
    cells.push_back(absl::StrCat(s.count()));
    cells.push_back(FormatDurationPs(s.total_ps()));
    cells.push_back(FormatMeanPs(s.mean_ps()));
    cells.push_back(FormatDurationPs(s.p50_ps()));
    cells.push_back(FormatDurationPs(s.p99_ps()));
    cells.push_back(FormatDurationPs(s.max_ps()));
    // Rates are 0 where they mean nothing (unknown costs, async start/done ops): show "-".
    cells.push_back(s.achieved_tflops() > 0 ? absl::StrFormat("%.2f", s.achieved_tflops()) : "-");
    cells.push_back(Percent(s.fraction_of_peak_flops()));
    cells.push_back(s.achieved_hbm_gbps() > 0 ? absl::StrFormat("%.1f", s.achieved_hbm_gbps())
                                              : "-");
    cells.push_back(Percent(s.fraction_of_peak_hbm()));
    // Counter figures only where counters covered the kernel: "-" is "not measured", not 0.
    const v1::KernelInsight& in = s.insight();
    auto mxu = in.utilization().find("mxu_busy");
    cells.push_back(mxu == in.utilization().end() ? "-" : Percent(mxu->second));
    cells.push_back(in.has_counters() ? Percent(in.stall_fraction()) : "-");
    cells.push_back(Percent(in.wait_fraction()));
    if (has_kernel) cells.push_back(in.verdict().empty() ? "-" : in.verdict());
    table.AddRow(std::move(cells));
  }
  table.Write(out);
}

const char* GroupingName(StatsGrouping by) {
  switch (by) {
    case StatsGrouping::kKernel:
      return "kernel";
    case StatsGrouping::kChip:
      return "chip";
    case StatsGrouping::kHost:
      return "host";
    case StatsGrouping::kCategory:
      return "category";
  }
  return "kernel";
}

// ---- diff

// A relative change for people: "+5.2%", or what an absent side means.
std::string ChangeCell(const v1::KernelDelta& d, double change) {
  if (!d.has_baseline()) return "new";
  if (!d.has_candidate()) return "gone";
  return absl::StrFormat("%+.1f%%", change * 100);
}

Json DeltaSideJson(bool present, const v1::KernelStats& s) {
  if (!present) return nullptr;
  return {{"count", s.count()},   {"total_ps", s.total_ps()}, {"mean_ps", s.mean_ps()},
          {"p50_ps", s.p50_ps()}, {"p90_ps", s.p90_ps()},     {"p99_ps", s.p99_ps()},
          {"max_ps", s.max_ps()}};
}

// The threshold the aggregator applied: 0 in the request means its default.
double EffectiveThreshold(const v1::CompareCapturesRequest& request) {
  return request.regression_threshold() > 0 ? request.regression_threshold() : 0.05;
}

// ---- import

bool IsXPlaneName(absl::string_view name) {
  return name.size() > kXPlaneSuffix.size() && absl::EndsWith(name, kXPlaneSuffix);
}

}  // namespace

// ---- AggregatorClient

AggregatorClient::AggregatorClient(const AggregatorTarget& target, Clock& clock)
    : address_(target.address), timeout_ns_(target.timeout_ns), clock_(clock) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxResponseBytes);
  channel_ = grpc::CreateCustomChannel(
      address_,
      target.credentials != nullptr ? target.credentials : grpc::InsecureChannelCredentials(),
      args);
  stub_ = v1::Aggregator::NewStub(channel_);
}

void AggregatorClient::SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(clock_.NowNs() + timeout_ns_))));
}

absl::Status AggregatorClient::Check(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // gRPC's codes are absl's canonical codes, number for number.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  std::string detail = OneLine(status.error_message());
  if (detail.empty()) detail = absl::StatusCodeToString(code);
  const std::string timeout = FormatDurationPs(timeout_ns_ * 1000);
  // Only an aggregator that answered leaves the channel READY: a refused or lost connection
  // leaves it failing or reconnecting. That tells "unreachable" from the aggregator's own
  // UNAVAILABLE (e.g. while it shuts down).
  const bool connected = channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
  if (!connected &&
      (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded)) {
    if (code == absl::StatusCode::kDeadlineExceeded) {
      detail = absl::StrCat("no connection within ", timeout);
    }
    absl::Status s =
        absl::UnavailableError(absl::StrCat("aggregator at ", address_, " unreachable: ", detail));
    s.SetPayload(kUnreachablePayload, absl::Cord("1"));
    return s;
  }
  if (code == absl::StatusCode::kDeadlineExceeded) {
    absl::Status s = absl::DeadlineExceededError(absl::StrCat(
        "aggregator at ", address_, " did not answer within ", timeout, " (see --timeout)"));
    s.SetPayload(kUnreachablePayload, absl::Cord("1"));
    return s;
  }
  return absl::Status(code, detail);
}

// ---- Flag values

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::vector<std::string>& pairs) {
  std::map<std::string, std::string> labels;
  for (const std::string& pair : pairs) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad label \"", pair, "\": want key=value with a non-empty key"));
    }
    if (!labels.emplace(pair.substr(0, eq), pair.substr(eq + 1)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("label \"", pair.substr(0, eq), "\" given twice"));
    }
  }
  return labels;
}

std::string CaptureStatusName(v1::CaptureStatus status) {
  if (status == v1::CAPTURE_STATUS_UNSPECIFIED || !v1::CaptureStatus_IsValid(status)) {
    return "unspecified";
  }
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::CaptureStatus_Name(status), "CAPTURE_STATUS_"));
}

absl::StatusOr<v1::CaptureStatus> ParseCaptureStatus(absl::string_view name) {
  std::vector<std::string> names;
  for (int i = v1::CaptureStatus_MIN; i <= v1::CaptureStatus_MAX; ++i) {
    const auto status = static_cast<v1::CaptureStatus>(i);
    if (status == v1::CAPTURE_STATUS_UNSPECIFIED || !v1::CaptureStatus_IsValid(i)) continue;
    if (absl::EqualsIgnoreCase(name, CaptureStatusName(status))) return status;
    names.push_back(CaptureStatusName(status));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown capture status \"", name, "\" (use ", absl::StrJoin(names, ", "), ")"));
}

// ---- captures

const char* const kCapturesCsvHeader =
    "capture,start_ns,end_ns,status,hosts,chips,kernels,events,labels";

absl::Status RunCaptures(AggregatorClient& client, const CapturesOptions& options,
                         std::ostream& out) {
  v1::ListCapturesRequest request;
  request.set_since_ns(SinceNs(client.clock(), options.since_ago_ns, options.since_ns));
  request.set_until_ns(options.until_ns);
  request.set_limit(options.limit);
  request.set_status(options.status);
  AddLabels(options.labels, request.mutable_label_selector());

  v1::ListCapturesResponse all;
  // A server that hands back a token it gave before would keep this loop going forever.
  std::set<std::string> tokens_seen;
  while (true) {
    v1::ListCapturesResponse page;
    RETURN_IF_ERROR(client.Call(&Stub::ListCaptures, request, &page));
    all.mutable_captures()->MergeFrom(page.captures());
    all.set_next_page_token(page.next_page_token());
    if (!options.all || page.next_page_token().empty()) break;
    if (!tokens_seen.insert(page.next_page_token()).second) {
      return absl::InternalError("the aggregator repeated a page token; the listing would not end");
    }
    request.set_page_token(page.next_page_token());
  }
  WriteCaptures(all, options.format, out);
  return FlushOutput(out);
}

void WriteCaptures(const v1::ListCapturesResponse& response, OutputFormat format,
                   std::ostream& out) {
  switch (format) {
    case OutputFormat::kCsv:
      out << kCapturesCsvHeader << "\n";
      for (const v1::CaptureSummary& c : response.captures()) {
        out << CsvField(c.capture_id()) << ',' << c.start_ns() << ',' << c.end_ns() << ','
            << CaptureStatusName(c.status()) << ',' << c.hosts_size() << ',' << c.chip_count()
            << ',' << c.kernel_count() << ',' << c.event_count() << ','
            << CsvField(JoinLabels(c.labels())) << "\n";
      }
      break;
    case OutputFormat::kJson: {
      Json j = Json::array();
      for (const v1::CaptureSummary& c : response.captures()) j.push_back(CaptureJson(c));
      WriteJson(j, out);
      break;
    }
    case OutputFormat::kTable: {
      using Align = TextTable::Align;
      TextTable table({{"CAPTURE"},
                       {"START"},
                       {"DURATION", Align::kRight},
                       {"STATUS"},
                       {"HOSTS", Align::kRight},
                       {"CHIPS", Align::kRight},
                       {"KERNELS", Align::kRight},
                       {"EVENTS", Align::kRight},
                       {"LABELS"}});
      for (const v1::CaptureSummary& c : response.captures()) {
        table.AddRow({c.capture_id(), FormatTimestampNs(c.start_ns()), CaptureDuration(c),
                      CaptureStatusName(c.status()), absl::StrCat(c.hosts_size()),
                      absl::StrCat(c.chip_count()), absl::StrCat(c.kernel_count()),
                      absl::StrCat(c.event_count()), JoinLabels(c.labels())});
      }
      table.Write(out);
      if (!response.next_page_token().empty()) {
        out << "... more captures match (--all lists them all)\n";
      }
      break;
    }
  }
}

// ---- stats

const char* const kStatsCsvHeader =
    "capture,host,chip,kernel,category,count,total_ps,min_ps,max_ps,mean_ps,p50_ps,p90_ps,p99_ps,"
    "flops,bytes_accessed,verdict,mxu_busy,stall_fraction,wait_fraction";

absl::Status RunStats(AggregatorClient& client, const StatsOptions& options, std::ostream& out) {
  const StatsGrouping by = options.by.value_or(
      options.format == OutputFormat::kTable ? StatsGrouping::kKernel : StatsGrouping::kChip);
  v1::GetKernelStatsRequest request;
  request.set_capture_id(options.capture_id);
  request.set_group_by(ToProto(by));
  // For aggregators that predate group_by.
  request.set_per_chip(by == StatsGrouping::kChip);
  request.mutable_filter()->set_op_regex(options.kernel_regex);
  request.mutable_filter()->set_category(options.category);
  if (options.chip.has_value()) request.mutable_filter()->set_chip_ordinal(*options.chip);
  request.set_host_name(options.host);
  request.set_order(options.order);
  request.set_top_n(DefaultTop(options.top, options.format));

  v1::GetKernelStatsResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::GetKernelStats, request, &response));
  WriteKernelStats(response, by, options.format, out);
  return FlushOutput(out);
}

void WriteKernelStats(const v1::GetKernelStatsResponse& response, StatsGrouping by,
                      OutputFormat format, std::ostream& out) {
  switch (format) {
    case OutputFormat::kCsv:
      WriteStatsCsvRows(response.capture_id(), response.stats(), out);
      break;
    case OutputFormat::kJson:
      WriteJson({{"capture", response.capture_id()},
                 {"group_by", GroupingName(by)},
                 {"matched_count", response.matched_count()},
                 {"rows", StatsRowsJson(response.stats())}},
                out);
      break;
    case OutputFormat::kTable: {
      out << "capture " << response.capture_id() << ": " << response.matched_count() << " rows by "
          << GroupingName(by) << "\n\n";
      WriteStatsTable(response.stats(), by, out);
      const size_t shown = response.stats_size();
      if (response.matched_count() > shown) {
        out << "... " << response.matched_count() - shown << " more rows (--top 0 shows all)\n";
      }
      break;
    }
  }
}

// ---- history

const char* const kHistoryCsvHeader =
    "kernel,module,capture,start_ns,count,mean_ps,p50_ps,p90_ps,p99_ps,total_ps,achieved_tflops";

absl::Status RunHistory(AggregatorClient& client, const HistoryOptions& options,
                        std::ostream& out) {
  v1::KernelHistoryRequest request;
  request.mutable_filter()->set_op_regex(options.kernel_regex);
  request.mutable_filter()->set_module(options.module);
  request.set_since_ns(SinceNs(client.clock(), options.since_ago_ns, options.since_ns));
  request.set_until_ns(options.until_ns);
  request.set_max_kernels(options.max_kernels);

  v1::KernelHistoryResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::KernelHistory, request, &response));
  WriteKernelHistory(response, options.format, out);
  return FlushOutput(out);
}

void WriteKernelHistory(const v1::KernelHistoryResponse& response, OutputFormat format,
                        std::ostream& out) {
  switch (format) {
    case OutputFormat::kCsv:
      out << kHistoryCsvHeader << "\n";
      for (const v1::KernelHistorySeries& series : response.series()) {
        for (const v1::KernelHistoryPoint& p : series.points()) {
          out << CsvField(series.kernel().op_name()) << ',' << CsvField(series.kernel().module())
              << ',' << CsvField(p.capture_id()) << ',' << p.capture_start_ns() << ',' << p.count()
              << ',' << std::llround(p.mean_ps()) << ',' << p.p50_ps() << ',' << p.p90_ps() << ','
              << p.p99_ps() << ',' << p.total_ps() << ',' << CsvDouble(p.achieved_tflops()) << "\n";
        }
      }
      break;
    case OutputFormat::kJson: {
      Json j = Json::array();
      for (const v1::KernelHistorySeries& series : response.series()) {
        Json points = Json::array();
        for (const v1::KernelHistoryPoint& p : series.points()) {
          points.push_back({{"capture", p.capture_id()},
                            {"start_ns", p.capture_start_ns()},
                            {"count", p.count()},
                            {"mean_ps", p.mean_ps()},
                            {"p50_ps", p.p50_ps()},
                            {"p90_ps", p.p90_ps()},
                            {"p99_ps", p.p99_ps()},
                            {"total_ps", p.total_ps()},
                            {"chip_count", p.chip_count()},
                            {"achieved_tflops", p.achieved_tflops()}});
        }
        j.push_back({{"kernel", series.kernel().op_name()},
                     {"module", series.kernel().module()},
                     {"category", series.kernel().category()},
                     {"kernel_id", series.kernel().kernel_id()},
                     {"points", std::move(points)}});
      }
      WriteJson(j, out);
      break;
    }
    case OutputFormat::kTable: {
      if (response.series().empty()) out << "no matching kernels in the selected captures\n";
      bool first = true;
      for (const v1::KernelHistorySeries& series : response.series()) {
        if (!first) out << "\n";
        first = false;
        const v1::KernelDef& k = series.kernel();
        out << k.op_name() << " (module " << (k.module().empty() ? "-" : k.module());
        if (!k.category().empty()) out << ", " << k.category();
        out << "): " << Count(series.points_size(), "capture") << "\n";
        if (series.points_size() > 1) {
          // The trend at a glance, oldest capture first.
          std::vector<double> mean, p99;
          for (const v1::KernelHistoryPoint& p : series.points()) {
            mean.push_back(p.mean_ps());
            p99.push_back(static_cast<double>(p.p99_ps()));
          }
          out << "  mean " << Sparkline(mean) << "  p99 " << Sparkline(p99) << "\n";
        }
        using Align = TextTable::Align;
        TextTable table({{"CAPTURE"},
                         {"START"},
                         {"COUNT", Align::kRight},
                         {"MEAN", Align::kRight},
                         {"P50", Align::kRight},
                         {"P99", Align::kRight},
                         {"TOTAL", Align::kRight},
                         {"TFLOP/S", Align::kRight}});
        for (const v1::KernelHistoryPoint& p : series.points()) {
          table.AddRow(
              {p.capture_id(), FormatTimestampNs(p.capture_start_ns()), absl::StrCat(p.count()),
               FormatMeanPs(p.mean_ps()), FormatDurationPs(p.p50_ps()),
               FormatDurationPs(p.p99_ps()), FormatDurationPs(p.total_ps()),
               p.achieved_tflops() > 0 ? absl::StrFormat("%.2f", p.achieved_tflops()) : "-"});
        }
        table.Write(out);
      }
      break;
    }
  }
}

// ---- diff

const char* const kDiffCsvHeader =
    "kernel,module,baseline_mean_ps,candidate_mean_ps,mean_change,baseline_p99_ps,"
    "candidate_p99_ps,p99_change,regression";

absl::StatusOr<uint32_t> RunDiff(AggregatorClient& client, const DiffOptions& options,
                                 std::ostream& out) {
  v1::CompareCapturesRequest request;
  request.set_baseline_capture_id(options.baseline_capture_id);
  request.set_candidate_capture_id(options.candidate_capture_id);
  request.mutable_filter()->set_op_regex(options.kernel_regex);
  request.set_regression_threshold(options.threshold);
  request.set_top_n(DefaultTop(options.top, options.format));

  v1::CompareCapturesResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::CompareCaptures, request, &response));
  WriteCaptureDiff(request, response, options.format, out);
  RETURN_IF_ERROR(FlushOutput(out));
  return response.regression_count();
}

void WriteCaptureDiff(const v1::CompareCapturesRequest& request,
                      const v1::CompareCapturesResponse& response, OutputFormat format,
                      std::ostream& out) {
  switch (format) {
    case OutputFormat::kCsv:
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
            << (both ? CsvDouble(d.p99_change()) : "") << ',' << (d.regression() ? "true" : "false")
            << "\n";
      }
      break;
    case OutputFormat::kJson: {
      Json deltas = Json::array();
      for (const v1::KernelDelta& d : response.deltas()) {
        deltas.push_back({{"kernel", d.kernel().op_name()},
                          {"module", d.kernel().module()},
                          {"category", d.kernel().category()},
                          {"kernel_id", d.kernel().kernel_id()},
                          {"baseline", DeltaSideJson(d.has_baseline(), d.baseline())},
                          {"candidate", DeltaSideJson(d.has_candidate(), d.candidate())},
                          {"mean_change", d.mean_change()},
                          {"p50_change", d.p50_change()},
                          {"p99_change", d.p99_change()},
                          {"total_ps_change", d.total_ps_change()},
                          {"regression", d.regression()}});
      }
      WriteJson({{"baseline", request.baseline_capture_id()},
                 {"candidate", request.candidate_capture_id()},
                 {"threshold", EffectiveThreshold(request)},
                 {"regression_count", response.regression_count()},
                 {"deltas", std::move(deltas)}},
                out);
      break;
    }
    case OutputFormat::kTable: {
      out << "baseline " << request.baseline_capture_id() << " vs candidate "
          << request.candidate_capture_id() << "\n\n";
      using Align = TextTable::Align;
      TextTable table({{"KERNEL", Align::kLeft, 32},
                       {"MODULE", Align::kLeft, 20},
                       {"BASE MEAN", Align::kRight},
                       {"CAND MEAN", Align::kRight},
                       {"ΔMEAN%", Align::kRight},
                       {"BASE P99", Align::kRight},
                       {"CAND P99", Align::kRight},
                       {"ΔP99%", Align::kRight},
                       {""}});
      auto duration = [](bool present, int64_t ps) {
        return present ? FormatDurationPs(ps) : std::string("-");
      };
      for (const v1::KernelDelta& d : response.deltas()) {
        table.AddRow({d.kernel().op_name(), d.kernel().module().empty() ? "-" : d.kernel().module(),
                      duration(d.has_baseline(), std::llround(d.baseline().mean_ps())),
                      duration(d.has_candidate(), std::llround(d.candidate().mean_ps())),
                      ChangeCell(d, d.mean_change()),
                      duration(d.has_baseline(), d.baseline().p99_ps()),
                      duration(d.has_candidate(), d.candidate().p99_ps()),
                      ChangeCell(d, d.p99_change()), d.regression() ? "REGRESSION" : ""});
      }
      table.Write(out);
      if (request.top_n() > 0 && static_cast<uint32_t>(response.deltas_size()) >= request.top_n()) {
        out << "showing the " << request.top_n()
            << " kernels whose total time changed most (--top 0 shows all)\n";
      }
      const uint32_t n = response.regression_count();
      out << Count(n, "regression") << " (p50 slower by more than "
          << absl::StrFormat("%g", EffectiveThreshold(request) * 100) << "%)\n";
      break;
    }
  }
}

// ---- import

absl::StatusOr<std::vector<ImportFile>> ExpandImportPaths(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<ImportFile> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (!fs::exists(status)) {
      if (ec && ec != std::errc::no_such_file_or_directory) {
        return ErrnoToStatus(ec.value(), absl::StrCat("stat ", path));
      }
      return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
    }
    if (fs::is_regular_file(status) && IsXPlaneName(fs::path(path).filename().string())) {
      files.push_back({trace::HostNameFromPath(path), path});
      continue;
    }
    if (!fs::is_directory(status)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not a .xplane.pb file or a directory"));
    }
    std::vector<std::string> names;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code entry_ec;
      if (IsXPlaneName(name) && it->is_regular_file(entry_ec)) names.push_back(name);
    }
    if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("list ", path));
    if (names.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no .xplane.pb files in the directory"));
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      files.push_back({trace::HostNameFromPath(name), (fs::path(path) / name).string()});
    }
  }
  return files;
}

absl::Status CheckDistinctHosts(const std::vector<ImportFile>& files) {
  std::map<std::string, const std::string*> path_of_host;
  for (const ImportFile& f : files) {
    auto [it, inserted] = path_of_host.emplace(f.host_name, &f.path);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("host ", f.host_name, " appears twice (",
                                                     *it->second, " and ", f.path,
                                                     "); import one file per host"));
    }
  }
  return absl::OkStatus();
}

absl::Status ForEachImportChunk(const std::vector<ImportFile>& files,
                                const std::map<std::string, std::string>& labels,
                                size_t chunk_bytes,
                                const std::function<bool(const v1::ImportXSpaceChunk&)>& send) {
  bool first_chunk = true;
  for (const ImportFile& file : files) {
    ASSIGN_OR_RETURN(std::unique_ptr<trace::FileSource> source, trace::FileSource::Open(file.path));
    int64_t offset = 0;
    // do/while: an empty file still sends one chunk, so the aggregator hears of the host.
    do {
      const size_t n = static_cast<size_t>(std::min<int64_t>(chunk_bytes, source->size() - offset));
      v1::ImportXSpaceChunk chunk;
      chunk.set_host_name(file.host_name);
      std::string* data = chunk.mutable_data();
      data->resize(n);
      RETURN_IF_ERROR(source->ReadAt(offset, n, data->data()));
      if (first_chunk) AddLabels(labels, chunk.mutable_labels());
      first_chunk = false;
      if (!send(chunk)) return absl::CancelledError("the upload stream closed");
      offset += static_cast<int64_t>(n);
    } while (offset < source->size());
  }
  return absl::OkStatus();
}

absl::Status RunImport(AggregatorClient& client, const ImportOptions& options, std::ostream& out,
                       std::ostream& err) {
  grpc::ClientContext context;
  client.SetDeadline(context);
  v1::ImportXSpaceResponse response;
  std::unique_ptr<grpc::ClientWriterInterface<v1::ImportXSpaceChunk>> writer =
      client.stub().ImportXSpace(&context, &response);
  bool stream_broke = false;
  absl::Status sent = ForEachImportChunk(options.files, options.labels, kImportChunkBytes,
                                         [&](const v1::ImportXSpaceChunk& chunk) {
                                           stream_broke = !writer->Write(chunk);
                                           return !stream_broke;
                                         });
  if (!sent.ok() && !stream_broke) {
    // A file could not be read: cancel so that the aggregator stores nothing.
    context.TryCancel();
    writer->Finish();
    return sent;
  }
  // After a broken stream Finish says why; writing more would only fail again.
  if (!stream_broke) writer->WritesDone();
  RETURN_IF_ERROR(client.Check(writer->Finish()));
  if (stream_broke) return absl::InternalError("the aggregator closed the upload early");
  WriteImportResult(response, options.format, out, err);
  return FlushOutput(out);
}

void WriteImportResult(const v1::ImportXSpaceResponse& response, OutputFormat format,
                       std::ostream& out, std::ostream& err) {
  for (const std::string& e : response.file_errors()) err << "warning: " << OneLine(e) << "\n";
  switch (format) {
    case OutputFormat::kCsv:
      WriteStatsCsvRows(response.capture_id(), response.top_kernels(), out);
      break;
    case OutputFormat::kJson:
      WriteJson({{"capture", response.capture_id()},
                 {"summary", CaptureJson(response.summary())},
                 {"top_kernels", StatsRowsJson(response.top_kernels())},
                 {"file_errors", std::vector<std::string>(response.file_errors().begin(),
                                                          response.file_errors().end())}},
                out);
      break;
    case OutputFormat::kTable: {
      const v1::CaptureSummary& s = response.summary();
      out << "imported capture " << response.capture_id() << ": " << CaptureStatusName(s.status())
          << ", " << Count(s.hosts_size(), "host") << ", " << Count(s.chip_count(), "chip") << ", "
          << Count(s.kernel_count(), "kernel") << ", " << Count(s.event_count(), "event")
          << ", window " << CaptureDuration(s) << "\n";
      if (!response.top_kernels().empty()) {
        out << "\n";
        WriteStatsTable(response.top_kernels(), StatsGrouping::kKernel, out);
      }
      break;
    }
  }
}

}  // namespace podprof::cli
