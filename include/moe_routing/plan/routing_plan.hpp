#pragma once
/// \file
/// The routing plan (SPEC section 4): int32 ids and float32 weights `[n, k]` row-major,
/// as vLLM's and SGLang's fused MoE kernels take them, per-row counts, and the batch
/// summary. `plan_view` is non-owning (the engine's buffers); `routing_plan` owns its
/// storage for tools and tests.

#include <cstdint>
#include <type_traits>
#include <vector>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/config.hpp"
#include "moe_routing/core/error.hpp"
#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/status.hpp"

namespace moe_routing {

enum class padding_kind : std::uint8_t {
  sentinel,  ///< unused slots hold `sentinel_value` (-1 for SGLang, E for vLLM's align step)
  repeat,    ///< unused slots repeat the row's first expert with weight 0
};

struct padding {
  padding_kind kind = padding_kind::sentinel;
  std::int32_t sentinel_value = -1;
};

/// The id that pads a row of `count` assigned experts whose first is `first` (SPEC
/// section 4), shared by every backend.
MOE_ROUTING_HOST_DEVICE constexpr std::int32_t padding_id(const padding& pad, int count, std::int32_t first) noexcept {
  return pad.kind == padding_kind::repeat && count > 0 ? first : pad.sentinel_value;
}
/// The id that fills a row with no expert (an invalid token) under repeat padding: the
/// batch's lowest active expert, which adds no load, else the sentinel.
MOE_ROUTING_HOST_DEVICE constexpr std::int32_t empty_row_id(const padding& pad, int lowest_active) noexcept {
  return lowest_active >= 0 ? lowest_active : pad.sentinel_value;
}

/// Batch-level results: what the executor loads and how the devices are balanced.
struct plan_summary {
  expert_set active;        ///< union of every A_i: the experts actually loaded
  expert_set selected;      ///< S, the selected set (a superset of active)
  int active_count = 0;     ///< |active|
  int selected_count = 0;   ///< |S|
  int max_device_load = 0;  ///< largest active expert count on one device (0 without placement)
};

/// Caller-owned output buffers. Required: ids, weights, counts, summary. Optional
/// (null to skip): expert_tokens [E], device_loads [G], guaranteed [n].
struct plan_view {
  std::int32_t* ids = nullptr;     ///< [n, k]
  float* weights = nullptr;        ///< [n, k]
  std::int32_t* counts = nullptr;  ///< [n], |A_i|
  plan_summary* summary = nullptr;
  int tokens = 0;  ///< n
  int top_k = 0;   ///< k: the row width, the model's top-k
  padding pad = {};
  std::int32_t* expert_tokens = nullptr;  ///< [E] tokens assigned to each expert
  std::int32_t* device_loads = nullptr;   ///< [G] active experts on each device
  std::int32_t* guaranteed = nullptr;     ///< [n] leading experts of the row that were guaranteed
  int experts = 0;  ///< length of expert_tokens: at least the batch's E when expert_tokens is given
  int devices = 0;  ///< length of device_loads: at least the batch's device count when device_loads is given
  /// [n, k] optional: with a replica map (batch.replicas), the physical slot each
  /// assignment is dispatched to; `ids` keep the logical experts (core/replica_map.hpp).
  std::int32_t* physical_ids = nullptr;
};

static_assert(std::is_trivially_copyable_v<plan_view>);

/// Checks a plan's shape and required buffers against a batch of `tokens` rows, `experts`
/// experts and `devices` devices (0 without a placement). Reads no buffer, so it also
/// checks device plans on the host.
constexpr status validate_plan(const plan_view& plan, int tokens, int experts, int devices) noexcept {
  if (plan.tokens != tokens)
    return fail(errc::shape_mismatch, "plan.tokens", plan.tokens, "must equal", "batch.n", tokens);
  MOE_ROUTING_TRY(check_range(errc::invalid_parameter, "plan.top_k", plan.top_k, 1, max_top_k,
                              "must be in [1, max_top_k]", "max_top_k"));
  if (plan.summary == nullptr) return fail(errc::null_pointer, "plan.summary", 0, "must not be null");
  if (tokens > 0 && plan.ids == nullptr)
    return fail(errc::null_pointer, "plan.ids", 0, "must not be null when", "batch.n", tokens);
  if (tokens > 0 && plan.weights == nullptr) {
    return fail(errc::null_pointer, "plan.weights", 0, "must not be null when", "batch.n", tokens);
  }
  if (tokens > 0 && plan.counts == nullptr) {
    return fail(errc::null_pointer, "plan.counts", 0, "must not be null when", "batch.n", tokens);
  }
  if (plan.expert_tokens != nullptr && plan.experts < experts) {
    return fail(errc::shape_mismatch, "plan.experts", plan.experts,
                "(the length of plan.expert_tokens) must be at least", "batch.E", experts);
  }
  if (plan.device_loads != nullptr && plan.devices < devices) {
    return fail(errc::shape_mismatch, "plan.devices", plan.devices,
                "(the length of plan.device_loads) must be at least", "batch.device_count", devices);
  }
  return {};
}

/// The plan's checks against a batch, and the batch's group limit against the plan's width.
/// With a replica map, a padding sentinel must not name a logical expert: it would read as
/// that expert and be dispatched to one of its replicas (a host value, so every backend
/// checks it here).
template <score_element Element>
constexpr status validate_plan(const plan_view& plan, const routing_batch<Element>& batch) noexcept {
  MOE_ROUTING_TRY(
      validate_plan(plan, batch.tokens(), batch.experts(), batch.placement != nullptr ? batch.device_count : 0));
  if (batch.has_replicas() && plan.pad.kind == padding_kind::sentinel && plan.pad.sentinel_value >= 0 &&
      plan.pad.sentinel_value < batch.experts()) {
    return fail(errc::invalid_parameter, "plan.pad.sentinel_value", plan.pad.sentinel_value,
                "must not name a logical expert, in [0, E), with a replica map", "batch.E", batch.experts());
  }
  return validate_group_candidates(batch.groups, batch.experts(), plan.top_k);
}

/// The sizes of an owned plan, named and in the workspace's order (`workspace_shape`: n, E,
/// k): `routing_plan plan({.tokens = n, .experts = E, .top_k = k})` next to
/// `cpu::workspace ws({.max_tokens = n, .experts = E, .top_k = k})`. Unnamed, write
/// `routing_plan(plan_shape{n, E, k})` (a bare `{n, E, k}` would also match the deprecated
/// (n, k, E) constructor).
struct plan_shape {
  int tokens = 0;   ///< n: rows
  int experts = 0;  ///< E: the length of `expert_tokens`
  int top_k = 0;    ///< k: the row width, the model's top-k
  int devices = 0;  ///< G: the length of `device_loads` (0 without a placement)
  padding pad = {};
};

/// A plan that owns its buffers. Sized once; reuse it across calls of the same shape.
class routing_plan {
 public:
  routing_plan() = default;
  /// Throws routing_error naming the size when one is out of range (before allocating).
  explicit routing_plan(const plan_shape& shape)
      : tokens_(checked_tokens(shape)),
        top_k_(shape.top_k),
        pad_(shape.pad),
        ids_(static_cast<std::size_t>(shape.tokens) * static_cast<std::size_t>(shape.top_k)),
        weights_(static_cast<std::size_t>(shape.tokens) * static_cast<std::size_t>(shape.top_k)),
        counts_(static_cast<std::size_t>(shape.tokens)),
        expert_tokens_(static_cast<std::size_t>(shape.experts)),
        device_loads_(static_cast<std::size_t>(shape.devices)),
        guaranteed_(static_cast<std::size_t>(shape.tokens)),
        physical_ids_(ids_.size()) {}
  /// The 0.1 order (n, k, E), unlike the workspace's; removed in 1.0.
  [[deprecated(
      "routing_plan(n, k, E) takes k before E; write routing_plan({.tokens = n, .experts = E, .top_k = k}), "
      "the workspace's order")]] routing_plan(int tokens, int top_k, int experts, int devices = 0, padding pad = {})
      : routing_plan(plan_shape{tokens, experts, top_k, devices, pad}) {}

  plan_view view() {
    return plan_view{ids_.data(),
                     weights_.data(),
                     counts_.data(),
                     &summary_,
                     tokens_,
                     top_k_,
                     pad_,
                     expert_tokens_.empty() ? nullptr : expert_tokens_.data(),
                     device_loads_.empty() ? nullptr : device_loads_.data(),
                     guaranteed_.data(),
                     static_cast<int>(expert_tokens_.size()),
                     static_cast<int>(device_loads_.size()),
                     physical_ids_.data()};
  }

  int tokens() const noexcept { return tokens_; }
  int top_k() const noexcept { return top_k_; }
  const padding& pad() const noexcept { return pad_; }
  int experts() const noexcept { return static_cast<int>(expert_tokens_.size()); }
  int devices() const noexcept { return static_cast<int>(device_loads_.size()); }
  std::int32_t id(int token, int slot) const { return ids_[index(token, slot)]; }
  float weight(int token, int slot) const { return weights_[index(token, slot)]; }
  int count(int token) const { return counts_[static_cast<std::size_t>(token)]; }
  int guaranteed(int token) const { return guaranteed_[static_cast<std::size_t>(token)]; }
  const std::vector<std::int32_t>& ids() const noexcept { return ids_; }
  const std::vector<float>& weights() const noexcept { return weights_; }
  const std::vector<std::int32_t>& counts() const noexcept { return counts_; }
  const std::vector<std::int32_t>& expert_tokens() const noexcept { return expert_tokens_; }
  const std::vector<std::int32_t>& device_loads() const noexcept { return device_loads_; }
  /// Physical slots per assignment [n, k]: written only by a call with a replica map.
  const std::vector<std::int32_t>& physical_ids() const noexcept { return physical_ids_; }
  std::int32_t physical_id(int token, int slot) const { return physical_ids_[index(token, slot)]; }
  const plan_summary& summary() const noexcept { return summary_; }

 private:
  /// Checks every size before the first buffer is allocated; returns `tokens`.
  static int checked_tokens(const plan_shape& shape) {
    constexpr auto bad = errc::invalid_parameter;
    throw_if_failed(check_range(bad, "routing_plan.tokens", shape.tokens, 0, max_tokens, "must be in [0, max_tokens]",
                                "max_tokens"));
    throw_if_failed(
        check_range(bad, "routing_plan.top_k", shape.top_k, 1, max_top_k, "must be in [1, max_top_k]", "max_top_k"));
    throw_if_failed(check_range(bad, "routing_plan.experts", shape.experts, 2, max_experts,
                                "must be in [2, max_experts]", "max_experts"));
    throw_if_failed(check_range(bad, "routing_plan.devices", shape.devices, 0, max_experts,
                                "must be in [0, max_experts]", "max_experts"));
    return shape.tokens;
  }

  std::size_t index(int token, int slot) const {
    return static_cast<std::size_t>(token) * static_cast<std::size_t>(top_k_) + static_cast<std::size_t>(slot);
  }

  int tokens_ = 0;
  int top_k_ = 0;
  padding pad_ = {};
  std::vector<std::int32_t> ids_;
  std::vector<float> weights_;
  std::vector<std::int32_t> counts_;
  std::vector<std::int32_t> expert_tokens_;
  std::vector<std::int32_t> device_loads_;
  std::vector<std::int32_t> guaranteed_;
  std::vector<std::int32_t> physical_ids_;
  plan_summary summary_;
};

}  // namespace moe_routing
