#pragma once
/// \file
/// `per_request(k0, m_r)`: XShare algorithm 3 for speculative decoding. Each request
/// keeps its tokens' top-k0 (guaranteed) plus its own m_r best experts by the
/// request's column mass.

#include <array>

#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct per_request {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::adds;
  static constexpr const char* name = "per_request";
  static constexpr const char* guarantee_parameter = "per_request.k0";
  int k0 = 0;   ///< guaranteed experts per token, 1..k
  int m_r = 0;  ///< extra experts per request, >= 0
  column_mass gate = column_mass::sparse;

  static constexpr auto parameters() {
    using parameter = stage_parameter<per_request>;
    return std::array{
        parameter{.name = "k0",
                  .qualified = "per_request.k0",
                  .integer = &per_request::k0,
                  .required = true,
                  .range = at_least_one,
                  .counts_experts_per_token = true},
        parameter{.name = "m_r", .qualified = "per_request.m_r", .integer = &per_request::m_r, .range = non_negative},
        parameter{
            .name = "gate", .qualified = "per_request.gate", .kind = parameter_kind::gate, .gate = &per_request::gate},
    };
  }
  /// Sums its own per-request masses from the top-k gates (dense ones from full rows).
  constexpr scoring_needs needs() const noexcept { return needs_of_gate(gate, false); }
  constexpr int guaranteed_depth() const noexcept { return k0; }
};

static_assert(set_stage<per_request>);

}  // namespace moe_routing
