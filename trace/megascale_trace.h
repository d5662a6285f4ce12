// The Megascale runtime's action graph (`/device:CUSTOM:Megascale Trace`, docs/MEGASCALE.md,
// "The runtime's action graph") kept as counter series of the host's chips: what the runtime
// itself measured of each DCN transfer, which needs no clock across slices.
//
// The plane's events are read as XProf's Megascale viewer reads them: only those with a
// `graph_key` stat `device_<raw id>_gid_<rendezvous>$<launch>^i<iteration>`; the host's raw
// device ids, sorted, are paired with its TPU chips sorted by ordinal (a count mismatch warned
// of, ids past the chips' count dropped). Per chip and rendezvous, sampled at the end of each
// `NetworkReceive END`:
//   megascale/<rendezvous>/network_transport_latency_us  the event's own stat;
//   megascale/<rendezvous>/transmission_budget_us         the receive's own stat, else that of
//   megascale/<rendezvous>/delay_budget_us                the action graph event of the same
//                                                         graph_key (`device_<id>_gid_<x>_<n>`);
//                                                         no sample where neither has it.
// The wire walk (trace/xspace_reader.cc) hands the plane's events to MegascaleSeriesBuilder,
// which holds what it needs in bounded memory (MegascaleLimits) and skips, counts and warns of
// what it cannot use. Plain data; not synchronised.
#ifndef PODPROF_TRACE_MEGASCALE_TRACE_H_
#define PODPROF_TRACE_MEGASCALE_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "trace/model.h"

namespace podprof::trace {

// The series' names: kMegascaleSeriesPrefix + rendezvous + "/" + one of the metrics.
inline constexpr absl::string_view kMegascaleSeriesPrefix = "megascale/";
inline constexpr absl::string_view kMegascaleLatencyUs = "network_transport_latency_us";
inline constexpr absl::string_view kMegascaleTransmissionBudgetUs = "transmission_budget_us";
inline constexpr absl::string_view kMegascaleDelayBudgetUs = "delay_budget_us";
// The event whose end is when a transfer's data reached the chip.
inline constexpr absl::string_view kNetworkReceiveEnd = "NetworkReceive END";
// The most microseconds a stat may hold (a day); more is damage, not a measurement.
inline constexpr uint64_t kMaxMegascaleMicros = uint64_t{86'400} * 1'000'000;

// One event of the plane as the reader found it.
struct MegascaleEvent {
  absl::string_view name;       // the event's name (its metadata's)
  absl::string_view graph_key;  // its `graph_key` stat as text; empty when it has none
  int64_t end_ns = 0;           // its end, ns since the Unix epoch on the host's clock
  // Its stats in us, when present and valid (uint64, or int64 >= 0; at most
  // kMaxMegascaleMicros).
  std::optional<uint64_t> latency_us, transmission_budget_us, delay_budget_us;
  // A stat podprof reads was of another type or impossible, or the event's time did not fit:
  // the event is skipped (and counted).
  bool damaged = false;
};

// What the builder holds at most, past which it skips events and warns.
struct MegascaleLimits {
  // Distinct raw device ids (a host has a few chips; the first ids seen are kept).
  size_t max_devices = 64;
  // Distinct rendezvous per raw id: 3 series each.
  size_t max_rendezvous = 256;
  // Longest rendezvous name, bytes.
  size_t max_name_bytes = 256;
  // Samples and action-graph budgets held until Finish (ReadOptions::max_piece_bytes).
  size_t max_bytes = size_t{64} << 20;
};

// The parts of a graph_key `device_<raw id>_gid_<rendezvous>$<launch>^i<iteration>`: false
// when it is not of that form (digits for the id and the iteration, 1-18 of them; a rendezvous
// of [A-Za-z0-9_.-], at most `max_name_bytes`; a non-empty launch).
bool ParseGraphKey(absl::string_view key, size_t max_name_bytes, uint64_t* raw_id,
                   absl::string_view* rendezvous);
// True for the name of an action graph event, `device_<digits>_gid_<[A-Za-z0-9_.-]+>_<digits>`
// (XProf's kGraphNameRe, matched whole).
bool IsActionGraphName(absl::string_view name);

// Collects one plane's events and makes its series.
class MegascaleSeriesBuilder {
 public:
  // `chips`: the host's (Host::chips; the series' `chip` indexes them).
  explicit MegascaleSeriesBuilder(const std::vector<Chip>& chips, MegascaleLimits limits = {});

  // One event. Events without a graph_key are not the runtime's and are ignored, as XProf
  // ignores them; of the others only `NetworkReceive END` and action graph events add
  // anything.
  void Add(const MegascaleEvent& event);

  // The series, by chip then name, each one's samples in time order; a chip's series only
  // when it has samples. Warnings naming `plane` for what was skipped, capped or unpaired go
  // to `warnings`, one per kind. Call once.
  std::vector<CounterSeries> Finish(absl::string_view plane, std::vector<std::string>* warnings);

 private:
  // Per device (index into devices_), its chip: the sorted raw ids paired with the TPU chips
  // sorted by ordinal; -1 past the chips' count. A count mismatch is warned of.
  std::vector<int> ChipsOfDevices(absl::string_view plane, std::vector<std::string>* warnings);
  // One warning for each kind of event skipped.
  void WarnOfSkipped(absl::string_view plane, std::vector<std::string>* warnings) const;
  // A NetworkReceive END kept: its instant, device, rendezvous, key and values (-1: none).
  struct Sample {
    int64_t end_ns;
    uint64_t key_hash;
    uint32_t device;      // index into devices_
    uint32_t rendezvous;  // index into that device's names
    int64_t latency_us, transmission_us, delay_us;
  };
  struct Device {
    uint64_t raw_id = 0;
    std::vector<std::string> names;
    absl::flat_hash_map<std::string, uint32_t> index;
  };
  // Budgets of an action graph event, by its graph_key's hash (-1: none).
  struct Budgets {
    int64_t transmission_us = -1, delay_us = -1;
  };

  size_t HeldBytes() const;

  const std::vector<Chip>& chips_;
  const MegascaleLimits limits_;
  std::vector<Device> devices_;
  absl::flat_hash_map<uint64_t, uint32_t> device_of_raw_id_;
  absl::flat_hash_map<uint64_t, Budgets> budgets_;
  std::vector<Sample> samples_;
  // What was skipped, for the warnings.
  int64_t damaged_ = 0;          // bad graph_key, stat or time; receive without latency
  int64_t past_devices_ = 0;     // events of raw ids past max_devices
  int64_t past_rendezvous_ = 0;  // receives of rendezvous past max_rendezvous of their device
  int64_t past_bytes_ = 0;       // events past max_bytes
};

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_MEGASCALE_TRACE_H_
