#include "sim/dcn_metric.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace podprof::sim {

int DcnLatencyBucket(double us) {
  if (!(us >= kDcnLatencyScaleUs)) return 0;
  const int b =
      1 +
      static_cast<int>(std::floor(std::log(us / kDcnLatencyScaleUs) / std::log(kDcnLatencyGrowth)));
  return std::clamp(b, 1, kDcnLatencyBuckets + 1);
}

void DcnLatencyClass::Add(double us) {
  min = count == 0 ? us : std::min(min, us);
  max = count == 0 ? us : std::max(max, us);
  ++count;
  sum += us;
  sum_sq += us * us;
  ++buckets[DcnLatencyBucket(us)];
}

std::string BufferSizeClass(int64_t bytes) {
  int shift = 0;
  while (shift < 62 && (int64_t{2} << shift) <= bytes) ++shift;
  static constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  const int unit = shift / 10;
  return absl::StrCat(int64_t{1} << (shift - 10 * unit), kUnits[unit], "+");
}

void DcnLatencyCounter::CountThrough(int64_t done, int64_t max_steps) {
  counted_through_ = std::max(counted_through_, done - max_steps);
  if (model_.slices() <= 1) {
    counted_through_ = std::max(counted_through_, done);
    return;
  }
  // The rendezvous' buffer sizes, from their sends (the same every step).
  std::vector<int64_t> bytes(kDcnRendezvous, 0);
  for (const OpTemplate& op : model_.ops()) {
    if (op.dcn == DcnRole::kSend && op.rendezvous >= 0 && op.rendezvous < kDcnRendezvous) {
      bytes[op.rendezvous] = op.dcn_bytes;
    }
  }
  std::vector<DcnLatencyClass*> by_rendezvous(kDcnRendezvous);
  for (int r = 0; r < kDcnRendezvous; ++r) {
    auto [it, fresh] = classes_.try_emplace(BufferSizeClass(bytes[r]));
    if (fresh) it->second.start_host_ns = start_host_ns_;
    by_rendezvous[r] = &it->second;
  }
  for (int64_t s = counted_through_ + 1; s <= done; ++s) {
    if (!model_.Issued(s)) continue;
    for (int c = 0; c < model_.chips(); ++c) {
      for (int r = 0; r < kDcnRendezvous; ++r) {
        const int64_t ps = model_.DcnTransitPs(s, model_.GlobalChipId(c), r);
        by_rendezvous[r]->Add(static_cast<double>(ps) / 1e6);
      }
    }
  }
  counted_through_ = std::max(counted_through_, done);
}

}  // namespace podprof::sim
