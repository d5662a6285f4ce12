#include "sql/budget.h"

#include "absl/strings/str_format.h"

namespace podprof::sql {

absl::Status Budget::CheckTime() {
  if (!stopped_.ok()) return stopped_;
  if (clock_.NowNs() <= deadline_ns_) return absl::OkStatus();
  stopped_ = absl::DeadlineExceededError(
      absl::StrFormat("sql: the statement ran past its time limit of %.3g s",
                      static_cast<double>(limits_.time_limit_ns) / 1e9));
  return stopped_;
}

absl::Status Budget::Charge(int64_t bytes) {
  if (bytes > 0 && held_ + bytes > limits_.memory_bytes) {
    if (stopped_.ok()) {
      stopped_ = absl::ResourceExhaustedError(absl::StrFormat(
          "sql: the statement needs more than its memory budget of %d MiB (it held %d MiB and "
          "asked for %d MiB more); narrow it to fewer hosts, chips or a shorter time range",
          limits_.memory_bytes >> 20, held_ >> 20, (bytes + (1 << 20) - 1) >> 20));
    }
    return stopped_;
  }
  held_ += bytes;
  if (held_ > peak_) peak_ = held_;
  return absl::OkStatus();
}

}  // namespace podprof::sql
