// Metrics in Prometheus's text exposition format (version 0.0.4), for both daemons' /metrics.
//
// A Registry holds families (a name, help text, a type and the label names) of counters,
// gauges and histograms, each series keyed by its label values; updates are lock-free after a
// series' first use. Values a daemon already keeps elsewhere (the store's size, each agent's
// clock offset) are read at scrape time by collectors instead of being copied on every change.
// Names follow Prometheus's conventions: `podprof_` prefix, base units (`_seconds`, `_bytes`),
// `_total` on counters. Thread-safe.
#ifndef PODPROF_METRICS_REGISTRY_H_
#define PODPROF_METRICS_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace podprof::metrics {

using Labels = std::vector<std::string>;  // values, in the family's label order

// A double updated atomically (compare-and-swap on its bits).
class AtomicDouble {
 public:
  void Add(double v);
  void Set(double v) { bits_.store(Bits(v), std::memory_order_relaxed); }
  double Get() const { return Value(bits_.load(std::memory_order_relaxed)); }

 private:
  static uint64_t Bits(double v);
  static double Value(uint64_t bits);
  std::atomic<uint64_t> bits_{0};
};

class Histogram {
 public:
  explicit Histogram(const std::vector<double>* bounds);
  void Observe(double v);

 private:
  friend class Registry;
  const std::vector<double>* bounds_;                 // upper bounds, increasing; +Inf implied
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // not cumulative
  AtomicDouble sum_;
  std::atomic<uint64_t> count_{0};
};

// Where collectors write the values they read at scrape time.
class Sample {
 public:
  // A gauge or counter value of family `name` (declared with Registry::Declare).
  virtual void Value(const std::string& name, const Labels& labels, double value) = 0;
  virtual ~Sample() = default;
};

class Registry {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Declares a family; declaring it again with the same shape is harmless (the first stays).
  void Declare(const std::string& name, Type type, const std::string& help,
               std::vector<std::string> label_names = {}, std::vector<double> bucket_bounds = {});
  // The series of a declared family with these label values, created on first use. The
  // pointers stay valid as long as the registry.
  AtomicDouble* Counter(const std::string& name, const Labels& labels = {});
  AtomicDouble* Gauge(const std::string& name, const Labels& labels = {});
  Histogram* Histo(const std::string& name, const Labels& labels = {});
  // Runs at every scrape, before rendering; values it gives replace the family's stored ones.
  void AddCollector(std::function<void(Sample&)> collector);

  // The text exposition of every family, sorted by name.
  std::string Render();

  // Seconds buckets for latencies from 100 us to 60 s.
  static std::vector<double> LatencyBuckets();

 private:
  struct Family {
    Type type;
    std::string help;
    std::vector<std::string> label_names;
    std::vector<double> bounds;
    std::map<Labels, std::unique_ptr<AtomicDouble>> values;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family* Find(const std::string& name, Type type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(Sample&)>> collectors_ ABSL_GUARDED_BY(mu_);
};

// `s` escaped as a label value (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& s);

}  // namespace podprof::metrics

#endif  // PODPROF_METRICS_REGISTRY_H_
