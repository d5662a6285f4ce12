// Arithmetic on numbers that come from users.
//
// A count, limit or duration read from a flag, an HTTP parameter or a proto
// field is checked before it is multiplied or added: signed overflow is
// undefined behaviour, and in practice it wraps, so `duration_ms = 2^58 +
// 1000` became a duration of 1 s once multiplied by 1,000,000 and passed the
// duration limit. These helpers say when a result does not fit instead of
// wrapping; the conversions name the field and its allowed range, so a
// refusal reads the same at every daemon.
//
// Header-only; every function is pure and thread-safe.

#ifndef PODPROF_COMMON_CHECKED_H_
#define PODPROF_COMMON_CHECKED_H_

#include <cstdint>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"

namespace podprof {

// a * b, or nullopt when it does not fit in an int64_t.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a + b, or nullopt when it does not fit in an int64_t.
inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a + b held at the int64 range's ends instead of wrapping: for sums over rows that were each
// checked (a pod's or a history's totals), where a total past 2^63 ps (106 days of kernel
// time) is better shown as the largest than as a negative number.
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out;
  if (!__builtin_add_overflow(a, b, &out)) return out;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

// `value`, read from the field, flag or parameter named `field`, when it lies
// in [min, max]; otherwise InvalidArgument naming the field, the range and
// the value ("top must be 0..1000000, got 5000000000"). Requires min <= max.
inline absl::StatusOr<int64_t> CheckedRange(absl::string_view field, int64_t value, int64_t min,
                                            int64_t max) {
  if (value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be ", min, "..", max, ", got ", value));
  }
  return value;
}

// The milliseconds `ms` of the unsigned field `field` as nanoseconds, when
// min_ms <= ms <= max_ms; otherwise InvalidArgument naming the field, its
// range in ms and the value as sent ("duration_ms must be 1..3600000, got
// 288230376151712744"). The range is checked before the multiply, so no
// value wraps into range. Requires 0 <= min_ms <= max_ms <= INT64_MAX / 1e6
// (about 292 years).
inline absl::StatusOr<int64_t> MillisFieldToNanos(absl::string_view field, uint64_t ms,
                                                  int64_t min_ms, int64_t max_ms) {
  if (ms < static_cast<uint64_t>(min_ms) || ms > static_cast<uint64_t>(max_ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be ", min_ms, "..", max_ms, ", got ", ms));
  }
  return static_cast<int64_t>(ms) * 1'000'000;
}

// The largest whole number of ms whose ns fit in an int64_t.
inline constexpr int64_t kMaxMillisAsNanos = std::numeric_limits<int64_t>::max() / 1'000'000;

// OK when a capture of `duration_ms` may run under a limit of `max_ns`, compared in ms before
// any multiply (2^58 + 1000 ms wrapped to 1 s once in ns). Otherwise InvalidArgument:
// "duration_ms must be at least 1, got 0", or "a capture of 10 min is longer than this agent
// allows (limits.max_capture_duration = 5 min)", `daemon` naming who refuses and the length
// given in ms where it would not fit in ps.
inline absl::Status CheckCaptureDurationMs(uint64_t duration_ms, int64_t max_ns,
                                           absl::string_view daemon) {
  if (duration_ms == 0) return absl::InvalidArgumentError("duration_ms must be at least 1, got 0");
  if (duration_ms <= static_cast<uint64_t>(max_ns / 1'000'000)) return absl::OkStatus();
  const std::string asked =
      duration_ms <= static_cast<uint64_t>(kMaxMillisAsNanos / 1000)
          ? FormatDurationPs(static_cast<int64_t>(duration_ms) * 1'000'000'000)
          : absl::StrCat(duration_ms, " ms");
  return absl::InvalidArgumentError(absl::StrCat(
      "a capture of ", asked, " is longer than this ", daemon,
      " allows (limits.max_capture_duration = ", FormatDurationPs(max_ns * 1000), ")"));
}

}  // namespace podprof

#endif  // PODPROF_COMMON_CHECKED_H_
