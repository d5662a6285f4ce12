// The Megascale runtime's action graph as counter series (trace/megascale_trace.h), and the
// reader of its plane: found in the header pass, read once the host's chips are known, each
// chip's series handed on with that chip's device plane.
#include "trace/megascale_trace.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/checked.h"
#include "common/status_macros.h"
#include "trace/hash.h"
#include "trace/wire.h"
#include "trace/xspace_reader_internal.h"
#include "trace/xspace_schema.h"

namespace podprof::trace {
namespace {

constexpr absl::string_view kDevicePrefix = "device_";
constexpr absl::string_view kGid = "_gid_";
// Room for a graph_key's hash and budgets in budgets_ (its slot and control byte).
constexpr size_t kBudgetBytes = sizeof(std::pair<uint64_t, int64_t[2]>) + 1;
// Ids listed in a warning.
constexpr size_t kListedIds = 8;

// 1-18 decimal digits (any such number fits in 64 bits).
bool Digits(absl::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// [a-zA-Z0-9_.-]+
bool IsName(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

// `device_<digits>_gid_`, consumed: what follows it.
bool ConsumeDevice(absl::string_view* s, uint64_t* raw_id) {
  if (!absl::ConsumePrefix(s, kDevicePrefix)) return false;
  const size_t gid = s->find(kGid);
  if (gid == absl::string_view::npos || !Digits(s->substr(0, gid), raw_id)) return false;
  s->remove_prefix(gid + kGid.size());
  return true;
}

std::string ListIds(const std::vector<uint64_t>& ids) {
  std::string out =
      absl::StrJoin(ids.begin(), ids.begin() + std::min(ids.size(), kListedIds), ", ");
  if (ids.size() > kListedIds) absl::StrAppend(&out, ", ...");
  return out;
}

}  // namespace

bool ParseGraphKey(absl::string_view key, size_t max_name_bytes, uint64_t* raw_id,
                   absl::string_view* rendezvous) {
  if (!ConsumeDevice(&key, raw_id)) return false;
  const size_t dollar = key.find('$');
  if (dollar == absl::string_view::npos) return false;
  const absl::string_view name = key.substr(0, dollar);
  if (name.size() > max_name_bytes || !IsName(name)) return false;
  const absl::string_view rest = key.substr(dollar + 1);
  const size_t iteration = rest.rfind("^i");
  uint64_t k;
  if (iteration == absl::string_view::npos || iteration == 0 ||
      !Digits(rest.substr(iteration + 2), &k)) {
    return false;
  }
  *rendezvous = name;
  return true;
}

bool IsActionGraphName(absl::string_view name) {
  uint64_t raw_id, n;
  if (!ConsumeDevice(&name, &raw_id) || !IsName(name)) return false;
  const size_t underscore = name.rfind('_');
  return underscore != absl::string_view::npos && underscore > 0 &&
         Digits(name.substr(underscore + 1), &n);
}

MegascaleSeriesBuilder::MegascaleSeriesBuilder(const std::vector<Chip>& chips,
                                               MegascaleLimits limits)
    : chips_(chips), limits_(limits) {}

size_t MegascaleSeriesBuilder::HeldBytes() const {
  return samples_.size() * sizeof(Sample) + budgets_.size() * kBudgetBytes;
}

void MegascaleSeriesBuilder::Add(const MegascaleEvent& e) {
  if (e.graph_key.empty()) return;
  uint64_t raw_id;
  absl::string_view rendezvous;
  if (!ParseGraphKey(e.graph_key, limits_.max_name_bytes, &raw_id, &rendezvous)) {
    ++damaged_;
    return;
  }
  // Every event of the runtime names its device: those without a receive still take their
  // place among the sorted ids, as in XProf.
  auto device = device_of_raw_id_.find(raw_id);
  if (device == device_of_raw_id_.end()) {
    if (devices_.size() >= limits_.max_devices) {
      ++past_devices_;
      return;
    }
    device = device_of_raw_id_.emplace(raw_id, static_cast<uint32_t>(devices_.size())).first;
    devices_.emplace_back().raw_id = raw_id;
  }
  const bool receive = e.name == kNetworkReceiveEnd;
  if (!receive && !IsActionGraphName(e.name)) return;  // NetworkSend END and the like
  if (e.damaged || (receive && !e.latency_us.has_value())) {
    ++damaged_;
    return;
  }
  if (!receive && !e.transmission_budget_us && !e.delay_budget_us) return;
  if (HeldBytes() + sizeof(Sample) > limits_.max_bytes) {
    ++past_bytes_;
    return;
  }
  const uint64_t key_hash = Fnv1a64(e.graph_key);
  auto us = [](const std::optional<uint64_t>& v) { return v ? static_cast<int64_t>(*v) : -1; };
  if (!receive) {
    Budgets& b = budgets_[key_hash];
    if (e.transmission_budget_us) b.transmission_us = us(e.transmission_budget_us);
    if (e.delay_budget_us) b.delay_us = us(e.delay_budget_us);
    return;
  }
  Device& d = devices_[device->second];
  auto name = d.index.find(rendezvous);
  if (name == d.index.end()) {
    if (d.names.size() >= limits_.max_rendezvous) {
      ++past_rendezvous_;
      return;
    }
    name = d.index.emplace(std::string(rendezvous), static_cast<uint32_t>(d.names.size())).first;
    d.names.emplace_back(rendezvous);
  }
  samples_.push_back({e.end_ns, key_hash, device->second, name->second, us(e.latency_us),
                      us(e.transmission_budget_us), us(e.delay_budget_us)});
}

std::vector<int> MegascaleSeriesBuilder::ChipsOfDevices(absl::string_view plane,
                                                        std::vector<std::string>* warnings) {
  // Sorted raw ids to the TPU chips sorted by ordinal, as XProf pairs them.
  std::vector<int> tpu;
  for (size_t i = 0; i < chips_.size(); ++i) {
    if (chips_[i].kind == DeviceKind::kTpu) tpu.push_back(static_cast<int>(i));
  }
  std::stable_sort(tpu.begin(), tpu.end(),
                   [&](int a, int b) { return chips_[a].ordinal < chips_[b].ordinal; });
  std::vector<uint32_t> order(devices_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return devices_[a].raw_id < devices_[b].raw_id; });
  std::vector<int> chip_of(devices_.size(), -1);
  std::vector<uint64_t> ids, dropped;
  for (size_t k = 0; k < order.size(); ++k) {
    ids.push_back(devices_[order[k]].raw_id);
    if (k < tpu.size()) {
      chip_of[order[k]] = tpu[k];
    } else {
      dropped.push_back(devices_[order[k]].raw_id);
    }
  }
  if (!ids.empty() && ids.size() != tpu.size()) {
    std::string w = absl::StrCat(plane, ": ", ids.size(), " Megascale device ids (", ListIds(ids),
                                 ") for ", tpu.size(),
                                 " TPU chips: the sorted ids paired with the chips sorted by "
                                 "ordinal, as XProf pairs them");
    if (!dropped.empty()) {
      absl::StrAppend(&w, "; the ids past the chips' count (", ListIds(dropped),
                      ") and their series dropped");
    }
    warnings->push_back(std::move(w));
  }
  return chip_of;
}

std::vector<CounterSeries> MegascaleSeriesBuilder::Finish(absl::string_view plane,
                                                          std::vector<std::string>* warnings) {
  const std::vector<int> chip_of = ChipsOfDevices(plane, warnings);
  std::stable_sort(samples_.begin(), samples_.end(),
                   [](const Sample& a, const Sample& b) { return a.end_ns < b.end_ns; });
  static constexpr absl::string_view kMetrics[3] = {
      kMegascaleLatencyUs, kMegascaleTransmissionBudgetUs, kMegascaleDelayBudgetUs};
  // The series of each (device, rendezvous), by metric: made at their first sample.
  absl::flat_hash_map<uint64_t, std::array<int64_t, 3>> series_of;
  std::vector<CounterSeries> out;
  for (const Sample& s : samples_) {
    const int chip = chip_of[s.device];
    if (chip < 0) continue;
    std::array<int64_t, 3> value = {s.latency_us, s.transmission_us, s.delay_us};
    if (value[1] < 0 || value[2] < 0) {
      if (auto b = budgets_.find(s.key_hash); b != budgets_.end()) {
        if (value[1] < 0) value[1] = b->second.transmission_us;
        if (value[2] < 0) value[2] = b->second.delay_us;
      }
    }
    auto [it, fresh] = series_of.try_emplace((uint64_t{s.device} << 32) | s.rendezvous,
                                             std::array<int64_t, 3>{-1, -1, -1});
    for (int m = 0; m < 3; ++m) {
      if (value[m] < 0) continue;
      if (it->second[m] < 0) {
        it->second[m] = static_cast<int64_t>(out.size());
        CounterSeries& series = out.emplace_back();
        series.chip = chip;
        series.name = absl::StrCat(kMegascaleSeriesPrefix, devices_[s.device].names[s.rendezvous],
                                   "/", kMetrics[m]);
      }
      CounterSeries& series = out[it->second[m]];
      series.time_ns.push_back(s.end_ns);
      series.value.push_back(static_cast<double>(value[m]));
    }
  }
  std::sort(out.begin(), out.end(), [](const CounterSeries& a, const CounterSeries& b) {
    return std::tie(a.chip, a.name) < std::tie(b.chip, b.name);
  });

  WarnOfSkipped(plane, warnings);
  std::vector<Sample>().swap(samples_);
  budgets_.clear();
  return out;
}

void MegascaleSeriesBuilder::WarnOfSkipped(absl::string_view plane,
                                           std::vector<std::string>* warnings) const {
  if (damaged_ > 0) {
    warnings->push_back(absl::StrCat(
        plane, ": ", damaged_,
        " events skipped: a graph_key not of the form "
        "device_<id>_gid_<rendezvous>$<launch>^i<iteration>, a NetworkReceive END without ",
        kMegascaleLatencyUs, ", or a stat of another type, an impossible value or time"));
  }
  if (past_devices_ > 0) {
    warnings->push_back(absl::StrCat(plane, ": more than ", limits_.max_devices, " device ids; ",
                                     past_devices_, " events of the others skipped"));
  }
  if (past_rendezvous_ > 0) {
    warnings->push_back(absl::StrCat(plane, ": more than ", limits_.max_rendezvous,
                                     " rendezvous on a device; ", past_rendezvous_,
                                     " NetworkReceive END events of the others skipped"));
  }
  if (past_bytes_ > 0) {
    warnings->push_back(absl::StrCat(plane, ": its samples pass the reader's bound of ",
                                     limits_.max_bytes >> 20, " MiB; ", past_bytes_,
                                     " events after it skipped"));
  }
}

namespace xspace_internal {
namespace {

using wire::Cursor;
using wire::Span;
using wire::WireType;
using xspace::XEventField;
using xspace::XLineField;

// The stats of the plane podprof reads.
enum class MegascaleStat : uint8_t { kOther, kGraphKey, kLatency, kTransmission, kDelay };

MegascaleStat MegascaleStatOfName(absl::string_view name) {
  if (name == "graph_key") return MegascaleStat::kGraphKey;
  if (name == kMegascaleLatencyUs) return MegascaleStat::kLatency;
  if (name == kMegascaleTransmissionBudgetUs) return MegascaleStat::kTransmission;
  if (name == kMegascaleDelayBudgetUs) return MegascaleStat::kDelay;
  return MegascaleStat::kOther;
}

// Microseconds: uint64, or int64 >= 0; at most kMaxMegascaleMicros.
bool Micros(const RawStat& s, uint64_t* out) {
  if (s.type != RawStat::Type::kUint64 && s.type != RawStat::Type::kInt64) return false;
  if (s.type == RawStat::Type::kInt64 && s.num.i < 0) return false;
  if (s.num.u > kMaxMegascaleMicros) return false;
  *out = s.num.u;
  return true;
}

// One event's stats as the builder takes them; the event's own, else its metadata's.
class EventStats {
 public:
  EventStats(const ReaderState& r, const StatTable& table,
             absl::flat_hash_map<int64_t, MegascaleStat>* kinds)
      : r_(r), table_(table), kinds_(kinds) {}

  // `overwrite`: the event's own stats win over its metadata's (read after them).
  void Take(const RawStat& s, bool overwrite, MegascaleEvent* e) {
    const MegascaleStat kind = KindOf(s.metadata_id);
    if (kind == MegascaleStat::kOther) return;
    if (kind == MegascaleStat::kGraphKey) {
      if (!overwrite && has_key_) return;
      has_key_ = true;
      key_.clear();
      // Text, or a ref to text; anything else (compressed text included: no inflating what
      // a damaged plane claims) is no key.
      if ((s.type != RawStat::Type::kString && s.type != RawStat::Type::kRef) ||
          !r_.StatString(table_, s, &key_).ok()) {
        e->damaged = true;
      }
      return;
    }
    std::optional<uint64_t>* value = kind == MegascaleStat::kLatency ? &e->latency_us
                                     : kind == MegascaleStat::kTransmission
                                         ? &e->transmission_budget_us
                                         : &e->delay_budget_us;
    if (!overwrite && value->has_value()) return;
    uint64_t us;
    if (Micros(s, &us)) {
      *value = us;
    } else {
      value->reset();
      e->damaged = true;
    }
  }
  void Reset() {
    has_key_ = false;
    key_.clear();
  }
  // Whether the event or its metadata had a graph_key stat, and its text (empty when it was
  // not text).
  bool has_key() const { return has_key_; }
  const std::string& key() const { return key_; }

 private:
  MegascaleStat KindOf(int64_t id) {
    if (auto it = kinds_->find(id); it != kinds_->end()) return it->second;
    const std::string* name = table_.Name(id);
    if (name == nullptr) return MegascaleStat::kOther;  // not cached: ids without metadata
    return kinds_->emplace(id, MegascaleStatOfName(*name)).first->second;
  }

  const ReaderState& r_;
  const StatTable& table_;
  absl::flat_hash_map<int64_t, MegascaleStat>* const kinds_;
  bool has_key_ = false;
  std::string key_;
};

// One XEvent of the plane, on a line starting at `line_ns` (absolute).
absl::Status ReadMegascaleEvent(const PlaneState& plane, int64_t line_ns, Span ev,
                                EventStats* stats, MegascaleSeriesBuilder* builder) {
  MegascaleEvent e;
  stats->Reset();
  int64_t metadata_id = 0, offset_ps = 0, duration_ps = 0;
  RawStat raw;
  while (!ev.done()) {
    uint32_t field;
    WireType wt;
    if (!ev.ReadTag(&field, &wt)) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
    uint64_t v = 0;
    bool ok = true;
    switch (field) {
      case XEventField::kMetadataId:
      case XEventField::kOffsetPs:
      case XEventField::kDurationPs:
        ok = wt == wire::kVarint && ev.ReadVarint(&v);
        (field == XEventField::kMetadataId ? metadata_id
         : field == XEventField::kOffsetPs ? offset_ps
                                           : duration_ps) = static_cast<int64_t>(v);
        break;
      case XEventField::kStats: {
        Span st;
        ok = wt == wire::kLengthDelimited && ev.ReadSub(&st);
        if (!ok) break;
        raw = RawStat();
        if (!ParseRawStat(st, &raw)) return wire::MalformedAt(st.offset(), "bad XStat in XEvent");
        stats->Take(raw, /*overwrite=*/true, &e);
        break;
      }
      default:
        ok = ev.Skip(wt);
    }
    if (!ok) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
  }
  auto meta = plane.metas.find(metadata_id);
  if (meta != plane.metas.end()) {
    // The event's name, not the display name a writer may have given it.
    e.name = meta->second.full_name.empty() ? meta->second.name : meta->second.full_name;
    for (const RawStat& s : meta->second.stats) stats->Take(s, /*overwrite=*/false, &e);
  }
  if (!stats->has_key()) return absl::OkStatus();  // not the runtime's: ignored, as by XProf
  e.graph_key = stats->key();
  // The end as the device lines' events end: the line's start plus the event's, in whole ns.
  std::optional<int64_t> end_ps = CheckedAdd(offset_ps, duration_ps);
  std::optional<int64_t> end_ns;
  if (offset_ps >= 0 && duration_ps >= 0 && end_ps) end_ns = CheckedAdd(line_ns, *end_ps / 1000);
  if (end_ns) {
    e.end_ns = *end_ns;
  } else {
    e.damaged = true;
  }
  // A damaged graph_key reads as no key: give the builder something to count.
  if (e.graph_key.empty()) e.graph_key = "?";
  builder->Add(e);
  return absl::OkStatus();
}

absl::Status ReadMegascalePlane(ReaderState& r, const PlaneScan& scan) {
  Cursor c(&r.window, 0, scan.end, "XPlane");
  PlaneState plane;
  RETURN_IF_ERROR(ReadStatMetadata(scan, c, &plane.stat_table));
  RETURN_IF_ERROR(ReadEventMetadata(scan, c, &plane));
  MegascaleLimits limits;
  limits.max_bytes = r.options.max_piece_bytes;
  MegascaleSeriesBuilder builder(r.capture.host.chips, limits);
  absl::flat_hash_map<int64_t, MegascaleStat> kinds;
  EventStats stats(r, plane.stat_table, &kinds);
  for (const Extent& extent : scan.lines) {
    c.Seek(extent.pos);
    Cursor line(nullptr, 0, 0, "");
    RETURN_IF_ERROR(c.ReadSub("XLine", &line));
    std::string name;
    int64_t timestamp_ns = 0;
    RETURN_IF_ERROR(ScanLineHeader(line, &name, &timestamp_ns));
    const int64_t line_ns = r.Absolute(timestamp_ns);
    while (!line.done()) {
      uint32_t field;
      WireType wt;
      RETURN_IF_ERROR(line.ReadTag(&field, &wt));
      if (field != XLineField::kEvents) {
        RETURN_IF_ERROR(line.Skip(wt));
        continue;
      }
      RETURN_IF_ERROR(line.Expect(field, wt, wire::kLengthDelimited));
      Span ev;
      RETURN_IF_ERROR(line.ReadSpan(&ev));
      RETURN_IF_ERROR(ReadMegascaleEvent(plane, line_ns, ev, &stats, &builder));
    }
  }
  r.megascale_series = builder.Finish(scan.name, &r.capture.warnings);
  return absl::OkStatus();
}

// `/device:CUSTOM:Megascale Trace`: no chip of its own; its series go to the TPU chips.
class MegascaleTrace final : public PlaneKindReader {
 public:
  absl::Status ReadHeader(ReaderState& r, const PlaneScan& scan, Cursor&) const override {
    if (r.megascale_plane.has_value()) {
      // XProf reads the first plane of the name.
      r.capture.warnings.push_back(
          absl::StrCat("a second \"", scan.name, "\" plane; only the first is read"));
      return absl::OkStatus();
    }
    r.megascale_plane = scan;
    return absl::OkStatus();
  }
  // Once every chip is known: raw ids are paired with the host's chips.
  absl::Status EndHeader(ReaderState& r) const override {
    if (!r.megascale_plane.has_value()) return absl::OkStatus();
    RETURN_IF_ERROR(ReadMegascalePlane(r, *r.megascale_plane));
    r.megascale_plane.reset();
    return absl::OkStatus();
  }
  absl::Status ReadData(ReaderState&, const PlaneScan&, Cursor&) const override {
    return absl::OkStatus();
  }
};

}  // namespace

const PlaneKindReader* MegascaleTraceReader() {
  static const MegascaleTrace reader{};
  return &reader;
}

void TakeMegascaleSeries(ReaderState& r, int chip) {
  auto theirs = [chip](const CounterSeries& s) { return s.chip == chip; };
  auto first = std::stable_partition(r.megascale_series.begin(), r.megascale_series.end(),
                                     [&](const CounterSeries& s) { return !theirs(s); });
  for (auto it = first; it != r.megascale_series.end(); ++it) {
    r.capture.counters.push_back(std::move(*it));
    r.counter_line_ns.push_back(kAbsolute);  // on the host's clock already
  }
  r.megascale_series.erase(first, r.megascale_series.end());
}

}  // namespace xspace_internal
}  // namespace podprof::trace
