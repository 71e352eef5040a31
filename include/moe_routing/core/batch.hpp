#pragma once
/// \file
/// One routing call's inputs (SPEC section 1): the score view plus the optional
/// scoring bias, group limit, token mask, request segments, placement and phase.
/// Every member is a value or a non-owning pointer, so a batch can be a kernel argument.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/replica_map.hpp"
#include "moe_routing/core/score_view.hpp"
#include "moe_routing/core/status.hpp"

namespace moe_routing {

/// How router output becomes weight probabilities p and selection scores s.
enum class scoring : std::uint8_t {
  softmax,        ///< p = softmax over all E; ranked by the logits (same order as p)
  sigmoid,        ///< p = sigmoid(x); s = p + bias
  sqrtsoftplus,   ///< p = sqrt(softplus(x)); s = p + bias
  probabilities,  ///< p = s = input
};

/// Score of an expert group in group-limited routing.
enum class group_score : std::uint8_t {
  top2_sum,  ///< sum of the group's two largest s (DeepSeek-V3)
  max,       ///< the group's largest s (DeepSeek-V2)
};

enum class phase : std::uint8_t { decode, prefill };

/// DeepSeek-style `n_group` / `topk_group`; `n_group == 0` disables it.
struct group_limit {
  int n_group = 0;
  int topk_group = 0;
  group_score score = group_score::top2_sum;

  MOE_ROUTING_HOST_DEVICE constexpr bool enabled() const noexcept { return n_group > 0; }
};

/// A group limit's own shape against E: groups divide the experts, and at least one of
/// them is kept.
MOE_ROUTING_HOST_DEVICE constexpr status validate_groups(const group_limit& g, int experts) noexcept {
  if (g.n_group < 0) return fail(errc::invalid_parameter, "groups.n_group", g.n_group, "must be 0 (off) or positive");
  if (!g.enabled()) return {};
  if (g.n_group > experts || experts % g.n_group != 0) {
    return fail(errc::invalid_parameter, "groups.n_group", g.n_group, "must divide the expert count", "batch.E",
                experts);
  }
  if (g.topk_group < 1 || g.topk_group > g.n_group) {
    return fail(errc::invalid_parameter, "groups.topk_group", g.topk_group, "must be in [1, groups.n_group]",
                "groups.n_group", g.n_group);
  }
  return {};
}

/// A row's rank keys are its input values alone, with no p to compute: no bias shifts the
/// order and no group limit needs the row's scores (`rank_row`, and each backend's rescoring
/// of a single row).
MOE_ROUTING_HOST_DEVICE constexpr bool keys_from_input_alone(const float* bias, const group_limit& groups) noexcept {
  return bias == nullptr && !groups.enabled();
}

template <score_element Element>
struct routing_batch {
  score_view<Element> scores;
  scoring mode = scoring::softmax;
  const float* bias = nullptr;  ///< [E] e_score_correction_bias, optional
  group_limit groups = {};
  const std::uint8_t* token_mask = nullptr;  ///< [n], nonzero = valid; null = all valid
  const std::int32_t* segments = nullptr;    ///< [request_count + 1] offsets; null = one request per token
  int request_count = 0;
  const std::int32_t* placement = nullptr;  ///< [E] device of each expert; optional
  int device_count = 0;
  phase step = phase::decode;
  /// Redundant experts (EPLB), optional (core/replica_map.hpp): with a map, `placement`
  /// holds the device of each expert's first replica, ep_fill and ep_level count every
  /// replica's slot, and the plan's device loads count the physical slots dispatched to.
  replica_map replicas = {};

  MOE_ROUTING_HOST_DEVICE constexpr bool has_replicas() const noexcept {
    return replicas.physical_to_logical != nullptr;
  }

  /// Rows rank by their input values (`rank_score`): no bias shifts the order, so the
  /// value top-k and the list search over S apply, on every backend.
  MOE_ROUTING_HOST_DEVICE constexpr bool ranks_by_input() const noexcept { return bias == nullptr; }
  /// `keys_from_input_alone` for this batch: a row's rank keys need none of its p. (Qualified:
  /// this member hides the free function's name.)
  MOE_ROUTING_HOST_DEVICE constexpr bool keys_from_input_alone() const noexcept {
    return moe_routing::keys_from_input_alone(bias, groups);
  }
  /// Softmax rows ranked by their logits: a token's top-k p can be taken relative to its
  /// top-1 logit, so the denominator cancels (the top-k-only path and the sparse gates).
  MOE_ROUTING_HOST_DEVICE constexpr bool softmax_by_logits() const noexcept {
    return mode == scoring::softmax && ranks_by_input();
  }

  MOE_ROUTING_HOST_DEVICE constexpr int tokens() const noexcept { return scores.rows; }
  MOE_ROUTING_HOST_DEVICE constexpr int experts() const noexcept { return scores.cols; }
  MOE_ROUTING_HOST_DEVICE constexpr bool is_valid(int token) const noexcept {
    return token_mask == nullptr || token_mask[token] != 0;
  }
  MOE_ROUTING_HOST_DEVICE constexpr int requests() const noexcept {
    return segments == nullptr ? scores.rows : request_count;
  }
  MOE_ROUTING_HOST_DEVICE constexpr int request_begin(int request) const noexcept {
    return segments == nullptr ? request : segments[request];
  }
  MOE_ROUTING_HOST_DEVICE constexpr int request_end(int request) const noexcept {
    return segments == nullptr ? request + 1 : segments[request + 1];
  }
};

static_assert(std::is_trivially_copyable_v<routing_batch<float>>);

/// The checks of `validate_batch` that read no array: shapes, pointers and scalar
/// parameters. A GPU backend runs these on the host, where its arrays are not readable.
template <score_element Element>
constexpr status validate_batch_shape(const routing_batch<Element>& batch) noexcept {
  const int n = batch.tokens();
  const int experts = batch.experts();
  if (n < 0 || n > max_tokens) {
    return fail(errc::shape_mismatch, "batch.n", n, "must be in [0, max_tokens]", "max_tokens", max_tokens);
  }
  if (experts < 2 || experts > max_experts) {
    return fail(errc::shape_mismatch, "batch.E", experts, "must be in [2, max_experts]", "max_experts", max_experts);
  }
  if (batch.scores.row_stride < experts) {
    return fail(errc::shape_mismatch, "batch.row_stride", static_cast<double>(batch.scores.row_stride),
                "must be at least", "batch.E", experts);
  }
  if (n > 0 && batch.scores.data == nullptr) {
    return fail(errc::null_pointer, "batch.scores.data", 0, "must not be null when", "batch.n", n);
  }
  if (batch.bias != nullptr && batch.mode == scoring::probabilities) {
    return fail(errc::invalid_parameter, "batch.bias", 1,
                "does not apply to probabilities input (s = p); scoring mode is", "batch.mode",
                static_cast<int>(batch.mode));
  }
  MOE_ROUTING_TRY(validate_groups(batch.groups, experts));
  if (batch.segments != nullptr && batch.request_count < 0) {
    return fail(errc::invalid_input, "batch.request_count", batch.request_count, "must not be negative");
  }
  if (batch.placement != nullptr && (batch.device_count < 1 || batch.device_count > max_experts)) {
    return fail(errc::invalid_input, "batch.device_count", batch.device_count,
                "must be in [1, max_experts] when a placement is given", "max_experts", max_experts);
  }
  if (batch.has_replicas()) {
    if (batch.placement == nullptr) {
      return fail(errc::invalid_input, "batch.replicas", 1,
                  "needs batch.placement too (the device of each expert's first replica)");
    }
    if (batch.replicas.device_count != batch.device_count) {
      return fail(errc::invalid_input, "replicas.device_count", batch.replicas.device_count, "must equal",
                  "batch.device_count", batch.device_count);
    }
    MOE_ROUTING_TRY(validate_replica_map_shape(batch.replicas, experts));
  }
  return {};
}

/// A group limit must leave every token at least `top_k` candidates (SPEC section 1):
/// filling a row from outside its kept groups, by index, is what no engine does.
MOE_ROUTING_HOST_DEVICE constexpr status validate_group_candidates(const group_limit& groups, int experts,
                                                                   int top_k) noexcept {
  if (!groups.enabled() || experts % groups.n_group != 0) return {};  // validate_groups reports the latter
  const int candidates = groups.topk_group * (experts / groups.n_group);
  if (candidates < top_k) {
    return fail(errc::invalid_parameter, "groups.topk_group", groups.topk_group,
                "leaves topk_group * E / n_group candidate experts, fewer than", "plan.top_k", top_k);
  }
  return {};
}

/// What is wrong with a request segments array, if anything (`at`: the request whose end
/// lies below its start).
enum class segments_fault : std::uint8_t { none, first_not_zero, decreasing, last_not_n };
struct segments_check {
  segments_fault fault = segments_fault::none;
  int at = 0;
};

/// The segments check every backend runs (the CUDA backend on the device, where the host
/// cannot read the array): offsets start at 0, never decrease, and end at n.
MOE_ROUTING_HOST_DEVICE constexpr segments_check check_segments(const std::int32_t* segments, int requests,
                                                                int tokens) noexcept {
  if (segments[0] != 0) return {segments_fault::first_not_zero, 0};
  for (int r = 0; r < requests; ++r) {
    if (segments[r + 1] < segments[r]) return {segments_fault::decreasing, r};
  }
  if (segments[requests] != tokens) return {segments_fault::last_not_n, requests};
  return {};
}

/// Whether a placement entry names one of the devices.
MOE_ROUTING_HOST_DEVICE constexpr bool is_device_of_placement(std::int32_t device, int device_count) noexcept {
  return device >= 0 && device < device_count;
}

/// Checks everything about a batch that does not depend on the policy. O(E + R).
template <score_element Element>
constexpr status validate_batch(const routing_batch<Element>& batch) noexcept {
  MOE_ROUTING_TRY(validate_batch_shape(batch));
  const int n = batch.tokens();
  const int experts = batch.experts();
  if (batch.segments != nullptr) {
    const segments_check check = check_segments(batch.segments, batch.request_count, n);
    if (check.fault == segments_fault::first_not_zero) {
      return fail(errc::invalid_input, "segments[0]", batch.segments[0], "must be 0");
    }
    if (check.fault == segments_fault::decreasing) {
      return fail(errc::invalid_input, "segments[r+1]", batch.segments[check.at + 1],
                  "must not be below the previous offset", "segments[r]", batch.segments[check.at])
          .at(check.at);
    }
    if (check.fault == segments_fault::last_not_n) {
      return fail(errc::invalid_input, "segments[R]", batch.segments[batch.request_count], "must equal", "batch.n", n);
    }
  }
  if (batch.placement != nullptr) {
    for (int e = 0; e < experts; ++e) {
      if (!is_device_of_placement(batch.placement[e], batch.device_count)) {
        return fail(errc::invalid_input, "placement[e]", batch.placement[e], "must be in [0, device_count)",
                    "batch.device_count", batch.device_count)
            .at(e);
      }
    }
  }
  if (batch.has_replicas()) {
    MOE_ROUTING_TRY(validate_replica_map(batch.replicas, experts));
    for (int e = 0; e < experts; ++e) {
      if (!placed_on_first_replica(batch.replicas, batch.placement, e)) {
        const replica_fault_text text = describe(replica_fault::first_device);
        return fail(errc::invalid_input, text.parameter, batch.placement[e], text.requirement, "device",
                    batch.replicas.device_of_physical(batch.replicas.replica(e, 0)))
            .at(e);
      }
    }
  }
  return {};
}

}  // namespace moe_routing
