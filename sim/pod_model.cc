#include "sim/pod_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/dcn_program.h"
#include "sim/training_step.h"

namespace podprof::sim {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1) from a hash.
double Uniform(uint64_t h) { return (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0; }

// Multiplicative noise with a median of 1, close to log-normal with sigma 3%. Every simhost
// draws this for every chip of the pod (a collective ends after the slowest arrival anywhere),
// so it is the simulator's hot loop: a Gaussian from the sum of four 16-bit uniforms of one
// hash (Irwin-Hall, mean 2, variance 1/3) and exp() by its Taylor series, exact to 1e-5 over
// the +-0.1 the exponent can reach, instead of log, cos and exp.
double Noise(uint64_t h) {
  double sum = 0;
  for (int i = 0; i < 4; ++i) sum += (static_cast<double>((h >> (16 * i)) & 0xffff) + 0.5) / 65536;
  const double x = 0.03 * (sum - 2) * 1.7320508075688772;  // * sqrt(3): unit variance
  return 1 + x * (1 + x * (0.5 + x * (1.0 / 6 + x / 24)));
}

// Inter-chip link bandwidth used for collectives, GB/s (the same order as ICI on these chips).
constexpr double kLinkGbps = 400;
// Launch gap between consecutive kernels on a chip, ps.
constexpr int64_t kLaunchGapPs = 150'000;

// DCN, per chip: a host's 200 Gbit/s NIC shared by its 4 chips gives each 50 Gbit/s
// (6.25 GB/s), so a 1 MiB gradient bucket takes about 168 us to leave; then about 40 us of
// network latency to the next slice. The send and recv only issue the transfer (a few us);
// the recv-done copies the received buffer (a few us). podprof's choices, not measurements.
constexpr double kDcnChipBytesPerS = 6.25e9;
constexpr int64_t kDcnLatencyPs = 40'000'000;
constexpr int64_t kDcnSendPs = 2'500'000;
constexpr int64_t kDcnRecvPs = 1'500'000;
constexpr int64_t kDcnCopyPs = 4'000'000;
constexpr int64_t kDcnDoneMinPs = 1'000'000;

// Uniform in (0.8, 1.2) from 21 bits of `h` (part 0, 1 or 2).
double Jitter(uint64_t h, int part) {
  return 0.8 + 0.4 * (static_cast<double>((h >> (21 * part)) & 0x1fffff) + 0.5) / 2097152.0;
}

// The configuration's errors, naming the field; OK when it describes a pod. `chips` is the
// chips per host it resolves to.
absl::Status ValidateConfig(const PodConfig& config, int chips) {
  if (config.chips < 0 || chips > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("chips per host must be 1..64, got ", config.chips));
  }
  if (config.hosts < 1) {
    return absl::InvalidArgumentError(absl::StrCat("hosts must be at least 1, got ", config.hosts));
  }
  if (config.host_index < 0 || config.host_index >= config.hosts) {
    return absl::InvalidArgumentError(
        absl::StrCat("host index ", config.host_index, " is outside 0..", config.hosts - 1));
  }
  if (config.slices < 1 || config.hosts % config.slices != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("slices must be at least 1 and divide the hosts evenly: ", config.hosts,
                     " hosts do not split into ", config.slices, " slices"));
  }
  for (const DcnDelay& d : config.dcn_delays) {
    if (config.slices < 2) {
      return absl::InvalidArgumentError(
          "a DCN delay needs a multi-slice job (slices 2 or more): one slice sends nothing "
          "over DCN");
    }
    if (d.slice < 0 || d.slice >= config.slices || d.extra_ns < 0) {
      return absl::InvalidArgumentError(absl::StrCat("DCN delay ", d.slice, ":", d.extra_ns,
                                                     " ns names no slice of 0..", config.slices - 1,
                                                     " or is negative"));
    }
  }
  for (const SlowSlice& s : config.slow_slices) {
    if (s.slice < 0 || s.slice >= config.slices || !(s.factor > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("slow slice ", s.slice, ":", s.factor,
                                                     " names no slice of 0..", config.slices - 1,
                                                     " or has a factor that is not positive"));
    }
  }
  auto names_chip = [&](int host, int chip) {
    return host >= 0 && host < config.hosts && chip >= 0 && chip < chips;
  };
  for (const Straggler& s : config.stragglers) {
    if (!names_chip(s.host, s.chip) || !(s.factor > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("straggler ", s.host, ":", s.chip, ":",
                                                     s.factor,
                                                     " names no chip of the pod or has "
                                                     "a factor that is not positive"));
    }
  }
  for (const Throttle& t : config.throttles) {
    if (!names_chip(t.host, t.chip) || !(t.fraction >= 0 && t.fraction < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("throttle ", t.host, ":", t.chip, ":",
                                                     t.fraction,
                                                     " names no chip of the pod or skips a "
                                                     "fraction of clocks outside [0, 1)"));
    }
  }
  for (const Stall& s : config.stalls) {
    if (!(s.until_ns > s.from_ns)) {
      return absl::InvalidArgumentError("a stall ends before it begins");
    }
  }
  for (const StepSkip& k : config.skips) {
    if (!(k.fraction >= 0 && k.fraction < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a duty-cycle drop skips ", k.fraction, " of the steps, outside [0, 1)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t MixHash(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e) {
  uint64_t h = SplitMix(a);
  h = SplitMix(h ^ b);
  h = SplitMix(h ^ c);
  h = SplitMix(h ^ d);
  return SplitMix(h ^ e);
}

absl::StatusOr<PodModel> PodModel::Create(const PodConfig& config) {
  PodModel m;
  m.config_ = config;
  m.generation_ = trace::FindGenerationByName(config.generation);
  if (m.generation_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown TPU generation \"", config.generation,
                                                   "\" (use v4, v5e, v5p, v6e or v7x)"));
  }
  m.chips_ = config.chips > 0 ? config.chips : m.generation_->chips_per_host;
  if (absl::Status s = ValidateConfig(config, m.chips_); !s.ok()) return s;
  m.program_id_ = MixHash(config.pod_seed, 0x70726f67) | 1;
  m.module_name_ = "jit_train_step";
  m.ops_ = TrainingStep(*m.generation_);
  m.hosts_per_slice_ = config.hosts / config.slices;
  if (config.slices > 1) {
    // The gradients cross the slices after the backward pass, before the loss' all-reduce.
    auto at = std::find_if(m.ops_.begin(), m.ops_.end(),
                           [](const OpTemplate& op) { return op.name == "all-reduce.0"; });
    std::vector<OpTemplate> dcn = DcnOps(int64_t{config.hosts} * m.chips_, m.chips_per_slice());
    // The optimizer's update of the first gradient bucket runs while that bucket's transfer is
    // in flight (between its recv and its send-done), as XLA overlaps compute with DCN: the
    // slack XProf's megascale_stats measures. The second bucket has nothing to hide behind.
    auto update = std::find_if(m.ops_.begin(), m.ops_.end(),
                               [](const OpTemplate& op) { return op.name == "loop_fusion.opt"; });
    if (update != m.ops_.end()) {
      OpTemplate moved = std::move(*update);
      m.ops_.erase(update);
      dcn.insert(dcn.begin() + 2, std::move(moved));
    }
    at = std::find_if(m.ops_.begin(), m.ops_.end(),
                      [](const OpTemplate& op) { return op.name == "all-reduce.0"; });
    m.ops_.insert(at, dcn.begin(), dcn.end());
  }
  m.step_period_ns_ = config.step_period_ns > 0 ? config.step_period_ns : m.NominalStepPeriodNs();
  return m;
}

int64_t PodModel::NominalStepPeriodNs() const {
  // Nominal busy time of one step on a healthy chip, then headroom for noise, waiting on
  // stragglers and throttled chips, and the idle gap real input pipelines leave.
  double busy_ps = 0;
  for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
    if (ops_[i].dcn != DcnRole::kNone) continue;
    busy_ps += ComputeDurationPs(-1, -1, 0, i) + kLaunchGapPs;
  }
  // The DCN phase: per rendezvous the issue, the buffer leaving, the network and the copy.
  int64_t delay_ps = 0;
  if (config_.slices > 1) {
    const double rendezvous_ps = kDcnSendPs + kDcnBytes / kDcnChipBytesPerS * 1e12 + kDcnLatencyPs +
                                 kDcnCopyPs + 4 * kLaunchGapPs;
    busy_ps += kDcnRendezvous * rendezvous_ps;
    for (const DcnDelay& d : config_.dcn_delays) delay_ps = std::max(delay_ps, d.extra_ns * 1000);
  }
  double worst = 1;
  for (const Straggler& s : config_.stragglers) worst = std::max(worst, s.factor);
  for (const Throttle& t : config_.throttles) worst = std::max(worst, 1 / (1 - t.fraction));
  for (const SlowSlice& s : config_.slow_slices) worst = std::max(worst, s.factor);
  // A delayed link holds up its receivers once per rendezvous (and their sends of the next
  // one, a slice further).
  return static_cast<int64_t>(busy_ps / 1000 * 1.3 * worst * 1.1) +
         kDcnRendezvous * delay_ps / 1000 * 11 / 10;
}

double PodModel::StragglerFactor(int host, int chip, int64_t step) const {
  double f = 1;
  for (const Straggler& s : config_.stragglers) {
    if (s.host == host && s.chip == chip && s.from_ns <= step * step_period_ns_) f *= s.factor;
  }
  for (const SlowSlice& s : config_.slow_slices) {
    if (s.slice == SliceOf(host) && s.from_ns <= step * step_period_ns_) f *= s.factor;
  }
  return f;
}

bool PodModel::Issued(int64_t step) const {
  const int64_t start = step * step_period_ns_;
  for (const Stall& s : config_.stalls) {
    if (s.from_ns <= start && start < s.until_ns) return false;
  }
  for (const StepSkip& k : config_.skips) {
    if (k.from_ns > start) continue;
    const uint64_t h = MixHash(config_.pod_seed, 0x736b6970, static_cast<uint64_t>(step));
    if (static_cast<double>(h >> 11) * 0x1.0p-53 < k.fraction) return false;
  }
  return true;
}

double PodModel::ThrottleFraction(int host, int chip) const {
  double kept = 1;
  for (const Throttle& t : config_.throttles) {
    if (t.host == host && t.chip == chip) kept *= 1 - t.fraction;
  }
  return 1 - kept;
}

int64_t PodModel::ComputeDurationPs(int host, int chip, int64_t step, int op) const {
  const OpTemplate& t = ops_[op];
  double seconds;
  if (t.collective) {
    // Transfer time only; the wait for other chips is added by Step().
    seconds = static_cast<double>(t.bytes) / (kLinkGbps * 1e9) / t.efficiency;
  } else {
    double compute_s = static_cast<double>(t.flops) / (generation_->peak_tflops * 1e12);
    double memory_s = static_cast<double>(t.bytes) / (generation_->peak_hbm_gbps * 1e9);
    seconds = std::max(compute_s, memory_s) / t.efficiency;
  }
  double factor = 1;
  if (host >= 0) {  // host < 0 asks for the nominal time.
    factor =
        Noise(MixHash(config_.pod_seed, static_cast<uint64_t>(host), static_cast<uint64_t>(chip),
                      static_cast<uint64_t>(step), static_cast<uint64_t>(op)));
    // A throttled chip runs its kernels on fewer clocks; collectives wait on the links.
    if (!t.collective)
      factor *= StragglerFactor(host, chip, step) / (1 - ThrottleFraction(host, chip));
  }
  return std::max<int64_t>(1000, std::llround(seconds * 1e12 * factor));
}

std::vector<ChipStep> PodModel::Step(int64_t step) const { return Step(step, Schedule(step)); }

int64_t PodModel::DcnDestination(int64_t global_chip) const {
  const int64_t n = int64_t{config_.hosts} * chips_;
  return (global_chip + chips_per_slice()) % n;
}

int64_t PodModel::DcnSource(int64_t global_chip) const {
  const int64_t n = int64_t{config_.hosts} * chips_;
  return (global_chip - chips_per_slice() + n) % n;
}

int64_t PodModel::DcnDelayPs(int slice, int64_t step) const {
  int64_t extra = 0;
  for (const DcnDelay& d : config_.dcn_delays) {
    if (d.slice == slice && d.from_ns <= step * step_period_ns_) extra += d.extra_ns * 1000;
  }
  return extra;
}

// One rendezvous on one chip, ps after the step's start: its four ops up to the recv-done's
// start, and what its receiver needs of it.
struct PodModel::DcnRun {
  int64_t send_start = 0, send_ps = 0;
  int64_t recv_start = 0, recv_ps = 0;
  int64_t send_done_start = 0, send_done_ps = 0;
  int64_t recv_done_start = 0;
  int64_t copy_ps = 0;     // the recv-done's copy of the received buffer
  int64_t leave_ps = 0;    // when this chip's buffer has left it
  int64_t latency_ps = 0;  // the network's latency from this chip to its receiver
  // A compute kernel overlapped with the transfer, between the recv and the send-done (-1:
  // none), its start and duration; `ops` the rendezvous' ops in the step's op list (4, or 5
  // with it).
  int overlap_op = -1;
  int64_t overlap_start = 0, overlap_ps = 0;
  int ops = 4;

  // The recv-done's end: its copy, after the data arrived at `arrival_ps` if it was late.
  int64_t RecvDoneEnd(int64_t arrival_ps) const {
    return std::max(recv_done_start, arrival_ps) + copy_ps;
  }
};

PodModel::DcnRun PodModel::StartDcn(int host, int chip, int64_t step, int op, int64_t t) const {
  // Three draws per chip and rendezvous, from the send's, send-done's and recv-done's streams.
  const auto h = static_cast<uint64_t>(host), c = static_cast<uint64_t>(chip),
             s = static_cast<uint64_t>(step), o = static_cast<uint64_t>(op);
  const uint64_t issue = MixHash(config_.pod_seed, h, c, s, o);
  const uint64_t wire = MixHash(config_.pod_seed, h, c, s, o + 2);
  DcnRun d;
  d.send_start = t;
  d.send_ps = std::llround(kDcnSendPs * Jitter(issue, 0));
  d.recv_start = t + d.send_ps + kLaunchGapPs;
  d.recv_ps = std::llround(kDcnRecvPs * Jitter(issue, 1));
  d.copy_ps = std::llround(kDcnCopyPs * Jitter(issue, 2));
  const double serialization_ps =
      static_cast<double>(ops_[op].dcn_bytes) / kDcnChipBytesPerS * 1e12 * Noise(wire);
  d.leave_ps = t + d.send_ps + std::llround(serialization_ps);
  d.send_done_start = d.recv_start + d.recv_ps + kLaunchGapPs;
  if (ops_[op + 2].dcn == DcnRole::kNone) {
    d.overlap_op = op + 2;
    d.ops = 5;
    d.overlap_start = d.send_done_start;
    d.overlap_ps = ComputeDurationPs(host, chip, step, op + 2);
    d.send_done_start += d.overlap_ps + kLaunchGapPs;
  }
  d.send_done_ps = std::max(kDcnDoneMinPs, d.leave_ps - d.send_done_start);
  d.recv_done_start = d.send_done_start + d.send_done_ps + kLaunchGapPs;
  d.latency_ps = DcnLatencyPs(host, chip, step, op);
  return d;
}

int64_t PodModel::DcnLatencyPs(int host, int chip, int64_t step, int op) const {
  const uint64_t network =
      MixHash(config_.pod_seed, static_cast<uint64_t>(host), static_cast<uint64_t>(chip),
              static_cast<uint64_t>(step), static_cast<uint64_t>(op) + 3);
  return std::llround(kDcnLatencyPs * (0.85 + 0.3 * Uniform(network)));
}

int64_t PodModel::DcnTransitPs(int64_t step, int64_t global_chip, int rendezvous) const {
  if (config_.slices <= 1) return 0;
  for (int op = 0; op < static_cast<int>(ops_.size()); ++op) {
    if (ops_[op].dcn != DcnRole::kSend || ops_[op].rendezvous != rendezvous) continue;
    const int64_t src = DcnSource(global_chip);
    const int src_host = static_cast<int>(src / chips_);
    return DcnLatencyPs(src_host, static_cast<int>(src % chips_), step, op) +
           DcnDelayPs(SliceOf(src_host), step);
  }
  return 0;
}

StepSchedule PodModel::Schedule(int64_t step) const {
  const int n = config_.hosts * chips_;
  const int slices = config_.slices;
  const int64_t per_slice = chips_per_slice();
  StepSchedule out;
  for (const OpTemplate& op : ops_) out.collectives += op.collective ? 1 : 0;
  out.collective_ends.resize(static_cast<size_t>(slices) * out.collectives);
  if (slices > 1) out.dcn_arrivals.resize(static_cast<size_t>(n) * kDcnRendezvous);
  // Clocks of every chip in the pod (relative to the step start, ps): a collective needs the
  // slowest arrival of its slice, a receiver its source chip in the slice before.
  std::vector<int64_t> t(n, 0);
  std::vector<DcnRun> dcn;
  int k = 0;
  for (int op = 0; op < static_cast<int>(ops_.size()); ++op) {
    const OpTemplate& o = ops_[op];
    if (o.dcn == DcnRole::kSend) {
      dcn.resize(n);
      for (int i = 0; i < n; ++i) dcn[i] = StartDcn(i / chips_, i % chips_, step, op, t[i]);
      for (int i = 0; i < n; ++i) {
        const int64_t src = DcnSource(i);
        const DcnRun& from = dcn[src];
        const int64_t arrival = from.leave_ps + from.latency_ps +
                                DcnDelayPs(SliceOf(static_cast<int>(src / chips_)), step);
        out.dcn_arrivals[static_cast<size_t>(i) * kDcnRendezvous + o.rendezvous] = arrival;
        t[i] = dcn[i].RecvDoneEnd(arrival) + kLaunchGapPs;
      }
      op += dcn[0].ops - 1;  // the rendezvous' recv, overlapped kernel, send-done and recv-done
      continue;
    }
    if (!o.collective) {
      for (int i = 0; i < n; ++i)
        t[i] += ComputeDurationPs(i / chips_, i % chips_, step, op) + kLaunchGapPs;
      continue;
    }
    for (int s = 0; s < slices; ++s) {
      const auto begin = t.begin() + s * per_slice, end = begin + per_slice;
      const int64_t slowest = *std::max_element(begin, end);
      const int64_t e = slowest + CollectiveTransferPs(step, op, s);
      out.collective_ends[static_cast<size_t>(s) * out.collectives + k] = e;
      std::fill(begin, end, e + kLaunchGapPs);
    }
    ++k;
  }
  return out;
}

int64_t PodModel::CollectiveTransferPs(int64_t step, int op, int slice) const {
  // The transfer of one collective is one quantity per slice: drawn once, from the stream of
  // chip 0 of the slice's first host (host -1 would be the nominal time).
  return ComputeDurationPs(slice * hosts_per_slice_, 0, step, op);
}

std::vector<ChipStep> PodModel::Step(int64_t step, const StepSchedule& schedule) const {
  std::vector<ChipStep> out(chips_);
  const int me = config_.host_index;
  const int my_slice = slice();
  const bool issued = Issued(step);
  for (int c = 0; c < chips_; ++c) {
    ChipStep& cs = out[c];
    cs.step = step;
    cs.start_ns = step * step_period_ns_;
    if (!issued) continue;
    int64_t t = 0;
    int collective = 0;
    for (int op = 0; op < static_cast<int>(ops_.size()); ++op) {
      const OpTemplate& o = ops_[op];
      if (o.dcn == DcnRole::kSend) {
        const DcnRun d = StartDcn(me, c, step, op, t);
        const int64_t arrival =
            schedule
                .dcn_arrivals[static_cast<size_t>(GlobalChipId(c)) * kDcnRendezvous + o.rendezvous];
        const int64_t end = d.RecvDoneEnd(arrival);
        const int done = op + d.ops - 2;  // the send-done's index
        cs.runs.push_back({op, d.send_start, d.send_ps, 0});
        cs.runs.push_back({op + 1, d.recv_start, d.recv_ps, 0});
        if (d.overlap_op >= 0) cs.runs.push_back({d.overlap_op, d.overlap_start, d.overlap_ps, 0});
        cs.runs.push_back({done, d.send_done_start, d.send_done_ps, 0});
        cs.runs.push_back({done + 1, d.recv_done_start, end - d.recv_done_start, 0});
        cs.dcn.push_back({o.rendezvous, d.send_start, d.send_start + d.send_ps, d.leave_ps, arrival,
                          DcnTransitPs(step, GlobalChipId(c), o.rendezvous), end, d.overlap_ps,
                          o.dcn_bytes});
        t = end + kLaunchGapPs;
        op += d.ops - 1;
        continue;
      }
      if (!o.collective) {
        const int64_t d = ComputeDurationPs(me, c, step, op);
        cs.runs.push_back({op, t, d, 0});
        t += d + kLaunchGapPs;
        continue;
      }
      const int64_t end = schedule.CollectiveEnd(my_slice, collective++);
      // The id names one collective of one slice (slice 0's is the single-slice id).
      const uint64_t id = MixHash(config_.pod_seed, 0xc011, static_cast<uint64_t>(step),
                                  static_cast<uint64_t>(op), static_cast<uint64_t>(my_slice)) >>
                              1 |
                          1;
      cs.runs.push_back({op, t, end - t, id});
      t = end + kLaunchGapPs;
    }
    const OpRun& last = cs.runs.back();
    cs.busy_end_ps = last.start_ps + last.duration_ps;
  }
  return out;
}

int64_t PodModel::StepAt(int64_t true_ns) const {
  int64_t s = true_ns / step_period_ns_;
  if (true_ns < 0 && true_ns % step_period_ns_ != 0) --s;
  return s;
}

int64_t PodModel::HbmUsageBytes(int chip) const {
  double fraction = 0.55 + 0.3 * Uniform(MixHash(config_.pod_seed, 0x4b4d,
                                                 static_cast<uint64_t>(config_.host_index),
                                                 static_cast<uint64_t>(chip)));
  return static_cast<int64_t>(fraction * static_cast<double>(generation_->hbm_bytes));
}

}  // namespace podprof::sim
