// Registration and heartbeats of every emulated host with the aggregator, as podprof-agent's
// Registrar does for one host: Register until it works, then Heartbeat at the interval the
// aggregator asks for, Register again when a heartbeat says so, back off (doubling from 1 s to
// 30 s) while the aggregator does not answer. Calls are asynchronous, at most a bounded number
// in flight, so thousands of hosts need one thread and a slow aggregator delays no other host
// than those whose calls it holds. With a telemetry interval, each registered host also reports
// one telemetry sample of its chips per interval (ReportTelemetry), as an agent's
// [telemetry] does, with values of a healthy pod.
#ifndef PODPROF_LOADGEN_FLEET_REGISTRAR_H_
#define PODPROF_LOADGEN_FLEET_REGISTRAR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/periodic.h"
#include "loadgen/emulated_host.h"
#include "proto/podprof_aggregator.grpc.pb.h"

namespace podprof::loadgen {

// Runs its loop on its own thread from Start() to Stop(); completions arrive on gRPC's
// threads. Per-host state is guarded by mu_.
class FleetRegistrar {
 public:
  // `hosts` and `clock` must outlive the registrar; `infos` are the hosts' descriptions in
  // the same order. Nothing is sent before Start().
  FleetRegistrar(std::vector<EmulatedHost*> hosts, std::vector<podprof::v1::HostInfo> infos,
                 std::unique_ptr<podprof::v1::Aggregator::Stub> stub, Clock& clock,
                 int max_in_flight = 64, int64_t telemetry_interval_ns = 0);
  // From `at_ns` (this clock) on, every host's reported step time is `factor` times longer: a
  // pod-wide regression, for the flight recorder's triggers.
  void SlowTelemetryAt(int64_t at_ns, double factor) {
    slow_at_ns_ = at_ns;
    slow_factor_ = factor;
  }
  ~FleetRegistrar();
  FleetRegistrar(const FleetRegistrar&) = delete;
  FleetRegistrar& operator=(const FleetRegistrar&) = delete;

  void Start();
  // Stops sending and waits (at most the calls' deadline) for the calls in flight.
  void Stop();
  // Hosts whose last Register or Heartbeat was accepted.
  int registered() const;
  // Telemetry reports accepted, and refused or failed.
  int64_t telemetry_sent() const;
  int64_t telemetry_failed() const;

 private:
  struct Entry {
    bool registered = false;
    bool in_flight = false;
    int64_t next_ns = 0;
    int64_t backoff_ns = 0;
    int64_t interval_ns = 10'000'000'000;
    bool telemetry_in_flight = false;
    int64_t next_telemetry_ns = 0;
  };
  // One round of due calls; the time of the next.
  int64_t Tick();
  void Send(size_t i, bool reg);
  void SendTelemetry(size_t i);
  // Records a call's outcome; `interval_ms` 0 keeps the last interval.
  void Done(size_t i, bool reg, bool ok, bool reregister, uint32_t interval_ms);

  const std::vector<EmulatedHost*> hosts_;
  const std::vector<podprof::v1::HostInfo> infos_;
  std::unique_ptr<podprof::v1::Aggregator::Stub> stub_;
  Clock& clock_;
  const int max_in_flight_;
  const int64_t telemetry_interval_ns_;
  int64_t slow_at_ns_ = INT64_MAX;  // set before Start()
  double slow_factor_ = 1;
  std::unique_ptr<PeriodicThread> thread_;

  mutable absl::Mutex mu_;
  // Guarded by mu_.
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t telemetry_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t telemetry_failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podprof::loadgen

#endif  // PODPROF_LOADGEN_FLEET_REGISTRAR_H_
