#pragma once
/// \file
/// CUDA routing entry point: the same plans as the CPU backend, on device pointers.
///
/// `route(policy, batch, plan, ws, stream)` checks shapes and parameters on the host,
/// with the CPU backend's messages, then enqueues the call on `stream`: no allocation,
/// no host synchronisation, so it can be captured in a CUDA graph. Every pointer in the
/// batch and the plan (including `plan.summary`) is device memory.
///
/// Paths, chosen by n: up to `fused_max_tokens` the whole call is one kernel on one block
/// (decode); above it, four kernels (scoring and assignment spread over the GPU, set stages
/// and summary on one block) after one memset. `route_path::segmented_sort` takes each
/// row's top-k from cub::DeviceSegmentedRadixSort instead (a block per row, no host
/// synchronisation; it needs a sort buffer, see `segmented_sort_bytes`). docs/cuda.md
/// explains the choice.
///
/// The segments and placement arrays are checked on the device (the host cannot read
/// them without synchronising); a bad one leaves every row empty and is reported by
/// `input_status(ws, stream)`, which synchronises.

#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_segmented_radix_sort.cuh>

#include <cstdint>
#include <type_traits>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/workspace_shape.hpp"
#include "moe_routing/cuda/cuda_status.cuh"
#include "moe_routing/cuda/kernels/route_kernels.cuh"
#include "moe_routing/cuda/workspace.cuh"
#include "moe_routing/plan/routing_plan.hpp"
#include "moe_routing/policies/builtin_stages.hpp"
#include "moe_routing/policies/policy_checks.hpp"
#include "moe_routing/policies/runtime_policy.hpp"
#include "moe_routing/policies/scoring_needs.hpp"

namespace moe_routing::cuda {

/// Tuning data: the largest n routed by the single-block fused kernel (8 tokens per warp).
inline constexpr int fused_max_tokens = 256;

/// Which kernels route a call. `automatic` picks by n (`fused_max_tokens`); the others
/// exist to measure the crossover and give the same plan.
enum class route_path : std::uint8_t {
  automatic,
  fused,           ///< one single-block kernel
  multi_kernel,    ///< scoring and assignment over the whole GPU, warp top-k per row
  segmented_sort,  ///< as multi_kernel, with each row's top-k from cub::DeviceSegmentedRadixSort
};

namespace detail {

/// Segment i of the key array starts at i * E.
struct row_start {
  int experts;
  __host__ __device__ std::int64_t operator()(std::int64_t row) const { return row * experts; }
};
using row_offsets = thrust::transform_iterator<row_start, thrust::counting_iterator<std::int64_t>>;

inline row_offsets row_offsets_at(int experts, std::int64_t first_row) {
  return thrust::make_transform_iterator(thrust::make_counting_iterator(first_row), row_start{experts});
}

/// Sorts every row's E keys descending (the rows are the segments). A radix sort with a
/// block per segment: its passes are launches on `stream` only. (cub::DeviceSegmentedSort
/// copies the segment sizes to the host and synchronises when there are more than 500
/// segments, which breaks graph capture.) n * E <= 16384 * 1024 fits its int sizes.
inline cudaError_t sort_rows(void* scratch, std::size_t& scratch_bytes, const rank_key* in, rank_key* out, int n,
                             int experts, cudaStream_t stream) {
  return cub::DeviceSegmentedRadixSort::SortKeysDescending(scratch, scratch_bytes, in, out, n * experts, n,
                                                           row_offsets_at(experts, 0), row_offsets_at(experts, 1), 0,
                                                           static_cast<int>(sizeof(rank_key) * 8), stream);
}

/// The status of the launch just made: `cudaGetLastError` would also report (and clear) an
/// error some earlier, unrelated call left, so `route` checks for one before its first launch
/// (`earlier_error`) and this names the launch.
inline status launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

/// An error left by an earlier call, before this call launches anything; read with
/// `cudaPeekAtLastError`, so it stays for its owner to see.
inline status earlier_error() {
  return cuda_status(cudaPeekAtLastError(), "an earlier CUDA call (pending before moe_routing::cuda::route)");
}

/// True when every set stage of the policy is built in (it then has a runtime form).
template <class Policy>
struct only_builtin_stages : std::true_type {};  // the runtime form
template <class... Stages>
struct only_builtin_stages<pipeline<Stages...>>
    : std::bool_constant<((!set_stage<Stages> || builtin_set_stage<Stages>)&&...)> {};

/// The set stages the kernels run: the runtime form of a policy of built-in stages (one
/// kernel instantiation for all of them), else the compiled pipeline itself.
template <routing_policy Policy>
auto program_of(const Policy& policy) {
  static_assert(std::is_same_v<decltype(assignment_of(policy)), refine>,
                "The CUDA backend implements the refine assignment stage only.");
  if constexpr (std::is_same_v<Policy, runtime_policy>) {
    return policy;
  } else if constexpr (only_builtin_stages<Policy>::value) {
    return to_runtime_policy(policy);
  } else {
    return policy;
  }
}

template <score_element Element>
status check_call(const routing_batch<Element>& batch, const plan_view& plan, const workspace& ws) {
  MOE_ROUTING_TRY(validate_batch_shape(batch));
  MOE_ROUTING_TRY(validate_plan(plan, batch));
  MOE_ROUTING_TRY(validate_workspace_shape(ws.shape()));
  if (!ws.has_buffer()) return fail(errc::null_pointer, "workspace buffer", 0, "must not be null");
  const std::size_t needed = workspace_bytes(ws.shape());
  if (ws.bytes() < needed) {
    return fail(errc::workspace_too_small, "workspace bytes", static_cast<double>(ws.bytes()),
                "must be at least workspace_bytes(shape)", "workspace_bytes", static_cast<double>(needed));
  }
  return check_workspace_shape(ws.shape(), batch.tokens(), batch.experts(), plan.top_k);
}

}  // namespace detail

/// Bytes of the buffer `workspace::set_sort_buffer` needs for the segmented-sort path: two
/// n x E key arrays and CUB's scratch. CUB sizes its scratch for the current device, so
/// this fails (a device_error status) where no GPU is usable.
inline status segmented_sort_bytes(const workspace_shape& shape, std::size_t& bytes) {
  std::size_t scratch = 0;
  const int n = shape.max_tokens > 0 ? shape.max_tokens : 1;
  MOE_ROUTING_CUDA_TRY(detail::sort_rows(nullptr, scratch, nullptr, nullptr, n, shape.experts, nullptr));
  bytes = 2 * sort_key_bytes(shape) + scratch;
  return {};
}

/// Routes one batch on `stream`. Returns a failed status, before any launch, for bad
/// shapes or parameters, and a `device_error` status naming the call when a launch fails.
template <routing_policy Policy, score_element Element>
[[nodiscard]] status route(const Policy& policy, const routing_batch<Element>& batch, const plan_view& plan,
                           const workspace& ws, cudaStream_t stream = nullptr,
                           route_path path = route_path::automatic) {
  MOE_ROUTING_TRY(detail::check_call(batch, plan, ws));
  MOE_ROUTING_TRY(bind_policy(
      policy, binding_shape{batch.experts(), plan.top_k, batch.placement != nullptr, batch.groups.enabled()}));
  const auto program = detail::program_of(policy);
  const bool as_vanilla = routes_as_vanilla(policy, batch.step);
  const refine assignment = as_vanilla ? vanilla_assignment(assignment_of(policy)) : assignment_of(policy);
  const detail::route_call<Element, std::remove_const_t<decltype(program)>> call{
      batch, plan, ws.arrays(), program, assignment, as_vanilla, scoring_needs_of(policy)};
  const int n = batch.tokens();
  // An empty batch always takes the fused kernel: a grid of zero blocks is a launch error.
  const bool fused = n == 0 || path == route_path::fused || (path == route_path::automatic && n <= fused_max_tokens);
  const sort_arrays& sort = ws.sort();
  if (!fused && path == route_path::segmented_sort && sort.keys_in == nullptr) {
    return fail(errc::workspace_too_small, "workspace sort buffer bytes", static_cast<double>(ws.sort_bytes()),
                "must be at least segmented_sort_bytes(shape) for route_path::segmented_sort");
  }
  MOE_ROUTING_TRY(detail::earlier_error());
  if (fused) {
    detail::fused_route_kernel<<<1, detail::block_threads, 0, stream>>>(call);
    return detail::launch_status("fused_route_kernel launch");
  }
  const device_workspace& arrays = ws.arrays();
  MOE_ROUTING_CUDA_TRY(cudaMemsetAsync(arrays.zeroed_begin, 0, arrays.zeroed_bytes, stream));
  const int token_blocks =
      (n + detail::token_block_threads / detail::warp_lanes - 1) / (detail::token_block_threads / detail::warp_lanes);
  if (path == route_path::segmented_sort) {
    detail::row_keys_kernel<<<token_blocks, detail::token_block_threads, 0, stream>>>(call, sort.keys_in);
    MOE_ROUTING_TRY(detail::launch_status("row_keys_kernel launch"));
    std::size_t scratch_bytes = sort.scratch_bytes;
    MOE_ROUTING_CUDA_TRY(
        detail::sort_rows(sort.scratch, scratch_bytes, sort.keys_in, sort.keys_out, n, batch.experts(), stream));
    detail::top_from_sorted_kernel<<<token_blocks, detail::token_block_threads, 0, stream>>>(call, sort.keys_out);
    MOE_ROUTING_TRY(detail::launch_status("top_from_sorted_kernel launch"));
  } else {
    detail::score_kernel<<<token_blocks, detail::token_block_threads, 0, stream>>>(call);
    MOE_ROUTING_TRY(detail::launch_status("score_kernel launch"));
  }
  detail::select_kernel<<<1, detail::block_threads, 0, stream>>>(call);
  MOE_ROUTING_TRY(detail::launch_status("select_kernel launch"));
  detail::assign_kernel<<<token_blocks, detail::token_block_threads, 0, stream>>>(call);
  MOE_ROUTING_TRY(detail::launch_status("assign_kernel launch"));
  detail::finish_kernel<<<1, detail::block_threads, 0, stream>>>(call);
  return detail::launch_status("finish_kernel launch");
}

/// The device-side input check of the last call on `ws` (bad segments, placement or
/// replica map arrays).
/// Synchronises `stream`: call it in tests and tools, not in the decode loop.
inline status input_status(const workspace& ws, cudaStream_t stream = nullptr) {
  std::int32_t error = 0;
  MOE_ROUTING_CUDA_TRY(cudaMemcpyAsync(&error, ws.arrays().error, sizeof(error), cudaMemcpyDeviceToHost, stream));
  MOE_ROUTING_CUDA_TRY(cudaStreamSynchronize(stream));
  if (error == detail::bad_segments) {
    return fail(errc::invalid_input, "segments", 0, "must start at 0, never decrease and end at batch.n");
  }
  if (error == detail::bad_placement) {
    return fail(errc::invalid_input, "placement[e]", 0, "must be in [0, device_count)");
  }
  if (error >= detail::bad_replicas && error < detail::bad_replicas + replica_fault_count - 1) {
    // The rule and parameter validate_replica_map names; the offending value stays on the device.
    const replica_fault_text text = describe(static_cast<replica_fault>(error - detail::bad_replicas + 1));
    return fail(errc::invalid_input, text.parameter, 0, text.requirement);
  }
  return {};
}

}  // namespace moe_routing::cuda
