#pragma once
/// \file
/// `buffer_router`: a parsed policy and a CPU workspace that route the caller's arrays
/// (described by `array_argument`) into the caller's weights and ids buffers. The
/// Python `Router`, the module's one-shot `route` and the PyTorch operator all route
/// through it. The workspace and the router's own summary buffers grow to the largest
/// call and are then reused: after the first call of a shape, routing allocates nothing.

#include <algorithm>
#include <cstdint>
#include <execution>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

#include "array_argument.hpp"
#include "routing_arguments.hpp"

namespace moe_routing::python {

class buffer_router {
 public:
  /// `top_k` is the plan width (0: the policy's own, `preferred_top_k`). A `bound` shape
  /// fixes the largest batch (`max_tokens`) and the expert count the router serves: its
  /// workspace is sized once, and calls outside the shape are refused instead of growing it.
  buffer_router(std::string_view policy_text, std::int64_t top_k, const workspace_shape* bound = nullptr)
      : policy_(parse_policy_or_throw(policy_text)), top_k_(checked_top_k(policy_, top_k)) {
    if (bound != nullptr) {
      bound_ = *bound;
      bound_.top_k = top_k_;
      throw_if_failed(bind_policy(policy_, {bound_.experts, top_k_, false}));
      workspace_.reserve(bound_);
      grow_summary_buffers(bound_.max_tokens, bound_.experts);
      fixed_ = true;
    }
  }

  int top_k() const noexcept { return top_k_; }
  bool fixed() const noexcept { return fixed_; }
  const workspace_shape& bound() const noexcept { return bound_; }

  /// Routes `arguments` into `weights` [n, k] float32 and `ids` [n, k] int32, and this
  /// router's counts, per-expert token counts, device loads and summary. Throws
  /// `argument_error` or `routing_error` (both `std::invalid_argument`) naming what is wrong.
  void route(const routing_arguments& arguments, const array_argument& weights, const array_argument& ids) {
    const std::lock_guard<std::mutex> lock(mutex_);  // one call at a time per router: they share the workspace
    check_scores(arguments.scores, fixed_ ? bound_.max_tokens : max_tokens, 2, max_experts);
    const int n = static_cast<int>(arguments.scores.shape[0]);
    const int experts = static_cast<int>(arguments.scores.shape[1]);
    if (fixed_ && experts != bound_.experts) {
      throw argument_error("scores.shape[1] = " + std::to_string(experts) +
                           ": must equal the Router's experts = " + std::to_string(bound_.experts));
    }
    check_output(weights, "weights", n, top_k_, element_kind::float32, "float32");
    check_output(ids, "ids", n, top_k_, element_kind::int32, "int32");
    switch (arguments.scores.kind) {
      case element_kind::float16:
        return route_as<float16>(arguments, weights, ids, n, experts);
      case element_kind::bfloat16:
        return route_as<bfloat16>(arguments, weights, ids, n, experts);
      default:
        return route_as<float>(arguments, weights, ids, n, experts);
    }
  }

  /// The last call's summary as copies, taken under the router's lock: never parts of two
  /// calls, even while another thread routes (the Python getters read only this).
  struct summary_copy {
    int active_count = 0, selected_count = 0, max_device_load = 0;
    std::vector<int> active_experts, counts, expert_tokens, device_loads;
  };
  summary_copy copy_summary() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    summary_copy copy;
    copy.active_count = summary_.active_count;
    copy.selected_count = summary_.selected_count;
    copy.max_device_load = summary_.max_device_load;
    copy.active_experts.reserve(static_cast<std::size_t>(std::max(summary_.active_count, 0)));
    summary_.active.for_each([&](int expert) { copy.active_experts.push_back(expert); });
    copy.counts.assign(counts().begin(), counts().end());
    copy.expert_tokens.assign(expert_tokens().begin(), expert_tokens().end());
    copy.device_loads.assign(device_loads().begin(), device_loads().end());
    return copy;
  }

  // The last call's results (valid until the next call; unlocked: for a router one thread uses).
  const plan_summary& summary() const noexcept { return summary_; }
  std::span<const std::int32_t> counts() const noexcept { return {counts_.data(), static_cast<std::size_t>(tokens_)}; }
  std::span<const std::int32_t> expert_tokens() const noexcept {
    return {expert_tokens_.data(), static_cast<std::size_t>(experts_)};
  }
  std::span<const std::int32_t> device_loads() const noexcept {
    return {device_loads_.data(), static_cast<std::size_t>(devices_)};
  }

 private:
  static int checked_top_k(const runtime_policy& policy, std::int64_t top_k) {
    if (top_k == 0) {
      const int preferred = preferred_top_k(policy);
      if (preferred < 1) throw argument_error("top_k = None: the policy does not say its k; pass top_k");
      return preferred;
    }
    if (top_k < 1 || top_k > max_top_k) {
      throw argument_error("top_k = " + std::to_string(top_k) + ": must be in [1, " + std::to_string(max_top_k) + "]");
    }
    return static_cast<int>(top_k);
  }

  void grow_summary_buffers(int tokens, int experts) {
    const auto grow = [](std::vector<std::int32_t>& buffer, std::size_t size) {
      if (buffer.size() < size) buffer.resize(size);
    };
    grow(counts_, static_cast<std::size_t>(std::max(tokens, 1)));
    grow(guaranteed_, static_cast<std::size_t>(std::max(tokens, 1)));
    grow(segments_, static_cast<std::size_t>(tokens) + 1);
    grow(expert_tokens_, static_cast<std::size_t>(experts));
    grow(placement_, static_cast<std::size_t>(experts));
    grow(device_loads_, static_cast<std::size_t>(max_experts));  // G <= max_experts: sized once
  }

  /// An int32 copy of a 1-D int32 or int64 array into `out`, each value in [lo, hi].
  static void copy_indices(const array_argument& array, std::string_view name, std::int64_t lo, std::int64_t hi,
                           std::int32_t* out) {
    for (std::int64_t i = 0; i < array.shape[0]; ++i) {
      const std::int64_t value = array.kind == element_kind::int32 ? static_cast<const std::int32_t*>(array.data)[i]
                                                                   : static_cast<const std::int64_t*>(array.data)[i];
      if (value < lo || value > hi) {
        throw argument_error(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(value) +
                             ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      }
      out[i] = static_cast<std::int32_t>(value);
    }
  }

  template <score_element Element>
  void route_as(const routing_arguments& arguments, const array_argument& weights, const array_argument& ids, int n,
                int experts) {
    // Rows may be strided; a single row's stride says nothing, so it reads as dense.
    const std::ptrdiff_t row_stride = n > 1 ? static_cast<std::ptrdiff_t>(arguments.scores.strides[0]) : experts;
    routing_batch<Element> batch{
        make_score_view(static_cast<const Element*>(arguments.scores.data), n, experts, row_stride)};
    runtime_policy policy = policy_;
    apply_options(arguments, batch, policy);
    const padding pad = padding_of(arguments);
    if (!fixed_) {
      workspace_.reserve({std::max(n, workspace_.shape().max_tokens), std::max(experts, workspace_.shape().experts),
                          std::max(top_k_, workspace_.shape().top_k)});
    }
    grow_summary_buffers(n, experts);  // a no-op for a bound router: sized at construction
    const std::initializer_list<element_kind> any_integer = {element_kind::int32, element_kind::int64};
    if (arguments.bias.given) {
      check_vector(arguments.bias, "bias", experts, {element_kind::float32}, "float32");
      batch.bias = static_cast<const float*>(arguments.bias.data);
    }
    if (arguments.mask.given) {
      check_vector(arguments.mask, "mask", n, {element_kind::boolean, element_kind::uint8}, "bool or uint8");
      batch.token_mask = static_cast<const std::uint8_t*>(arguments.mask.data);
    }
    if (arguments.segments.given) {
      check_vector(arguments.segments, "segments", -1, any_integer, "int32 or int64");
      if (arguments.segments.shape[0] < 1 || arguments.segments.shape[0] > n + 1) {
        throw argument_error("segments.shape = [" + std::to_string(arguments.segments.shape[0]) +
                             "]: must be [R + 1] with R in [0, n = " + std::to_string(n) + "]");
      }
      copy_indices(arguments.segments, "segments", 0, n, segments_.data());
      batch.segments = segments_.data();
      batch.request_count = static_cast<int>(arguments.segments.shape[0]) - 1;
    }
    int devices = 0;
    if (arguments.placement.given) {
      check_vector(arguments.placement, "placement", experts, any_integer, "int32 or int64");
      copy_indices(arguments.placement, "placement", 0, max_experts - 1, placement_.data());
      if (arguments.devices < 0 || arguments.devices > max_experts) {
        throw argument_error("devices = " + std::to_string(arguments.devices) + ": must be in [1, " +
                             std::to_string(max_experts) + "] (or None)");
      }
      devices = arguments.devices > 0 ? static_cast<int>(arguments.devices)
                                      : 1 + *std::max_element(placement_.begin(), placement_.begin() + experts);
      batch.placement = placement_.data();
      batch.device_count = devices;
    } else if (arguments.devices != 0) {
      throw argument_error("devices = " + std::to_string(arguments.devices) + ": needs a placement");
    }
    plan_view plan{static_cast<std::int32_t*>(const_cast<void*>(ids.data)),
                   static_cast<float*>(const_cast<void*>(weights.data)),
                   counts_.data(),
                   &summary_,
                   n,
                   top_k_,
                   pad,
                   expert_tokens_.data(),
                   devices > 0 ? device_loads_.data() : nullptr,
                   guaranteed_.data(),
                   experts,
                   devices};
    tokens_ = 0, experts_ = 0, devices_ = 0;  // no stale results if the call fails
    summary_ = plan_summary{};
    throw_if_failed(cpu::route(policy, batch, plan, workspace_, std::execution::par));
    tokens_ = n, experts_ = experts, devices_ = devices;
  }

  runtime_policy policy_;
  int top_k_ = 0;
  bool fixed_ = false;
  workspace_shape bound_{};
  cpu::workspace workspace_;
  mutable std::mutex mutex_;
  // The last call's results and the int32 copies of index inputs, grown once.
  std::vector<std::int32_t> counts_, guaranteed_, expert_tokens_, device_loads_, segments_, placement_;
  plan_summary summary_{};
  int tokens_ = 0, experts_ = 0, devices_ = 0;
};

}  // namespace moe_routing::python
