#include "storage/rows.h"

namespace podprof::storage {
namespace {

// The name of `value` in `table`, or none.
template <typename E, size_t N>
std::optional<E> Named(const std::pair<E, const char*> (&table)[N], std::string_view name) {
  for (const auto& [value, n] : table) {
    if (name == n) return value;
  }
  return std::nullopt;
}

template <typename E, size_t N>
const char* NameOf(const std::pair<E, const char*> (&table)[N], E value) {
  for (const auto& [v, n] : table) {
    if (v == value) return n;
  }
  return "unknown";  // unreachable for a value of the enum
}

constexpr std::pair<CaptureState, const char*> kStateNames[] = {
    {CaptureState::kRunning, "running"},     {CaptureState::kComplete, "complete"},
    {CaptureState::kPartial, "partial"},     {CaptureState::kFailed, "failed"},
    {CaptureState::kCancelled, "cancelled"}, {CaptureState::kInterrupted, "interrupted"}};
constexpr std::pair<HostOutcome, const char*> kOutcomeNames[] = {
    {HostOutcome::kComplete, "complete"}, {HostOutcome::kFailed, "failed"}};
constexpr std::pair<CaptureSource, const char*> kSourceNames[] = {
    {CaptureSource::kCapture, "capture"},
    {CaptureSource::kImport, "import"},
    {CaptureSource::kSnapshot, "snapshot"}};

}  // namespace

const char* CaptureStateName(CaptureState s) { return NameOf(kStateNames, s); }
std::optional<CaptureState> CaptureStateNamed(std::string_view name) {
  return Named(kStateNames, name);
}
const char* HostOutcomeName(HostOutcome o) { return NameOf(kOutcomeNames, o); }
std::optional<HostOutcome> HostOutcomeNamed(std::string_view name) {
  return Named(kOutcomeNames, name);
}
const char* CaptureSourceName(CaptureSource s) { return NameOf(kSourceNames, s); }
std::optional<CaptureSource> CaptureSourceNamed(std::string_view name) {
  return Named(kSourceNames, name);
}

}  // namespace podprof::storage
