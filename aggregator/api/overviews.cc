#include "aggregator/api/overviews.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"

namespace podprof::aggregator {
namespace {

constexpr size_t kKept = 4;  // overviews kept: the captures people open now
constexpr int64_t kWarmEveryNs = 2'000'000'000;
// Captures of more chips (64 hosts of 4) are not read ahead of a page asking: the reading
// would compete with the next capture's ingest of a large pod. Their first page view computes
// their overview.
constexpr int64_t kWarmMaxChips = 256;

}  // namespace

absl::StatusOr<Overview> ReadView(const StoreReads& store, const storage::CaptureRow& row,
                                  TimelineWindow window, storage::HostSelection only, bool waits) {
  only.line_kinds = {trace::LineKind::kOps, trace::LineKind::kGpuStream};
  if (waits) only.line_kinds.insert(trace::LineKind::kSteps);
  only.counter_samples = window.counters;
  if (window.counters.count("auto") > 0) {
    only.counter_samples->insert(AutoCounters().begin(), AutoCounters().end());
  }
  Overview out{TimelineView(std::move(window)), nullptr};
  WaitHeatmap heatmap(row.start_ns, row.end_ns);
  absl::Status s = store.captures().ForEachHost(row.id, only, [&](storage::StoredHost& h) {
    out.view.AddHost(h);
    if (waits) heatmap.AddHost(h);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (waits) out.waits = heatmap.Finish();
  return out;
}

std::set<std::string> DefaultCounters(const storage::CaptureRow& row) {
  if (row.chips <= 64) return {"auto"};
  return {};
}

Overviews::Overviews(StoreReads store, Clock& clock)
    : store_(store),
      seen_(store.captures_written()),
      warmer_(clock, clock.NowNs() + kWarmEveryNs, [this, &clock] {
        Warm();
        return PeriodicThread::Every(clock, kWarmEveryNs);
      }) {}

int Overviews::WidthFor(int64_t tracks) {
  if (tracks <= 1024) return 4096;
  return tracks <= 4096 ? 2048 : 1024;
}

absl::StatusOr<std::shared_ptr<const Overview>> Overviews::Get(
    const storage::CaptureRow& row, const std::set<std::string>& counters) {
  const std::string key = row.id + "\n" + absl::StrJoin(counters, ",");
  std::promise<Result> promise;
  std::shared_future<Result> result;
  bool mine = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = kept_.find(key);
    if (it != kept_.end()) {
      result = it->second;
      order_.remove(key);
    } else {
      result = promise.get_future().share();
      kept_[key] = result;
      mine = true;
      while (kept_.size() > kKept) {  // the least recently used goes
        kept_.erase(order_.back());
        order_.pop_back();
      }
    }
    order_.push_front(key);
  }
  if (mine) {
    TimelineWindow w;
    w.from_ns = row.start_ns;
    w.to_ns = std::max(row.end_ns, row.start_ns + 1);
    w.width_px = WidthFor(row.chips);
    w.counters = counters;
    absl::StatusOr<Overview> read = ReadView(store_, row, std::move(w), {}, true);
    Result r = read.ok() ? Result(std::make_shared<const Overview>(*std::move(read)))
                         : Result(read.status());
    promise.set_value(r);
    if (!r.ok()) {  // not kept: the next asker tries again
      absl::MutexLock lock(&mu_);
      kept_.erase(key);
      order_.remove(key);
    }
  }
  return result.get();
}

// Every couple of seconds, if the store has committed a capture since the last look, the
// newest captures' overviews, so that the page opened when a capture lands finds its first
// view ready. Captures stored before this process started wait for a page to ask.
void Overviews::Warm() {
  const int64_t written = store_.captures_written();
  if (written == seen_) return;  // nothing new: no query at all
  seen_ = written;
  storage::CaptureQuery q;
  q.limit = 2;
  std::string next;
  absl::StatusOr<std::vector<storage::CaptureRow>> rows = store_.captures().List(q, &next);
  if (!rows.ok()) return;
  for (const storage::CaptureRow& c : *rows) {
    if (c.status == storage::CaptureState::kRunning || c.hosts == 0 || c.chips > kWarmMaxChips)
      continue;
    absl::StatusOr<storage::CaptureRow> row = store_.captures().Get(c.id);  // with its hosts
    // A failure is not kept: the page that asks for it sees the error.
    if (row.ok()) (void)Get(*row, DefaultCounters(*row));
  }
}

}  // namespace podprof::aggregator
