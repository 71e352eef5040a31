#pragma once
/// \file
/// `topk_union(k)`: vanilla routing's set, the union of every token's top-k.

#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

struct topk_union {
  static constexpr stage_role role = stage_role::set;
  static constexpr const char* name = "topk_union";
  int k = 0;  ///< 0 means the model's top-k

  constexpr status validate() const noexcept {
    if (k < 0) return fail(errc::invalid_parameter, "topk_union.k", k, "must not be negative");
    return {};
  }
  constexpr status bind(const binding_shape& shape) const noexcept {
    return check_at_most_top_k("topk_union.k", k, shape);
  }
  constexpr int effective_k(int top_k) const noexcept { return k == 0 ? top_k : k; }
};

static_assert(set_stage<topk_union>);

}  // namespace moe_routing
