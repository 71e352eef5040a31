#pragma once
/// \file
/// What a set stage may read and change, on every backend: the concept a backend's
/// stage context satisfies and a stage's `apply(context)` is written against. The CPU's
/// `cpu::stage_context` and the CUDA backend's contexts (one for its cooperative
/// built-in stages, one for a user stage run by a single thread) all satisfy it, so a
/// user-written set stage that uses only these members runs on both.
///
/// - shape: `tokens()`, `experts()`, `top_k()` (the plan's width), `is_valid(token)`;
/// - each valid token's top-k in rank order: `top_experts(token)`, `top_probabilities(token)`,
///   `top_gates(token)` (sparse gates), `stats(token)` (`row_stats`);
/// - batch-wide: the column masses `mass(gate)` (fixed point, `fixed_mass.hpp`) and the
///   votes `votes()`; requests `requests()`, `request_begin(r)`, `request_end(r)`; devices
///   `devices()`, `device_of(expert)` (0 devices without a placement);
/// - the selection: `selected` (S, a `selected_set` with `insert`, `erase`, `contains` and
///   `size`, whose `erase`, `clear` and assignment never remove a guaranteed expert) and
///   `guaranteed` (read-only); `guarantee(token, ranks)` adds a token's best ranks to both;
/// - scratch: `scratch_experts()` and `scratch_counts()`, room for `experts()` int32 each,
///   free for the stage to use and not kept after it.

#include <concepts>
#include <cstdint>

#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/score_row.hpp"

namespace moe_routing {

template <class Context>
concept set_stage_context = requires(Context& context, const Context& view, int token, int expert, column_mass gate) {
  { view.tokens() } -> std::convertible_to<int>;
  { view.experts() } -> std::convertible_to<int>;
  { view.top_k() } -> std::convertible_to<int>;
  { view.is_valid(token) } -> std::convertible_to<bool>;
  { view.top_experts(token)[0] } -> std::convertible_to<int>;
  { view.top_probabilities(token)[0] } -> std::convertible_to<float>;
  { view.top_gates(token)[0] } -> std::convertible_to<float>;
  { view.stats(token) } -> std::convertible_to<const row_stats&>;
  { view.mass(gate)[expert] } -> std::convertible_to<std::int64_t>;
  { view.votes()[expert] } -> std::convertible_to<std::int32_t>;
  { view.requests() } -> std::convertible_to<int>;
  { view.request_begin(0) } -> std::convertible_to<int>;
  { view.request_end(0) } -> std::convertible_to<int>;
  { view.devices() } -> std::convertible_to<int>;
  { view.device_of(expert) } -> std::convertible_to<int>;
  context.selected.insert(expert);
  context.selected.erase(expert);
  { view.selected.contains(expert) } -> std::convertible_to<bool>;
  { view.selected.size() } -> std::convertible_to<int>;
  { view.guaranteed.contains(expert) } -> std::convertible_to<bool>;
  context.guarantee(token, 1);
  { view.scratch_experts() } -> std::convertible_to<std::int32_t*>;
  { view.scratch_counts() } -> std::convertible_to<std::int32_t*>;
};

}  // namespace moe_routing
