#include "insight/evidence.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace podprof::insight {

double BinomialUpperTail(int64_t k, int64_t n, double p) {
  if (k <= 0) return 1;
  if (k > n || p <= 0) return 0;
  if (p >= 1 || static_cast<double>(k) <= static_cast<double>(n) * p) return 1;
  // Terms fall from k on (k is past the mode), so summing until they stop mattering is exact
  // to double precision; in logs, since C(n, k) p^k overflows for pods' counts.
  const double log_p = std::log(p), log_q = std::log1p(-p);
  const double log_n1 = std::lgamma(static_cast<double>(n) + 1);
  auto log_term = [&](int64_t j) {
    const double dj = static_cast<double>(j), dn = static_cast<double>(n);
    return log_n1 - std::lgamma(dj + 1) - std::lgamma(dn - dj + 1) + dj * log_p + (dn - dj) * log_q;
  };
  const double first = log_term(k);
  double sum = 0;  // of exp(term - first)
  for (int64_t j = k; j <= n; ++j) {
    const double rel = std::exp(log_term(j) - first);
    sum += rel;
    if (rel < sum * 1e-17) break;
  }
  return std::min(1.0, std::exp(first) * sum);
}

bool SignificantlyLast(int64_t times_last, int64_t instances, double expected_last, size_t tested,
                       double* p_value) {
  double p = 1;
  if (instances > 0 && expected_last >= 0) {
    p = BinomialUpperTail(times_last, instances, expected_last / static_cast<double>(instances));
  }
  if (p_value != nullptr) *p_value = p;
  return p < kStragglerAlpha / static_cast<double>(std::max<size_t>(tested, 1));
}

namespace {

// `share` of the waiting against `chance`'s.
std::string Evidence(const trace::StragglerRow& r, double p, double share, double chance) {
  return absl::StrFormat(
      "last in %d of %d collectives where chance gives %.0f (p %s), causing %.1f%% of the "
      "waiting where chance gives %.1f%%",
      r.times_last, r.instances, r.expected_last,
      p < 1e-300 ? std::string("< 1e-300") : absl::StrFormat("= %.1e", p), 100 * share,
      100 * chance);
}

}  // namespace

StragglerVerdict JudgeStragglers(const std::vector<trace::StragglerRow>& rows) {
  StragglerVerdict v;
  v.significant.assign(rows.size(), false);
  v.p_values.assign(rows.size(), 1.0);
  if (rows.empty()) {
    v.text = "no collective joined chips that waited for each other";
    return v;
  }
  // Each instance has one last chip and each chip ever last a row, so the rows' times last add
  // up to the instances, which is what every chip's chance (not only these rows') adds up to.
  double caused = 0, expected = 0;
  for (const trace::StragglerRow& r : rows) {
    caused += static_cast<double>(r.caused_ps);
    expected += static_cast<double>(r.times_last);
    if (r.expected_last < 0) v.judged = false;
  }
  if (!v.judged) {
    v.text = "not judged: this capture was stored before podprof kept the chance counts";
    return v;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const trace::StragglerRow& r = rows[i];
    const double share = caused > 0 ? static_cast<double>(r.caused_ps) / caused : 0;
    const double chance = expected > 0 ? r.expected_last / expected : 1;
    v.significant[i] = SignificantlyLast(r.times_last, r.instances, r.expected_last, rows.size(),
                                         &v.p_values[i]) &&
                       share >= std::min(kMaterialRatio * chance, chance + kMaterialExcess);
    if (v.significant[i] && !v.named) {
      v.named = true;
      v.row = i;
      v.caused_share = share;
      v.chance_share = chance;
    }
  }
  if (v.named) {
    const trace::StragglerRow& r = rows[v.row];
    v.text = absl::StrCat(r.host, " chip ", r.chip_ordinal, " is a straggler: ",
                          Evidence(r, v.p_values[v.row], v.caused_share, v.chance_share));
    const auto others = std::count(v.significant.begin(), v.significant.end(), true) - 1;
    if (others > 0) {
      absl::StrAppend(&v.text, "; ", others, others == 1 ? " more chip is" : " more chips are",
                      " one too");
    }
    return v;
  }
  // The most telling row: the one least likely by chance, else the one that caused most.
  const size_t top = static_cast<size_t>(std::min_element(v.p_values.begin(), v.p_values.end()) -
                                         v.p_values.begin());
  const bool often = v.p_values[top] < kStragglerAlpha / static_cast<double>(rows.size());
  const trace::StragglerRow& shown = rows[often ? top : 0];
  v.text = absl::StrCat(
      "no clear straggler: ",
      often ? "the chip last most often beyond chance was late by too little to matter ("
            : "the chips were last about as often as chance gives (the most waiting came from ",
      shown.host, " chip ", shown.chip_ordinal, ", ",
      Evidence(shown, v.p_values[often ? top : 0],
               caused > 0 ? static_cast<double>(shown.caused_ps) / caused : 0,
               expected > 0 ? shown.expected_last / expected : 0),
      ")");
  return v;
}

}  // namespace podprof::insight
