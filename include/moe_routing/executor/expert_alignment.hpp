#pragma once
/// \file
/// The engines' "align" step: the plan's (token, slot) pairs grouped by expert. Expert e's
/// pairs are `pairs[offsets[e] .. offsets[e+1])`, in token order; `pair_of[i * k + j]` is
/// where token i's slot j landed. A counting sort: O(n k + E), no allocation.

#include <cmath>
#include <cstdint>

#include "moe_routing/core/status.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing {

struct expert_alignment {
  std::int32_t* offsets = nullptr;     ///< [E + 1]
  std::int32_t* pair_token = nullptr;  ///< [n k] token of each grouped pair
  std::int32_t* pair_slot = nullptr;   ///< [n k] slot j of each grouped pair
  std::int32_t* pair_of = nullptr;     ///< [n k] grouped index of token i's slot j, -1 if unused
  int pairs = 0;                       ///< total assigned (token, expert) pairs
};

/// Groups the plan's pairs by expert. Checks every count against k, every id against E and
/// every weight for a finite value, before the executor writes any output.
inline status align_plan(const plan_view& plan, int experts, expert_alignment& out) noexcept {
  const int n = plan.tokens, k = plan.top_k;
  for (int e = 0; e <= experts; ++e) out.offsets[e] = 0;
  for (int i = 0; i < n; ++i) {
    const int count = plan.counts[i];
    if (count < 0 || count > k)
      return fail(errc::invalid_input, "plan.counts[i]", count, "must be in [0, k]", "k", k).at(i);
    for (int j = 0; j < count; ++j) {
      const std::int32_t e = plan.ids[static_cast<std::size_t>(i) * k + j];
      if (e < 0 || e >= experts) {
        return fail(errc::invalid_input, "plan.ids[i][j]", e, "must be an expert index below", "weights.experts",
                    experts)
            .at(i, j);
      }
      // A NaN or infinite weight would turn the token's whole output row into NaN or infinity.
      const float weight = plan.weights[static_cast<std::size_t>(i) * k + j];
      if (std::isnan(weight))
        return fail(errc::invalid_input, "plan.weights[i][j]", weight, "is NaN: must be finite").at(i, j);
      if (std::isinf(weight)) return fail(errc::invalid_input, "plan.weights[i][j]", weight, "must be finite").at(i, j);
      ++out.offsets[e + 1];
    }
  }
  for (int e = 0; e < experts; ++e) out.offsets[e + 1] += out.offsets[e];
  out.pairs = out.offsets[experts];
  // Fill in token order using a moving cursor per expert (offsets[e] advanced, then restored).
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < k; ++j) {
      const std::size_t slot = static_cast<std::size_t>(i) * k + j;
      if (j >= plan.counts[i]) {
        out.pair_of[slot] = -1;
        continue;
      }
      const std::int32_t e = plan.ids[slot];
      const std::int32_t at = out.offsets[e]++;
      out.pair_token[at] = i;
      out.pair_slot[at] = j;
      out.pair_of[slot] = at;
    }
  }
  for (int e = experts; e > 0; --e) out.offsets[e] = out.offsets[e - 1];
  out.offsets[0] = 0;
  return {};
}

}  // namespace moe_routing
