#pragma once
/// \file
/// `per_request(k0, m_r)`: XShare algorithm 3 for speculative decoding. Each request
/// keeps its tokens' top-k0 (guaranteed) plus its own m_r best experts by the
/// request's column mass.

#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

struct per_request {
  static constexpr stage_role role = stage_role::set;
  static constexpr const char* name = "per_request";
  int k0 = 0;   ///< guaranteed experts per token, 1..k
  int m_r = 0;  ///< extra experts per request, >= 0
  column_mass gate = column_mass::sparse;

  constexpr status validate() const noexcept {
    if (k0 < 1) return fail(errc::invalid_parameter, "per_request.k0", k0, "must be at least 1");
    if (m_r < 0) return fail(errc::invalid_parameter, "per_request.m_r", m_r, "must not be negative");
    return {};
  }
  constexpr status bind(const binding_shape& shape) const noexcept {
    return check_at_most_top_k("per_request.k0", k0, shape);
  }
  constexpr int guaranteed_depth() const noexcept { return k0; }
};

static_assert(set_stage<per_request>);

}  // namespace moe_routing
