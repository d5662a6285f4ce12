// The first view of a capture's page, kept: each stored capture's whole-window timeline at a
// fine width (with its waits heatmap) is computed once, when the capture lands, and any page's
// width is resampled from it (TimelineView::Resampled). The page everyone opens first then
// costs a resampling instead of reading every event of every host; zoomed windows are still
// read from the store. A few recent captures are kept (least recently used go).
#ifndef PODPROF_AGGREGATOR_API_OVERVIEWS_H_
#define PODPROF_AGGREGATOR_API_OVERVIEWS_H_

#include <future>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/api/store_reads.h"
#include "aggregator/api/timeline_view.h"
#include "common/clock.h"
#include "common/periodic.h"
#include "nlohmann/json.hpp"

namespace podprof::aggregator {

struct Overview {
  TimelineView view;
  nlohmann::json waits;  // WaitHeatmap::Finish()
};

// Reads `row`'s hosts once into a view of `window` (and, with `waits`, the heatmap): only the
// kernel lines (and steps), and the samples of the counters shown.
absl::StatusOr<Overview> ReadView(const StoreReads& store, const storage::CaptureRow& row,
                                  TimelineWindow window, storage::HostSelection only, bool waits);

// The counters a page shows first: the automatic one up to 64 chips, none past (half the
// pixels to send and draw for a large pod, until one is picked from the menu).
std::set<std::string> DefaultCounters(const storage::CaptureRow& row);

class Overviews {
 public:
  // Starts a thread that computes the overviews of newly stored captures, looking every 2 s of
  // `clock` (which must outlive this).
  Overviews(StoreReads store, Clock& clock);

  // The overview's width for a capture of `tracks` chips: 4096 pixels, less for very large pods
  // (a pixel column of every chip costs 12 bytes).
  static int WidthFor(int64_t tracks);
  // `row`'s overview with `counters`, computed now unless kept or being computed (then this
  // waits for it). Not for running captures.
  absl::StatusOr<std::shared_ptr<const Overview>> Get(const storage::CaptureRow& row,
                                                      const std::set<std::string>& counters);

 private:
  using Result = absl::StatusOr<std::shared_ptr<const Overview>>;
  void Warm();  // on warmer_

  const StoreReads store_;
  absl::Mutex mu_;
  // By capture and counters.
  std::map<std::string, std::shared_future<Result>> kept_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> order_ ABSL_GUARDED_BY(mu_);  // most recently used first
  int64_t seen_ = 0;       // the store's committed captures at Warm's last look; warmer_'s own
  PeriodicThread warmer_;  // last: stopped before the members it uses go
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_OVERVIEWS_H_
