#include "metrics/registry.h"

#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace podprof::metrics {
namespace {

TEST(RegistryTest, RendersTheTextFormat) {
  Registry r;
  r.Declare("podprof_captures_total", Registry::Type::kCounter, "Captures by final state.",
            {"state"});
  r.Declare("podprof_store_bytes", Registry::Type::kGauge, "Bytes of the database in use.");
  r.Declare("podprof_rpc_duration_seconds", Registry::Type::kHistogram, "RPC latency.", {"method"},
            {0.001, 0.01});
  r.Counter("podprof_captures_total", {"complete"})->Add(2);
  r.Counter("podprof_captures_total", {"fail\"ed\\"})->Add(1);
  r.AddCollector([](Sample& s) { s.Value("podprof_store_bytes", {}, 4096); });
  Histogram* h = r.Histo("podprof_rpc_duration_seconds", {"ListCaptures"});
  h->Observe(0.0005);
  h->Observe(0.005);
  h->Observe(2);
  EXPECT_EQ(r.Render(),
            "# HELP podprof_captures_total Captures by final state.\n"
            "# TYPE podprof_captures_total counter\n"
            "podprof_captures_total{state=\"complete\"} 2\n"
            "podprof_captures_total{state=\"fail\\\"ed\\\\\"} 1\n"
            "# HELP podprof_rpc_duration_seconds RPC latency.\n"
            "# TYPE podprof_rpc_duration_seconds histogram\n"
            "podprof_rpc_duration_seconds_bucket{method=\"ListCaptures\",le=\"0.001\"} 1\n"
            "podprof_rpc_duration_seconds_bucket{method=\"ListCaptures\",le=\"0.01\"} 2\n"
            "podprof_rpc_duration_seconds_bucket{method=\"ListCaptures\",le=\"+Inf\"} 3\n"
            "podprof_rpc_duration_seconds_sum{method=\"ListCaptures\"} 2.0055000000000001\n"
            "podprof_rpc_duration_seconds_count{method=\"ListCaptures\"} 3\n"
            "# HELP podprof_store_bytes Bytes of the database in use.\n"
            "# TYPE podprof_store_bytes gauge\n"
            "podprof_store_bytes 4096\n");
}

TEST(RegistryTest, ConcurrentUpdatesAllCount) {
  Registry r;
  r.Declare("podprof_x_total", Registry::Type::kCounter, "x");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) r.Counter("podprof_x_total")->Add(0.5);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(absl::StrContains(r.Render(), "podprof_x_total 20000\n"));
}

}  // namespace
}  // namespace podprof::metrics
