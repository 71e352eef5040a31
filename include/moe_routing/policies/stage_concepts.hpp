#pragma once
/// \file
/// What makes a type a routing stage (SPEC section 3), and the shape a policy is
/// bound to. A stage is a small trivially copyable value: its runtime parameters plus
/// a static `role`. Optional static traits: `decode_only` (routes like vanilla top-k in
/// prefill), and the member functions `validate()` and `bind(shape)`.

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/status.hpp"

namespace moe_routing {

enum class stage_role : std::uint8_t {
  set,         ///< builds the selected expert set S
  assignment,  ///< gives each token its experts A_i from S; must come last
};

/// How the assignment stage turns the p of a token's experts into weights (SPEC section 3).
enum class weighting : std::uint8_t {
  renormalize,  ///< w = p / sum of p over A_i (norm_topk_prob)
  raw,          ///< w = p
};

/// What a set stage does to S. The policy checks read it: a stage that replaces S would
/// drop the experts an earlier stage guaranteed.
enum class set_effect : std::uint8_t {
  adds,      ///< only adds experts (and may guarantee some)
  removes,   ///< only removes experts that were not guaranteed
  replaces,  ///< builds S anew
};

/// Shape facts a policy is checked against when it is first bound to a batch.
struct binding_shape {
  int experts = 0;  ///< E
  int top_k = 0;    ///< the model's top-k: the plan's row width
  bool has_placement = false;
  bool has_group_limit = false;  ///< the batch limits each token to some expert groups
};

/// The shape check shared by every stage parameter that counts experts per token.
constexpr status check_at_most_top_k(const char* parameter, int value, const binding_shape& shape) noexcept {
  if (value > shape.top_k) {
    return fail(errc::invalid_parameter, parameter, value, "must be at most the model's", "top_k", shape.top_k);
  }
  return {};
}

/// The stage declares `static constexpr stage_role role` (a constant, not a data member).
template <class Stage>
concept declares_stage_role = requires {
  { &Stage::role } -> std::same_as<const stage_role*>;
};

template <class Stage>
concept set_stage = std::is_trivially_copyable_v<Stage> && declares_stage_role<Stage> &&
    (Stage::role == stage_role::set);

/// Whether the backends can run `Stage` as a policy's assignment stage: only the library's
/// own (refine specializes it). A stage written outside the library builds S.
template <class Stage>
inline constexpr bool is_library_assignment_stage = false;

template <class Stage>
concept assignment_stage = std::is_trivially_copyable_v<Stage> && declares_stage_role<Stage> &&
                           (Stage::role == stage_role::assignment) &&
                           is_library_assignment_stage<Stage>;

template <class Stage>
concept routing_stage = set_stage<Stage> || assignment_stage<Stage>;

/// True when the stage declares itself decode-only.
template <class Stage>
constexpr bool is_decode_only() noexcept {
  if constexpr (requires { Stage::decode_only; }) {
    return Stage::decode_only;
  } else {
    return false;
  }
}

/// What the stage does to S; a user stage that does not say is taken to only add.
template <class Stage>
constexpr set_effect effect_on_selection() noexcept {
  if constexpr (requires {
                  { Stage::effect } -> std::convertible_to<set_effect>;
                }) {
    return Stage::effect;
  } else {
    return set_effect::adds;
  }
}

/// Leading ranks of every token that the stage guarantees (prune, per_request), else 0.
template <class Stage>
constexpr int guaranteed_depth(const Stage& stage) noexcept {
  if constexpr (requires {
                  { stage.guaranteed_depth() } -> std::convertible_to<int>;
                }) {
    return stage.guaranteed_depth();
  } else {
    return 0;
  }
}

/// Whether the stage, run on an empty S with at least one valid token, always leaves
/// S non-empty. The first set stage of a policy must (SPEC section 3).
template <class Stage>
constexpr bool seeds_selection(const Stage& stage) noexcept {
  if constexpr (requires {
                  { stage.seeds_selection() } -> std::convertible_to<bool>;
                }) {
    return stage.seeds_selection();
  } else {
    return true;  // a user stage is trusted; route reports an empty S at run time
  }
}

}  // namespace moe_routing
