#pragma once
/// \file
/// The runtime form of a policy, for tools and sweeps: the same stage values held in a
/// fixed-capacity array of tagged stages instead of a type list. Trivially copyable,
/// no heap. Backends visit it stage by stage, calling the very code that the
/// compile-time form calls, so both forms give the same plan.

#include <cstdint>
#include <type_traits>

#include "moe_routing/policies/builtin_stages.hpp"
#include "moe_routing/policies/pipeline.hpp"
#include "moe_routing/policies/refine.hpp"

namespace moe_routing {

namespace detail {

/// A union of the stage types, with a constructor per alternative (the stages have
/// default member initialisers, so the union needs constructors of its own).
template <class... Stages>
union stage_union;

template <class Last>
union stage_union<Last> {
  Last value;
  MOE_ROUTING_HOST_DEVICE constexpr stage_union() : value{} {}
  MOE_ROUTING_HOST_DEVICE constexpr stage_union(const Last& stage) : value(stage) {}
  template <class Stage>
  MOE_ROUTING_HOST_DEVICE constexpr const Stage& get() const noexcept {
    static_assert(std::is_same_v<Stage, Last>);
    return value;
  }
};

template <class First, class... Rest>
union stage_union<First, Rest...> {
  First value;
  stage_union<Rest...> rest;
  MOE_ROUTING_HOST_DEVICE constexpr stage_union() : value{} {}
  MOE_ROUTING_HOST_DEVICE constexpr stage_union(const First& stage) : value(stage) {}
  template <class Stage>
  requires(!std::is_same_v<Stage, First>) MOE_ROUTING_HOST_DEVICE constexpr stage_union(const Stage& stage)
      : rest(stage) {}
  template <class Stage>
  MOE_ROUTING_HOST_DEVICE constexpr const Stage& get() const noexcept {
    if constexpr (std::is_same_v<Stage, First>) {
      return value;
    } else {
      return rest.template get<Stage>();
    }
  }
};

template <class List>
struct tagged_stage;

/// One of the stages of a `stage_types` list, tagged with its position in the list.
template <class... Stages>
struct tagged_stage<stage_types<Stages...>> {
  using types = stage_types<Stages...>;
  std::uint8_t index = 0;
  stage_union<Stages...> storage{};

  constexpr tagged_stage() = default;
  template <class Stage>
  requires(types::template contains<Stage>) MOE_ROUTING_HOST_DEVICE constexpr tagged_stage(const Stage& stage)
      : index(static_cast<std::uint8_t>(types::template index_of<Stage>())), storage(stage) {}

  template <class Stage>
  MOE_ROUTING_HOST_DEVICE constexpr bool holds() const noexcept {
    return index == types::template index_of<Stage>();
  }
  /// The stage, which must be a `Stage` (`holds<Stage>()`).
  template <class Stage>
  MOE_ROUTING_HOST_DEVICE constexpr const Stage& get() const noexcept {
    return storage.template get<Stage>();
  }
  /// Calls `visitor` with the concrete stage value.
  template <class Visitor>
  MOE_ROUTING_HOST_DEVICE constexpr void visit(Visitor&& visitor) const {
    (void)((holds<Stages>() ? (visitor(get<Stages>()), true) : false) || ...);
  }
};

}  // namespace detail

/// One built-in set stage chosen at run time: a tagged union of `builtin_set_stages`.
using any_set_stage = detail::tagged_stage<builtin_set_stages>;

struct runtime_policy {
  static constexpr int max_set_stages = 8;

  any_set_stage set_stages[max_set_stages] = {};
  int set_stage_count = 0;
  refine assignment = {};
  int top_k = 0;  ///< the model's top-k hint for owned plans; 0 = the largest stage k

  /// Visits the set stages in order, then the assignment stage.
  template <class Visitor>
  MOE_ROUTING_HOST_DEVICE constexpr void for_each_stage(Visitor&& visit) const {
    for (int i = 0; i < set_stage_count; ++i) set_stages[i].visit(visit);
    visit(assignment);
  }
};

static_assert(std::is_trivially_copyable_v<any_set_stage>);
static_assert(std::is_trivially_copyable_v<runtime_policy>);

/// The runtime form of a compile-time pipeline of built-in stages.
template <class... Stages>
requires compiled_policy<pipeline<Stages...>>
constexpr runtime_policy to_runtime_policy(const pipeline<Stages...>& policy) {
  runtime_policy result;
  result.top_k = policy.top_k;
  policy.for_each_stage([&](const auto& stage) {
    using stage_type = std::remove_cvref_t<decltype(stage)>;
    if constexpr (std::is_same_v<stage_type, refine>) {
      result.assignment = stage;
    } else {
      result.set_stages[result.set_stage_count++] = any_set_stage(stage);
    }
  });
  return result;
}

}  // namespace moe_routing
