#pragma once
/// \file
/// `coverage_greedy(add = m | size = M, k, gate)`: adds experts to S by the mass they add
/// to what tokens actually use. A token takes at most k experts, so an expert of S beyond
/// its best k inside S serves it nothing; greedy_mass counts that mass anyway. This stage
/// maximises instead
///
///   F(S) = sum over valid tokens i of the k largest gates g_ie among e in S and topk_i,
///
/// which is monotone and submodular (per token, a sum of the k largest weights of a set),
/// so the greedy choice, largest marginal gain F(S + e) - F(S) first (ties to the lower
/// index), is within (1 - 1/e) of the best S of its size. Only the stored top-k of each
/// token counts (gates outside it are 0 under the sparse gate; under the dense gate p
/// outside the top-k is not seen). With k equal to the model's top-k, a token never holds
/// more than k experts of its top-k, F is the plain column mass of S and the stage picks
/// what greedy_mass picks; it differs when tokens take fewer experts than the model's top-k
/// (`refine(k)` smaller than the plan's width).

#include <array>
#include <cstdint>
#include <limits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/expert_order.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct coverage_greedy {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::adds;
  static constexpr const char* name = "coverage_greedy";
  /// add and size hold it when the other target is chosen; no text or count can spell it.
  static constexpr int not_given = std::numeric_limits<int>::min();
  int add = not_given;   ///< m: add this many experts (set exactly one of add and size)
  int size = not_given;  ///< M: grow S to this many experts
  int k = 0;             ///< experts a token uses, as refine's k; 0 means the model's top-k
  column_mass gate = column_mass::sparse;

  static constexpr auto parameters() {
    using parameter = stage_parameter<coverage_greedy>;
    constexpr value_range count{0, std::numeric_limits<double>::infinity(), false, "must be at least 0"};
    return std::array{
        parameter{.name = "add",
                  .synonym = "m",
                  .qualified = "coverage_greedy.add",
                  .integer = &coverage_greedy::add,
                  .optional = true,
                  .range = count},
        parameter{.name = "size",
                  .qualified = "coverage_greedy.size",
                  .integer = &coverage_greedy::size,
                  .optional = true,
                  .range = count},
        parameter{.name = "k",
                  .qualified = "coverage_greedy.k",
                  .integer = &coverage_greedy::k,
                  .range = non_negative,
                  .counts_experts_per_token = true},
        parameter{.name = "gate",
                  .qualified = "coverage_greedy.gate",
                  .kind = parameter_kind::gate,
                  .gate = &coverage_greedy::gate},
    };
  }
  /// Exactly one target (the ranges are checked from `parameters()`).
  constexpr status validate() const noexcept {
    constexpr double no_value = std::numeric_limits<double>::quiet_NaN();
    const int chosen = (add != not_given ? 1 : 0) + (size != not_given ? 1 : 0);
    if (chosen == 0) return fail(errc::invalid_parameter, "coverage_greedy", no_value, "needs a target: add or size");
    if (chosen > 1) {
      return fail(errc::invalid_parameter, "coverage_greedy", no_value, "takes one target of add and size, not both");
    }
    return {};
  }
  /// Reads each token's stored top-k gates, never the column masses; dense gates are p
  /// itself, which needs the softmax denominator.
  constexpr scoring_needs needs() const noexcept { return {false, false, gate != column_mass::dense}; }
  /// On an empty S every token's top-1 has a positive sparse gate; dense p may be all zero.
  constexpr bool seeds_selection() const noexcept { return gate == column_mass::sparse && (add > 0 || size > 0); }

  MOE_ROUTING_HOST_DEVICE constexpr int effective_k(int top_k) const noexcept { return k == 0 ? top_k : k; }
  /// The experts to add to an S of `selected` experts.
  MOE_ROUTING_HOST_DEVICE constexpr int wanted(int selected) const noexcept {
    return add != not_given ? add : (size > selected ? size - selected : 0);
  }

  /// Tie-break shared by every backend: the larger gain first, then the lower index.
  MOE_ROUTING_HOST_DEVICE static constexpr bool better_gain(std::int64_t gain_a, int a, std::int64_t gain_b,
                                                            int b) noexcept {
    return heavier_expert(gain_a, a, gain_b, b);
  }

  /// One token's marginal gains: `visit(expert, gain)` for each expert of its top-k
  /// (`top`, `gates`, `top_k` long) outside S whose gain F_i(S + e) - F_i(S) is positive,
  /// in fixed point (exact, so every backend sums the same gains). With `uses` = k experts
  /// used: below k members of S the gain is the expert's own mass; otherwise what it
  /// adds over the k-th largest member's mass. O(top_k^2).
  template <class InSelection, class Visit>
  MOE_ROUTING_HOST_DEVICE static constexpr void token_gains(const std::int32_t* top, const float* gates, int top_k,
                                                            int uses, InSelection&& in_selection, Visit&& visit) {
    int members = 0;
    for (int j = 0; j < top_k; ++j) members += in_selection(top[j]) ? 1 : 0;
    std::int64_t floor = 0;  // the k-th largest member mass, which the new expert would push out
    if (members >= uses) {
      for (int a = 0; a < top_k; ++a) {
        if (!in_selection(top[a])) continue;
        const std::int64_t mass = to_fixed_mass(gates[a]);
        int above = 0, at_least = 0;
        for (int b = 0; b < top_k; ++b) {
          if (!in_selection(top[b])) continue;
          const std::int64_t other = to_fixed_mass(gates[b]);
          above += other > mass ? 1 : 0;
          at_least += other >= mass ? 1 : 0;
        }
        if (above < uses && at_least >= uses) {
          floor = mass;
          break;
        }
      }
    }
    for (int j = 0; j < top_k; ++j) {
      if (in_selection(top[j])) continue;
      const std::int64_t gain = to_fixed_mass(gates[j]) - floor;
      if (gain > 0) visit(top[j], gain);
    }
  }
};

static_assert(set_stage<coverage_greedy>);

}  // namespace moe_routing
