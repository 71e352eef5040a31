#pragma once
/// \file
/// Compile-time policies: stages composed with `|` into a `pipeline`, e.g.
/// `prune{.k0 = 4} | refine{.k = 8}`. A pipeline is routable when it holds at least
/// one set stage and ends with its only assignment stage; `|` refuses to extend a
/// pipeline past its assignment stage.

#include <type_traits>

#include "moe_routing/policies/stage_concepts.hpp"
#include "moe_routing/policies/stage_list.hpp"

namespace moe_routing {

template <routing_stage... Stages>
struct pipeline {
  stage_list<Stages...> stages;
  int top_k = 0;  ///< the model's top-k hint for owned plans; 0 = the largest stage k

  static constexpr int set_stage_count = (0 + ... + (set_stage<Stages> ? 1 : 0));
  static constexpr int assignment_stage_count = (0 + ... + (assignment_stage<Stages> ? 1 : 0));
  /// Only set stages so far: more stages may follow.
  static constexpr bool is_open = assignment_stage_count == 0;

  template <class Visitor>
  constexpr void for_each_stage(Visitor&& visit) const {
    stages.for_each(visit);
  }
};

namespace detail {
template <class Policy>
struct pipeline_shape {
  static constexpr bool routable = false;
};
template <class... Stages>
struct pipeline_shape<pipeline<Stages...>> {
  static constexpr bool last_is_assignment = [] {
    bool last = false;
    ((last = assignment_stage<Stages>), ...);
    return last;
  }();
  static constexpr bool routable = pipeline<Stages...>::set_stage_count >= 1 &&
                                   pipeline<Stages...>::assignment_stage_count == 1 && last_is_assignment;
};
}  // namespace detail

/// A pipeline that can be routed: >= 1 set stage, exactly one assignment stage, last.
template <class Policy>
concept compiled_policy = detail::pipeline_shape<std::remove_cvref_t<Policy>>::routable;

/// set | stage
template <set_stage Left, routing_stage Right>
constexpr pipeline<Left, Right> operator|(const Left& left, const Right& right) {
  return {{left, {right, {}}}};
}

/// open pipeline | stage
template <routing_stage... Left, routing_stage Right>
requires pipeline<Left...>::is_open constexpr pipeline<Left..., Right> operator|(const pipeline<Left...>& left,
                                                                                 const Right& right) {
  return {concat(left.stages, stage_list<Right>{right, {}}), left.top_k};
}

/// set | pipeline and open pipeline | pipeline: closures compose with closures.
template <set_stage Left, routing_stage... Right>
constexpr pipeline<Left, Right...> operator|(const Left& left, const pipeline<Right...>& right) {
  return {{left, right.stages}, right.top_k};
}
template <routing_stage... Left, routing_stage... Right>
requires pipeline<Left...>::is_open constexpr pipeline<Left..., Right...> operator|(const pipeline<Left...>& left,
                                                                                    const pipeline<Right...>& right) {
  return {concat(left.stages, right.stages), right.top_k != 0 ? right.top_k : left.top_k};
}

// Read this if your compile breaks here: an assignment stage (refine) must be the last
// stage of a policy, so nothing can follow it. Compose the set stages first.
template <assignment_stage Left, routing_stage Right>
void operator|(const Left&, const Right&) = delete;
template <routing_stage... Left, routing_stage Right>
requires(!pipeline<Left...>::is_open) void operator|(const pipeline<Left...>&, const Right&) = delete;

}  // namespace moe_routing
