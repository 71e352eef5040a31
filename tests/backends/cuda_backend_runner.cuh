#pragma once
// The CUDA backend behind the runner interface of tests/backends/cpu_backend_runner.hpp:
// every call copies the problem to the device, routes on the default stream, checks the
// device-side input errors, and copies the whole plan back (ids, weights, counts,
// summary, expert_tokens, device_loads, guaranteed). Test cases on this runner are named
// "... [cuda]", form doctest's test suite "cuda", and are skipped without a usable GPU.

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <moe_routing/cuda.cuh>
#include <moe_routing/moe_routing.hpp>

#include "backends/call_overrides.hpp"
#include "backends/cuda_device.cuh"
#include "backends/device_array.cuh"
#include "test_support.hpp"

namespace test {

/// Device copies of one problem's inputs (the scores in its element type, bias, mask,
/// segments, placement); `batch<T>()` is the problem's batch on them.
class device_inputs {
 public:
  explicit device_inputs(const problem& p) : p_(p) {
    upload_scores(p);
    if (!p.ref.bias.empty()) bias_ = device_array<float>(p.ref.bias);
    if (!p.ref.mask.empty()) mask_ = device_array<std::uint8_t>(p.ref.mask);
    if (!p.segments.empty()) segments_ = device_array<std::int32_t>(p.segments);
    if (!p.placement.empty()) placement_ = device_array<std::int32_t>(p.placement);
    if (!p.replica_p2l.empty()) {
      replica_p2l_ = device_array<std::int32_t>(p.replica_p2l);
      replica_l2p_ = device_array<std::int32_t>(p.replica_l2p);
      replica_counts_ = device_array<std::int32_t>(p.replica_counts);
    }
  }

  /// The scores of `p` (the same shape and type as the problem's) into the device copy.
  void upload_scores(const problem& p) {
    const auto upload = [](auto& device, const auto& host) {
      if (device.size() != host.size()) device = std::remove_cvref_t<decltype(device)>(host.size());
      device.upload(host);
    };
    if (p.type == element::f32) upload(f32_, p.f32);
    if (p.type == element::f16) upload(f16_, p.f16);
    if (p.type == element::bf16) upload(bf16_, p.bf16);
  }

  template <class T>
  mr::routing_batch<T> batch() const {
    mr::routing_batch<T> b = p_.batch<T>();
    if constexpr (std::is_same_v<T, float>) b.scores.data = f32_.get();
    if constexpr (std::is_same_v<T, mr::float16>) b.scores.data = f16_.get();
    if constexpr (std::is_same_v<T, mr::bfloat16>) b.scores.data = bf16_.get();
    if (b.bias != nullptr) b.bias = bias_.get();
    if (b.token_mask != nullptr) b.token_mask = mask_.get();
    if (b.segments != nullptr) b.segments = segments_.get();
    if (b.placement != nullptr) b.placement = placement_.get();
    if (b.has_replicas()) {
      b.replicas.physical_to_logical = replica_p2l_.get();
      b.replicas.logical_to_physical = replica_l2p_.get();
      b.replicas.replica_counts = replica_counts_.get();
    }
    return b;
  }

 private:
  const problem& p_;
  device_array<float> f32_;
  device_array<mr::float16> f16_;
  device_array<mr::bfloat16> bf16_;
  device_array<float> bias_;
  device_array<std::uint8_t> mask_;
  device_array<std::int32_t> segments_, placement_, replica_p2l_, replica_l2p_, replica_counts_;
};

/// Device mirrors of a host plan's arrays; `view()` is the host plan's shape and padding
/// on them, and `copy_to` brings every array back.
class device_plan {
 public:
  explicit device_plan(mr::routing_plan& host)
      : shape_(host.view()),
        ids_(host.ids().size()),
        counts_(host.counts().size()),
        expert_tokens_(host.expert_tokens().size()),
        device_loads_(host.device_loads().size()),
        guaranteed_(host.counts().size()),
        physical_ids_(host.physical_ids().size()),
        weights_(host.weights().size()),
        summary_(1) {}

  mr::plan_view view() const {
    mr::plan_view v = shape_;
    v.ids = ids_.get();
    v.weights = weights_.get();
    v.counts = counts_.get();
    v.summary = summary_.get();
    v.expert_tokens = shape_.expert_tokens != nullptr ? expert_tokens_.get() : nullptr;
    v.device_loads = shape_.device_loads != nullptr ? device_loads_.get() : nullptr;
    v.guaranteed = shape_.guaranteed != nullptr ? guaranteed_.get() : nullptr;
    v.physical_ids = shape_.physical_ids != nullptr ? physical_ids_.get() : nullptr;
    return v;
  }

  /// Waits for the device, then copies the plan into `host` (the plan this was made for).
  void copy_to(mr::routing_plan& host) const {
    require_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const mr::plan_view h = host.view();
    ids_.copy_to(h.ids);
    weights_.copy_to(h.weights);
    counts_.copy_to(h.counts);
    summary_.copy_to(h.summary);
    if (h.expert_tokens != nullptr) expert_tokens_.copy_to(h.expert_tokens);
    if (h.device_loads != nullptr) device_loads_.copy_to(h.device_loads);
    if (h.guaranteed != nullptr) guaranteed_.copy_to(h.guaranteed);
    if (h.physical_ids != nullptr) physical_ids_.copy_to(h.physical_ids);
  }

 private:
  mr::plan_view shape_;
  device_array<std::int32_t> ids_, counts_, expert_tokens_, device_loads_, guaranteed_, physical_ids_;
  device_array<float> weights_;
  device_array<mr::plan_summary> summary_;
};

/// A routing workspace on a device buffer of its own, plus the segmented-sort path's
/// buffer when asked (sizing it needs a GPU).
class device_route_workspace {
 public:
  device_route_workspace(const mr::workspace_shape& shape, bool with_sort_buffer)
      : buffer_(mr::cuda::workspace_bytes(shape)), ws_(buffer_.get(), buffer_.size(), shape) {
    if (!with_sort_buffer) return;
    std::size_t bytes = 0;
    const mr::status sized = mr::cuda::segmented_sort_bytes(shape, bytes);
    REQUIRE_MESSAGE(sized.ok(), mr::to_string(sized));
    sort_buffer_ = device_array<unsigned char>(bytes);
    ws_.set_sort_buffer(sort_buffer_.get(), bytes);
  }

  const mr::cuda::workspace& get() const { return ws_; }

 private:
  device_array<unsigned char> buffer_, sort_buffer_;
  mr::cuda::workspace ws_;
};

struct cuda_backend_runner {
  static constexpr const char* name = "cuda";
  static constexpr const char* test_name_suffix = " [cuda]";
  static constexpr const char* test_suite = "cuda";
  static bool available() { return cuda_device().available; }
  static std::string unavailable_reason() { return cuda_skip_reason(); }

  /// Routes `p` on the device into device mirrors of `plan`, then copies them into `plan`.
  /// A host-side failure (shapes, parameters: the CPU backend's checks and messages) is
  /// returned before any launch; after a launch, the device-side input check's status.
  template <class Policy>
  static mr::status route(const Policy& policy, const problem& p, mr::routing_plan& plan,
                          const call_overrides& changes = {},
                          mr::cuda::route_path path = mr::cuda::route_path::automatic) {
    const device_inputs inputs(p);
    const device_plan out(plan);
    const device_route_workspace ws(changes.workspace.value_or(workspace_shape_of(p)),
                                    path == mr::cuda::route_path::segmented_sort);
    mr::plan_view view = out.view();
    if (changes.plan) changes.plan(view);
    const mr::status launched = visit_element_type(p.type, [&](auto element) {
      auto batch = inputs.batch<decltype(element)>();
      apply_batch_edit(changes, batch);
      return mr::cuda::route(policy, batch, view, ws.get(), nullptr, path);
    });
    if (!launched.ok()) return launched;
    // Segments and placement are checked on the device (the host cannot read them without
    // a synchronisation): the CPU backend reports those from route, this one from here.
    const mr::status input = mr::cuda::input_status(ws.get());
    out.copy_to(plan);
    return input;
  }

  /// Whether `got` is the error the CPU backend reports as `cpu_message`. Host-checked
  /// errors carry the CPU's message word for word. Segments, placement and a replica map's
  /// arrays are checked on the device, and input_status names only the array and its rule,
  /// not the offending entry or its indices: for those the error code and the array's name
  /// must match (and for a map's, the rule's words too).
  static bool reports(const mr::status& got, std::string_view cpu_message) {
    if (mr::to_string(got) == cpu_message) return true;
    if (got.ok() || got.parameter == nullptr) return false;
    const std::string_view parameter = got.parameter;
    // A replica map's arrays are checked on the device too, with the CPU's rule text.
    const bool map_checked = parameter.starts_with("replicas.");
    const bool device_checked = parameter == "segments" || parameter == "placement[e]" || map_checked;
    if (map_checked && (got.requirement == nullptr || cpu_message.find(got.requirement) == std::string_view::npos))
      return false;
    // The CPU's message names the entry (`placement[15]`); the device's only the array, and
    // with an index where the CPU names one.
    const std::size_t bracket = parameter.find('[');
    const std::string array(parameter.substr(0, bracket == std::string_view::npos ? parameter.size() : bracket + 1));
    return device_checked && cpu_message.starts_with(std::string(mr::to_string(got.code)) + ": " + array);
  }

  /// The grouped MoE executor, defined in tests/backends/cuda_executor_runner.cuh (its
  /// header holds kernels that are not templates, so one test file may include it).
  template <class Weight>
  class executor;
};

}  // namespace test
