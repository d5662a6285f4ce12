#include "loadgen/fleet_registrar.h"

#include <algorithm>

#include "absl/time/time.h"
#include "common/logging.h"
#include "proto/grpc_status.h"

namespace podprof::loadgen {
namespace {

namespace v1 = podprof::v1;

constexpr int64_t kCallDeadlineNs = 5'000'000'000;
constexpr int64_t kFirstBackoffNs = 1'000'000'000;
constexpr int64_t kMaxBackoffNs = 30'000'000'000;
// How often the loop looks for hosts that are due when none is due sooner.
constexpr int64_t kTickNs = 20'000'000;

// One call's state, alive until its completion runs.
template <typename Request, typename Response>
struct Call {
  grpc::ClientContext context;
  Request request;
  Response response;
};

}  // namespace

FleetRegistrar::FleetRegistrar(std::vector<EmulatedHost*> hosts, std::vector<v1::HostInfo> infos,
                               std::unique_ptr<v1::Aggregator::Stub> stub, Clock& clock,
                               int max_in_flight, int64_t telemetry_interval_ns)
    : hosts_(std::move(hosts)),
      infos_(std::move(infos)),
      stub_(std::move(stub)),
      clock_(clock),
      max_in_flight_(std::max(1, max_in_flight)),
      telemetry_interval_ns_(telemetry_interval_ns),
      entries_(hosts_.size()) {}

FleetRegistrar::~FleetRegistrar() { Stop(); }

void FleetRegistrar::Start() {
  thread_ = std::make_unique<PeriodicThread>("podprof-fleetreg", clock_, clock_.NowNs(),
                                             [this] { return Tick(); });
}

void FleetRegistrar::Stop() {
  if (thread_ != nullptr) thread_->Stop();
  // Every call has a deadline, so this wait has one too.
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(
                           +[](int* n) { return *n == 0; }, &in_flight_),
                       absl::Nanoseconds(kCallDeadlineNs + 1'000'000'000));
}

int FleetRegistrar::registered() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.registered; }));
}

int64_t FleetRegistrar::telemetry_sent() const {
  absl::MutexLock lock(&mu_);
  return telemetry_sent_;
}

int64_t FleetRegistrar::telemetry_failed() const {
  absl::MutexLock lock(&mu_);
  return telemetry_failed_;
}

int64_t FleetRegistrar::Tick() {
  std::vector<std::pair<size_t, bool>> due;  // (host, register?)
  std::vector<size_t> reports;
  const int64_t now = clock_.NowNs();
  int64_t wake = now + kTickNs;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      Entry& e = entries_[i];
      // Telemetry at every multiple of the interval, as agents sample (a budget of calls of
      // its own, so that reports never hold heartbeats back).
      if (telemetry_interval_ns_ > 0 && e.registered && !e.telemetry_in_flight) {
        if (e.next_telemetry_ns <= now) {
          e.telemetry_in_flight = true;
          e.next_telemetry_ns = (now / telemetry_interval_ns_ + 1) * telemetry_interval_ns_;
          reports.push_back(i);
        }
        wake = std::min(wake, e.next_telemetry_ns);
      }
      if (e.in_flight) continue;
      if (e.next_ns > now) {
        wake = std::min(wake, e.next_ns);
        continue;
      }
      if (in_flight_ >= max_in_flight_) break;
      e.in_flight = true;
      ++in_flight_;
      due.emplace_back(i, !e.registered);
    }
  }
  for (const auto& [i, reg] : due) Send(i, reg);
  for (size_t i : reports) SendTelemetry(i);
  return wake;
}

void FleetRegistrar::Send(size_t i, bool reg) {
  if (reg) {
    auto* call = new Call<v1::RegisterRequest, v1::RegisterResponse>;
    call->context.set_deadline(DeadlineAt(clock_.NowNs(), kCallDeadlineNs));
    *call->request.mutable_host() = infos_[i];
    call->request.set_agent_start_ns(hosts_[i]->start_ns);
    stub_->async()->Register(
        &call->context, &call->request, &call->response, [this, i, call](grpc::Status s) {
          Done(i, true, s.ok(), false, s.ok() ? call->response.heartbeat_interval_ms() : 0);
          if (!s.ok()) {
            PODPROF_LOG(WARNING) << hosts_[i]->name << ": Register failed: " << s.error_message();
          }
          delete call;
        });
    return;
  }
  auto* call = new Call<v1::HeartbeatRequest, v1::HeartbeatResponse>;
  call->context.set_deadline(DeadlineAt(clock_.NowNs(), kCallDeadlineNs));
  call->request.set_host_name(hosts_[i]->name);
  {
    absl::MutexLock lock(&hosts_[i]->mu);
    call->request.set_active_capture_id(hosts_[i]->active_capture);
  }
  stub_->async()->Heartbeat(&call->context, &call->request, &call->response,
                            [this, i, call](grpc::Status s) {
                              Done(i, false, s.ok(), s.ok() && call->response.reregister(),
                                   s.ok() ? call->response.heartbeat_interval_ms() : 0);
                              delete call;
                            });
}

void FleetRegistrar::SendTelemetry(size_t i) {
  auto* call = new Call<v1::ReportTelemetryRequest, v1::ReportTelemetryResponse>;
  const int64_t now = clock_.NowNs();
  call->context.set_deadline(DeadlineAt(now, kCallDeadlineNs));
  call->request.set_host_name(hosts_[i]->name);
  v1::TelemetrySample* sample = call->request.add_samples();
  sample->set_time_ns(now);
  sample->set_interval_ns(telemetry_interval_ns_);
  // A healthy synchronous pod: every chip ends the same steps, within a percent of each other.
  const auto jitter = static_cast<double>((now / 1'000'000 + static_cast<int64_t>(i)) % 17) / 1700;
  const double slow = now >= slow_at_ns_ ? slow_factor_ : 1;
  for (int c = 0; c < infos_[i].chips_size(); ++c) {
    v1::ChipTelemetry* t = sample->add_chips();
    t->set_chip(c);
    t->set_steps(10);
    t->set_step_mean_us(90'000 * (1 + jitter) * slow);
    t->set_step_max_us(95'000 * (1 + jitter) * slow);
    t->set_duty_cycle_percent(72 + 10 * jitter);
    t->set_hbm_used_bytes(int64_t{24} << 30);
    t->set_queued(2);
    // The host's collectives (a host-wide figure: the same on each chip), 40 a step.
    t->set_collectives(400);
    t->set_collective_mean_us(1'200 * (1 + jitter));
  }
  call->request.set_sent_ns(clock_.NowNs());
  stub_->async()->ReportTelemetry(&call->context, &call->request, &call->response,
                                  [this, i, call](grpc::Status s) {
                                    absl::MutexLock lock(&mu_);
                                    entries_[i].telemetry_in_flight = false;
                                    ++(s.ok() ? telemetry_sent_ : telemetry_failed_);
                                    delete call;
                                  });
}

void FleetRegistrar::Done(size_t i, bool reg, bool ok, bool reregister, uint32_t interval_ms) {
  const int64_t now = clock_.NowNs();
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[i];
  e.in_flight = false;
  --in_flight_;
  if (!ok) {
    // The aggregator is away or overloaded: retry later, and register again if it was a
    // registration that failed.
    e.backoff_ns = e.backoff_ns == 0 ? kFirstBackoffNs : std::min(2 * e.backoff_ns, kMaxBackoffNs);
    if (reg) e.registered = false;
    e.next_ns = now + e.backoff_ns;
    return;
  }
  e.backoff_ns = 0;
  if (interval_ms > 0) e.interval_ns = int64_t{interval_ms} * 1'000'000;
  e.registered = !reregister;
  e.next_ns = reregister ? now : now + e.interval_ns;
}

}  // namespace podprof::loadgen
