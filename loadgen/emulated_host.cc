#include "loadgen/emulated_host.h"

#include "absl/strings/str_cat.h"
#include "analysis/host_summary.h"
#include "podprof_version.h"

namespace podprof::loadgen {
namespace {

// Uniform in [-1, 1) from a hash.
double Symmetric(uint64_t h) { return static_cast<double>(h >> 11) / 4503599627370496.0 - 1; }

}  // namespace

absl::Status EmulatedHost::Begin(const std::string& id) {
  absl::MutexLock lock(&mu);
  if (!active_capture.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host ", name, " is busy with capture ", active_capture));
  }
  active_capture = id;
  return absl::OkStatus();
}

void EmulatedHost::End() {
  absl::MutexLock lock(&mu);
  active_capture.clear();
}

int64_t HostClockOffsetNs(uint64_t pod_seed, int index, int64_t max_offset_ns) {
  const double u = Symmetric(sim::MixHash(pod_seed, 0x0ff5e7, static_cast<uint64_t>(index)));
  return static_cast<int64_t>(u * static_cast<double>(max_offset_ns));
}

double HostClockDriftPpm(uint64_t pod_seed, int index, double max_drift_ppm) {
  return Symmetric(sim::MixHash(pod_seed, 0xd21f7, static_cast<uint64_t>(index))) * max_drift_ppm;
}

std::vector<std::unique_ptr<EmulatedHost>> MakeHosts(int first_host, int count, uint64_t pod_seed,
                                                     int64_t max_offset_ns, double max_drift_ppm,
                                                     Clock& truth) {
  std::vector<std::unique_ptr<EmulatedHost>> hosts;
  hosts.reserve(static_cast<size_t>(count));
  for (int i = first_host; i < first_host + count; ++i) {
    hosts.push_back(std::make_unique<EmulatedHost>(i, truth,
                                                   HostClockOffsetNs(pod_seed, i, max_offset_ns),
                                                   HostClockDriftPpm(pod_seed, i, max_drift_ppm)));
    hosts.back()->start_ns = hosts.back()->clock.NowNs();
  }
  return hosts;
}

podprof::v1::HostInfo DescribeHost(const EmulatedHost& host, const std::string& bind_address,
                                   const sim::PodModel& model) {
  podprof::v1::HostInfo info;
  info.set_host_name(host.name);
  info.set_agent_address(absl::StrCat(bind_address, ":", host.port));
  info.set_agent_version(absl::StrCat("podprof-loadgen ", kVersion));
  info.set_analysis_version(analysis::kAnalysisVersion);
  info.set_clock_probe_port(static_cast<uint32_t>(host.probe_port));
  (*info.mutable_labels())["emulated"] = "loadgen";
  if (model.slices() > 1) {
    // What a multi-slice workload's environment tells its agent (MEGASCALE_SLICE_ID,
    // TPU_WORKER_ID): the host's slice and its worker in it.
    info.set_slice(model.SliceOf(host.index));
    info.set_slice_worker(host.index % model.hosts_per_slice());
  }
  const trace::ChipGeneration& gen = model.generation();
  for (int c = 0; c < model.chips(); ++c) {
    podprof::v1::ChipInfo* chip = info.add_chips();
    chip->set_ordinal(c);
    chip->set_global_chip_id(host.index * model.chips() + c);
    chip->set_generation(gen.name);
    chip->set_device_type_string(gen.device_type);
    chip->set_peak_tflops(gen.peak_tflops);
    chip->set_peak_hbm_gbps(gen.peak_hbm_gbps);
    chip->set_hbm_bytes(static_cast<uint64_t>(gen.hbm_bytes));
  }
  return info;
}

}  // namespace podprof::loadgen
