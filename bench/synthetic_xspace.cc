#include "bench/synthetic_xspace.h"

#include <cstdint>
#include <random>

#include "proto/xplane.pb.h"

namespace podprof::bench {

using tensorflow::profiler::XSpace;

// Long: one plane's lines, events and metadata built in the order the reader meets them.
std::string MakeSyntheticXSpace(int mb, int chips) {
  XSpace space;
  std::mt19937_64 rng(1);
  const int kKernels = 400;
  const int64_t target = int64_t{mb} << 20;
  // Device events are ~40 bytes on the wire, host events ~25: 75% of bytes on devices.
  const int64_t events_per_chip = target * 3 / 4 / 40 / chips;
  for (int c = 0; c < chips; ++c) {
    auto* plane = space.add_planes();
    plane->set_id(c + 1);
    plane->set_name("/device:TPU:" + std::to_string(c));
    const char* stat_names[] = {"device_offset_ps",
                                "device_duration_ps",
                                "all_reduce_unique_id",
                                "hlo_category",
                                "flops",
                                "bytes_accessed",
                                "program_id",
                                "device_type_string",
                                "peak_teraflops_per_second"};
    for (int i = 0; i < 9; ++i) {
      auto& sm = (*plane->mutable_stat_metadata())[i + 1];
      sm.set_id(i + 1);
      sm.set_name(stat_names[i]);
    }
    auto* dt = plane->add_stats();
    dt->set_metadata_id(8);
    dt->set_str_value("TPU v5");
    for (int k = 0; k < kKernels; ++k) {
      auto& em = (*plane->mutable_event_metadata())[k + 1];
      em.set_id(k + 1);
      em.set_name("%fusion." + std::to_string(k) + " = bf16[1024,1024] fusion(bf16[1024,1024] %p)");
      em.set_display_name("fusion." + std::to_string(k));
      auto* cat = em.add_stats();
      cat->set_metadata_id(4);
      cat->set_str_value(k % 10 == 0 ? "all-reduce" : "convolution fusion");
      auto* fl = em.add_stats();
      fl->set_metadata_id(5);
      fl->set_int64_value(1'000'000'000LL + k);
      auto* by = em.add_stats();
      by->set_metadata_id(6);
      by->set_int64_value(4'000'000LL + k);
    }
    auto* line = plane->add_lines();
    line->set_id(1);
    line->set_name("XLA Ops");
    line->set_timestamp_ns(1000);
    int64_t t = 0;
    for (int64_t e = 0; e < events_per_chip; ++e) {
      auto* ev = line->add_events();
      int k = static_cast<int>(rng() % kKernels);
      int64_t d = 1'000'000 + static_cast<int64_t>(rng() % 50'000'000);
      ev->set_metadata_id(k + 1);
      ev->set_offset_ps(t);
      ev->set_duration_ps(d);
      auto* s1 = ev->add_stats();
      s1->set_metadata_id(1);
      s1->set_uint64_value(static_cast<uint64_t>(t - 7000));
      auto* s2 = ev->add_stats();
      s2->set_metadata_id(2);
      s2->set_uint64_value(static_cast<uint64_t>(d - 3));
      if (k % 10 == 0) {
        auto* s3 = ev->add_stats();
        s3->set_metadata_id(3);
        s3->set_uint64_value(static_cast<uint64_t>(e));
      }
      t += d + 1000;
    }
  }
  auto* host = space.add_planes();
  host->set_name("/host:CPU");
  (*host->mutable_event_metadata())[1].set_name("PjitFunction(train_step)");
  const int64_t host_events = target / 4 / 25;
  for (int th = 0; th < 16; ++th) {
    auto* line = host->add_lines();
    line->set_id(th);
    line->set_name("python/" + std::to_string(th));
    for (int64_t e = 0; e < host_events / 16; ++e) {
      auto* ev = line->add_events();
      ev->set_metadata_id(1);
      ev->set_offset_ps(e * 1'000'000);
      ev->set_duration_ps(500'000 + static_cast<int64_t>(rng() % 100'000));
      auto* st = ev->add_stats();
      st->set_metadata_id(1);
      st->set_int64_value(static_cast<int64_t>(rng() % 1000));
    }
  }
  return space.SerializeAsString();
}

}  // namespace podprof::bench
