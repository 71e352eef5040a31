#pragma once
/// \file
/// Compile-time policies: stages composed with `|` into a `pipeline`, e.g.
/// `prune{.k0 = 4} | refine{.k = 8}`. A pipeline is routable when it holds at least
/// one set stage and ends with its only assignment stage; `|` refuses to extend a
/// pipeline past its assignment stage.

#include <type_traits>

#include "moe_routing/policies/stage_concepts.hpp"
#include "moe_routing/policies/stage_diagnostics.hpp"
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

template <class Policy>
inline constexpr bool is_pipeline = false;
template <class... Stages>
inline constexpr bool is_pipeline<pipeline<Stages...>> = true;

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

/// What `|` composes: a stage or a pipeline.
template <class Operand>
concept stage_or_pipeline = routing_stage<Operand> || is_pipeline<Operand>;
/// A class met by `|` next to a stage that is not a stage itself: a mistake to explain.
template <class Operand>
concept mistaken_stage =
    std::is_class_v<Operand> && !stage_or_pipeline<Operand> && !std::is_same_v<Operand, rejected_policy>;

// Read this if your compile breaks here: one side of `|` is not a stage, and the
// static_assert in explain_not_a_stage (stage_diagnostics.hpp) above says why.
template <stage_or_pipeline Left, mistaken_stage Right>
constexpr rejected_policy operator|(const Left&, const Right&) {
  explain_not_a_stage<Right>();
  return {};
}
template <mistaken_stage Left, stage_or_pipeline Right>
constexpr rejected_policy operator|(const Left&, const Right&) {
  explain_not_a_stage<Left>();
  return {};
}
// After the sentence, the rest of the expression composes quietly.
template <class Right>
constexpr rejected_policy operator|(const rejected_policy&, const Right&) {
  return {};
}
template <class Left>
requires(!std::is_same_v<Left, rejected_policy>) constexpr rejected_policy operator|(const Left&,
                                                                                     const rejected_policy&) {
  return {};
}

}  // namespace moe_routing
