#include "aggregator/capture/stream_budget.h"

namespace podprof::aggregator {

int64_t StreamBudget::Join() {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  held_[id] = 0;
  return id;
}

bool StreamBudget::Take(int64_t id, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_ += bytes;
  held_[id] += bytes;
  if (let_go_.contains(id)) return false;
  if (used_ <= limit_) return true;
  // Past the limit: the stream holding the most goes, of those not already let go. The bytes
  // of those let go come back as soon as they see it, and do not count against the others
  // meanwhile: an honest stream was let go because a hostile one, let go a moment before,
  // had not yet given its bytes back.
  int64_t largest = id, kept = 0;
  for (const auto& [stream, held] : held_) {
    if (let_go_.contains(stream)) continue;
    kept += held;
    if (held > held_[largest]) largest = stream;
  }
  if (kept <= limit_) return true;
  let_go_.insert(largest);
  return largest != id;
}

void StreamBudget::Leave(int64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(id);
  if (it == held_.end()) return;
  used_ -= it->second;
  held_.erase(it);
  let_go_.erase(id);
}

int64_t StreamBudget::used() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

}  // namespace podprof::aggregator
