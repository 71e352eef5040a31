#pragma once
/// \file
/// The one list of the library's built-in set stages. The runtime form of a policy
/// (`any_set_stage`), the parser and the backends' stage tables are generated from it:
/// a new built-in set stage is added here, in its own header, and in one executor per
/// backend (docs/design.md, "Adding a built-in stage").

#include <cstddef>
#include <type_traits>

#include "moe_routing/policies/confidence_keep.hpp"
#include "moe_routing/policies/coverage_greedy.hpp"
#include "moe_routing/policies/ep_fill.hpp"
#include "moe_routing/policies/ep_level.hpp"
#include "moe_routing/policies/greedy_mass.hpp"
#include "moe_routing/policies/per_request.hpp"
#include "moe_routing/policies/prune.hpp"
#include "moe_routing/policies/prune_to_budget.hpp"
#include "moe_routing/policies/prune_to_latency.hpp"
#include "moe_routing/policies/topk_union.hpp"
#include "moe_routing/policies/vote_drop.hpp"

namespace moe_routing {

/// A list of stage types (types only; `stage_list` holds values).
template <class... Stages>
struct stage_types {
  static constexpr std::size_t size = sizeof...(Stages);

  /// The position of `Stage` in the list, or `size` when it is not there.
  template <class Stage>
  static constexpr std::size_t index_of() noexcept {
    std::size_t index = 0;
    const bool found = ((std::is_same_v<Stage, Stages> ? true : (++index, false)) || ...);
    return found ? index : size;
  }
  template <class Stage>
  static constexpr bool contains = index_of<Stage>() < size;
};

using builtin_set_stages = stage_types<topk_union, prune, greedy_mass, per_request, ep_fill, vote_drop, confidence_keep,
                                       ep_level, coverage_greedy, prune_to_budget, prune_to_latency>;

template <class Stage>
concept builtin_set_stage = builtin_set_stages::contains<Stage>;

}  // namespace moe_routing
