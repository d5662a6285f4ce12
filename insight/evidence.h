// When a count is evidence: the test behind naming a straggler.
//
// Some chip is always last at a collective, so "last most often" names a chip on every
// capture, noise or not: 16 chips with nothing wrong each arrive last about 1/16 of the time,
// and one of them always comes out on top. A chip is named only when it was last
// significantly more often than chance and the waiting it caused is a material share:
//
// - Chance: in an instance of m chips each is last with probability 1/m, so a chip's expected
//   count is the sum of 1/m over the instances it took part in (StragglerRow::expected_last).
//   Its count is tested against Binomial(instances, expected / instances), upper tail. The
//   true null (a sum of Bernoullis with different 1/m) has a variance no larger than that
//   binomial's, so the test errs on the side of naming nobody.
// - Significant: p below kStragglerAlpha divided by the number of chips tested (Bonferroni:
//   the chance that any chip of the pod passes on noise stays under kStragglerAlpha).
// - Material: its share of all the waiting the capture's collectives caused is at least
//   kMaterialRatio times its chance share (its expected_last over all chips', which add up to
//   the instances: the rows' times_last), or kMaterialExcess over it where that is less (a pod of
//   two chips, whose chance shares are 50%). Being last often by a hair is not a straggler:
//   the default demo's host-3 chip 3 was last in 525 of 3878 (chance 243, p 4e-60) by 1.9 us
//   on average, within the clocks' uncertainty, and caused 6.7% of the waiting against a
//   chance share of 6.3%.
#ifndef PODPROF_INSIGHT_EVIDENCE_H_
#define PODPROF_INSIGHT_EVIDENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trace/analysis_rows.h"

namespace podprof::insight {

inline constexpr double kStragglerAlpha = 1e-3;
inline constexpr double kMaterialRatio = 2;
inline constexpr double kMaterialExcess = 0.25;

// P(X >= k) for X ~ Binomial(n, p); 1 when k <= n * p (no evidence of excess, not computed).
double BinomialUpperTail(int64_t k, int64_t n, double p);

// Whether a chip last `times_last` of `instances` times, `expected_last` expected by chance,
// is significantly often last among `tested` chips; its p-value in `*p_value` when given.
bool SignificantlyLast(int64_t times_last, int64_t instances, double expected_last, size_t tested,
                       double* p_value = nullptr);

struct StragglerVerdict {
  bool named = false;
  size_t row = 0;                 // the named chip's index in the rows, when named
  std::vector<bool> significant;  // per row: significantly often last and material
  std::vector<double> p_values;   // per row; 1 when not computed
  double caused_share = 0;        // the named chip's share of all the waiting caused
  double chance_share = 0;        // and the share chance gives it
  bool judged = true;             // false when the rows lack expected_last (older stores)
  std::string text;               // one line: who and the evidence, or "no clear straggler"
};

// Judges `rows` (most waiting caused first, as reports keep them).
StragglerVerdict JudgeStragglers(const std::vector<trace::StragglerRow>& rows);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_EVIDENCE_H_
