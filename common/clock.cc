#include "common/clock.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace podprof {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;

int64_t ReadClock(clockid_t id) {
  struct timespec ts;
  // Only fails for an invalid clock id, which these constants are not.
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSecond + ts.tv_nsec;
}

}  // namespace

int64_t RealClock::NowNs() { return ReadClock(CLOCK_REALTIME); }

int64_t RealClock::MonotonicNs() { return ReadClock(CLOCK_MONOTONIC); }

bool RealClock::SleepUntilNs(int64_t wall_ns, absl::Notification* cancel) {
  // Sleep in slices of at most 100 ms and re-read the wall clock after each:
  // a relative sleep does not notice the system time being stepped, and 100
  // ms bounds how late a deadline can be after a forward step while costing
  // nothing measurable. Cancellation does not wait for a slice to end:
  // WaitForNotificationWithTimeout returns as soon as `cancel` fires.
  constexpr int64_t kMaxSliceNs = 100'000'000;
  while (true) {
    if (cancel != nullptr && cancel->HasBeenNotified()) return false;
    const int64_t now_ns = NowNs();
    if (now_ns >= wall_ns) return true;
    const absl::Duration slice = absl::Nanoseconds(std::min(wall_ns - now_ns, kMaxSliceNs));
    if (cancel != nullptr) {
      if (cancel->WaitForNotificationWithTimeout(slice)) return false;
    } else {
      absl::SleepFor(slice);
    }
  }
}

FakeClock::FakeClock(int64_t start_ns) : start_ns_(start_ns), now_ns_(start_ns) {}

int64_t FakeClock::NowNs() {
  absl::MutexLock lock(&mu_);
  return now_ns_;
}

int64_t FakeClock::MonotonicNs() {
  absl::MutexLock lock(&mu_);
  return monotonic_ns_;
}

bool FakeClock::SleepUntilNs(int64_t wall_ns, absl::Notification* cancel) {
  absl::MutexLock lock(&mu_);
  ++sleepers_;
  bool reached;
  while (true) {
    if (cancel != nullptr && cancel->HasBeenNotified()) {
      reached = false;
      break;
    }
    if (now_ns_ >= wall_ns) {
      reached = true;
      break;
    }
    // The Mutex re-evaluates the condition whenever SetNs/AdvanceNs release
    // it, so a due sleeper wakes at once. A Notification does not touch mu_,
    // hence the 10 ms timeout to look at `cancel` again.
    auto due = [this, wall_ns]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return now_ns_ >= wall_ns; };
    mu_.AwaitWithTimeout(absl::Condition(&due), absl::Milliseconds(10));
  }
  --sleepers_;
  return reached;
}

void FakeClock::SetNs(int64_t now_ns) {
  absl::MutexLock lock(&mu_);
  now_ns_ = now_ns;
  monotonic_ns_ = std::max(monotonic_ns_, now_ns_ - start_ns_);
}

void FakeClock::AdvanceNs(int64_t delta_ns) {
  absl::MutexLock lock(&mu_);
  now_ns_ += delta_ns;
  monotonic_ns_ = std::max(monotonic_ns_, now_ns_ - start_ns_);
}

int FakeClock::Sleepers() const {
  absl::MutexLock lock(&mu_);
  return sleepers_;
}

bool FakeClock::AwaitSleepers(int count, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return sleepers_ >= count; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

namespace {

constexpr absl::string_view kUnitHint = "(use ns, us, ms, s, m, h, d)";

absl::Status BadDuration(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad duration \"", absl::CHexEscape(text), "\": ", why));
}

// Returns the length of one unit in ns, or 0 for an unknown unit.
int64_t UnitNs(absl::string_view unit) {
  if (unit == "ns") return 1;
  if (unit == "us") return 1'000;
  if (unit == "ms") return 1'000'000;
  if (unit == "s") return kNsPerSecond;
  if (unit == "m") return 60 * kNsPerSecond;
  if (unit == "h") return 3600 * kNsPerSecond;
  if (unit == "d") return 86400 * kNsPerSecond;
  return 0;
}

}  // namespace

absl::StatusOr<int64_t> ParseDurationNs(absl::string_view text) {
  if (text.empty()) return BadDuration(text, "empty");
  absl::string_view rest = text;
  bool negative = false;
  if (rest.front() == '-' || rest.front() == '+') {
    negative = rest.front() == '-';
    rest.remove_prefix(1);
  }

  // Integer part, checked against overflow digit by digit.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t whole = 0;
  size_t i = 0;
  bool whole_overflow = false;
  while (i < rest.size() && absl::ascii_isdigit(rest[i])) {
    const int digit = rest[i] - '0';
    if (whole > (kMax - digit) / 10) {
      whole_overflow = true;
    } else {
      whole = whole * 10 + digit;
    }
    ++i;
  }
  if (i == 0) {
    return BadDuration(text, absl::StrCat("expected a number followed by a unit ", kUnitHint));
  }

  // Fraction part, kept as a double in [0, 1): it is multiplied by at most
  // 3.6e12 ns (an hour), far inside a double's 53-bit exact range, so
  // rounding to the nearest ns is exact in practice.
  double fraction = 0;
  bool nonzero_fraction = false;
  if (i < rest.size() && rest[i] == '.') {
    ++i;
    const size_t begin = i;
    while (i < rest.size() && absl::ascii_isdigit(rest[i])) ++i;
    if (i == begin) {
      return BadDuration(text, "expected digits after the decimal point");
    }
    for (size_t j = i; j > begin; --j) {
      const int digit = rest[j - 1] - '0';
      nonzero_fraction |= digit != 0;
      fraction = (fraction + digit) / 10;
    }
  }

  const absl::string_view unit = rest.substr(i);
  if (unit.empty()) {
    if (whole == 0 && !whole_overflow && !nonzero_fraction) return 0;
    return BadDuration(text, absl::StrCat("missing unit ", kUnitHint));
  }
  const int64_t unit_ns = UnitNs(unit);
  if (unit_ns == 0) {
    return BadDuration(text,
                       absl::StrCat("unknown unit \"", absl::CHexEscape(unit), "\" ", kUnitHint));
  }

  const int64_t fraction_ns =
      static_cast<int64_t>(std::llround(fraction * static_cast<double>(unit_ns)));
  if (whole_overflow || whole > (kMax - fraction_ns) / unit_ns) {
    return BadDuration(text, "out of range");
  }
  const int64_t magnitude = whole * unit_ns + fraction_ns;
  return negative ? -magnitude : magnitude;
}

std::string FormatDurationPs(int64_t ps) {
  struct Unit {
    double ps;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{1, "ps"}, {1e3, "ns"}, {1e6, "us"}, {1e9, "ms"}, {1e12, "s"}};
  constexpr int kLast = sizeof(kUnits) / sizeof(kUnits[0]) - 1;

  // A double keeps INT64_MIN's magnitude, which int64_t cannot.
  const double magnitude = std::fabs(static_cast<double>(ps));
  int u = 0;
  while (u < kLast && magnitude >= kUnits[u + 1].ps) ++u;

  std::string number;
  while (true) {
    const double value = magnitude / kUnits[u].ps;
    int decimals = u == 0 ? 0 : value < 10 ? 2 : value < 100 ? 1 : 0;
    number = absl::StrFormat("%.*f", decimals, value);
    // Rounding may carry into another digit ("9.996" -> "10.00"): drop a
    // decimal to stay at three significant digits, or move to the next unit
    // when the integer part reaches 1000.
    const size_t point = number.find('.');
    const int integer_digits = static_cast<int>(point == std::string::npos ? number.size() : point);
    if (decimals > 0 && integer_digits + decimals > 3) {
      decimals = 3 - integer_digits;
      number = absl::StrFormat("%.*f", decimals, value);
    }
    if (integer_digits > 3 && u < kLast) {
      ++u;
      continue;
    }
    break;
  }
  return absl::StrCat(ps < 0 ? "-" : "", number, " ", kUnits[u].name);
}

}  // namespace podprof
