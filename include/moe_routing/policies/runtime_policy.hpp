#pragma once
/// \file
/// The runtime form of a policy, for tools and sweeps: the same stage values held in a
/// fixed-capacity array of tagged stages instead of a type list. Trivially copyable,
/// no heap. Backends visit it stage by stage, calling the very code that the
/// compile-time form calls, so both forms give the same plan.

#include <cstdint>
#include <type_traits>

#include "moe_routing/policies/confidence_keep.hpp"
#include "moe_routing/policies/ep_fill.hpp"
#include "moe_routing/policies/greedy_mass.hpp"
#include "moe_routing/policies/per_request.hpp"
#include "moe_routing/policies/pipeline.hpp"
#include "moe_routing/policies/prune.hpp"
#include "moe_routing/policies/refine.hpp"
#include "moe_routing/policies/topk_union.hpp"
#include "moe_routing/policies/vote_drop.hpp"

namespace moe_routing {

enum class stage_kind : std::uint8_t {
  topk_union,
  prune,
  greedy_mass,
  per_request,
  ep_fill,
  vote_drop,
  confidence_keep,
};

/// One built-in set stage chosen at run time. A struct of all alternatives rather
/// than a union: the stages have default member initialisers, and at ~80 bytes the
/// waste is irrelevant next to a routing call.
struct any_set_stage {
  stage_kind kind = stage_kind::topk_union;
  moe_routing::topk_union topk_union_stage{};
  moe_routing::prune prune_stage{};
  moe_routing::greedy_mass greedy_mass_stage{};
  moe_routing::per_request per_request_stage{};
  moe_routing::ep_fill ep_fill_stage{};
  moe_routing::vote_drop vote_drop_stage{};
  moe_routing::confidence_keep confidence_keep_stage{};

  /// Calls `visit` with the concrete stage value.
  template <class Visitor>
  constexpr void visit(Visitor&& visitor) const {
    switch (kind) {
      case stage_kind::topk_union: visitor(topk_union_stage); break;
      case stage_kind::prune: visitor(prune_stage); break;
      case stage_kind::greedy_mass: visitor(greedy_mass_stage); break;
      case stage_kind::per_request: visitor(per_request_stage); break;
      case stage_kind::ep_fill: visitor(ep_fill_stage); break;
      case stage_kind::vote_drop: visitor(vote_drop_stage); break;
      case stage_kind::confidence_keep: visitor(confidence_keep_stage); break;
    }
  }
};

constexpr any_set_stage make_any_stage(const topk_union& s) { any_set_stage a; a.kind = stage_kind::topk_union; a.topk_union_stage = s; return a; }
constexpr any_set_stage make_any_stage(const prune& s) { any_set_stage a; a.kind = stage_kind::prune; a.prune_stage = s; return a; }
constexpr any_set_stage make_any_stage(const greedy_mass& s) { any_set_stage a; a.kind = stage_kind::greedy_mass; a.greedy_mass_stage = s; return a; }
constexpr any_set_stage make_any_stage(const per_request& s) { any_set_stage a; a.kind = stage_kind::per_request; a.per_request_stage = s; return a; }
constexpr any_set_stage make_any_stage(const ep_fill& s) { any_set_stage a; a.kind = stage_kind::ep_fill; a.ep_fill_stage = s; return a; }
constexpr any_set_stage make_any_stage(const vote_drop& s) { any_set_stage a; a.kind = stage_kind::vote_drop; a.vote_drop_stage = s; return a; }
constexpr any_set_stage make_any_stage(const confidence_keep& s) { any_set_stage a; a.kind = stage_kind::confidence_keep; a.confidence_keep_stage = s; return a; }

struct runtime_policy {
  static constexpr int max_set_stages = 8;

  any_set_stage set_stages[max_set_stages] = {};
  int set_stage_count = 0;
  refine assignment = {};
  int top_k = 0;  ///< the model's top-k hint for owned plans; 0 = the largest stage k

  /// Visits the set stages in order, then the assignment stage.
  template <class Visitor>
  constexpr void for_each_stage(Visitor&& visit) const {
    for (int i = 0; i < set_stage_count; ++i) set_stages[i].visit(visit);
    visit(assignment);
  }
};

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
      result.set_stages[result.set_stage_count++] = make_any_stage(stage);
    }
  });
  return result;
}

}  // namespace moe_routing
