#include "metrics/registry.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace podprof::metrics {
namespace {

// A number as Prometheus reads it: integers without a fraction, +Inf/-Inf/NaN by name.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.17g", v);
}

std::string LabelSet(const std::vector<std::string>& names, const Labels& values,
                     const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : ",", names[i], "=\"", EscapeLabelValue(values[i]),
                    "\"");
  }
  if (!extra.empty()) absl::StrAppend(&out, out.empty() ? "" : ",", extra);
  return out.empty() ? "" : absl::StrCat("{", out, "}");
}

const char* TypeName(Registry::Type t) {
  switch (t) {
    case Registry::Type::kCounter:
      return "counter";
    case Registry::Type::kGauge:
      return "gauge";
    case Registry::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// HELP text escapes backslash and newline.
std::string EscapeHelp(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

uint64_t AtomicDouble::Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

double AtomicDouble::Value(uint64_t bits) {
  double v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

void AtomicDouble::Add(double v) {
  uint64_t old = bits_.load(std::memory_order_relaxed);
  while (!bits_.compare_exchange_weak(old, Bits(Value(old) + v), std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds->size(); ++i) buckets_[i] = 0;
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_->size() && v > (*bounds_)[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.Add(v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::string EscapeLabelValue(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<double> Registry::LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
}

void Registry::Declare(const std::string& name, Type type, const std::string& help,
                       std::vector<std::string> label_names, std::vector<double> bucket_bounds) {
  absl::MutexLock lock(&mu_);
  if (families_.count(name) > 0) return;
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  f.label_names = std::move(label_names);
  f.bounds = std::move(bucket_bounds);
}

Registry::Family* Registry::Find(const std::string& name, Type type) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    // An undeclared family is a programming error; keep the daemon up and show it as such.
    Family& f = families_[name];
    f.type = type;
    f.help = "undeclared";
    return &f;
  }
  return &it->second;
}

AtomicDouble* Registry::Counter(const std::string& name, const Labels& labels) {
  absl::MutexLock lock(&mu_);
  auto& slot = Find(name, Type::kCounter)->values[labels];
  if (!slot) slot = std::make_unique<AtomicDouble>();
  return slot.get();
}

AtomicDouble* Registry::Gauge(const std::string& name, const Labels& labels) {
  absl::MutexLock lock(&mu_);
  auto& slot = Find(name, Type::kGauge)->values[labels];
  if (!slot) slot = std::make_unique<AtomicDouble>();
  return slot.get();
}

Histogram* Registry::Histo(const std::string& name, const Labels& labels) {
  absl::MutexLock lock(&mu_);
  Family* f = Find(name, Type::kHistogram);
  auto& slot = f->histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(&f->bounds);
  return slot.get();
}

void Registry::AddCollector(std::function<void(Sample&)> collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string Registry::Render() {
  // Collected values are kept apart from the registry's own, then written over them.
  struct Collected : Sample {
    std::map<std::string, std::map<Labels, double>> values;
    void Value(const std::string& name, const Labels& labels, double value) override {
      values[name][labels] = value;
    }
  } collected;
  std::vector<std::function<void(Sample&)>> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
  }
  for (const auto& c : collectors) c(collected);
  absl::MutexLock lock(&mu_);
  std::string out;
  for (auto& [name, f] : families_) {
    absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(f.help), "\n# TYPE ", name, " ",
                    TypeName(f.type), "\n");
    if (f.type == Type::kHistogram) {
      for (const auto& [labels, h] : f.histograms) {
        uint64_t cumulative = 0;
        for (size_t i = 0; i <= f.bounds.size(); ++i) {
          cumulative += h->buckets_[i].load(std::memory_order_relaxed);
          const std::string le =
              absl::StrCat("le=\"", i < f.bounds.size() ? Number(f.bounds[i]) : "+Inf", "\"");
          absl::StrAppend(&out, name, "_bucket", LabelSet(f.label_names, labels, le), " ",
                          cumulative, "\n");
        }
        absl::StrAppend(&out, name, "_sum", LabelSet(f.label_names, labels), " ",
                        Number(h->sum_.Get()), "\n", name, "_count",
                        LabelSet(f.label_names, labels), " ", h->count_.load(), "\n");
      }
      continue;
    }
    std::map<Labels, double> values;
    for (const auto& [labels, v] : f.values) values[labels] = v->Get();
    auto it = collected.values.find(name);
    if (it != collected.values.end()) {
      for (const auto& [labels, v] : it->second) values[labels] = v;
    }
    for (const auto& [labels, v] : values) {
      absl::StrAppend(&out, name, LabelSet(f.label_names, labels), " ", Number(v), "\n");
    }
  }
  return out;
}

}  // namespace podprof::metrics
