#pragma once
/// \file
/// `per_request` on one thread block (XShare alg. 3): every token's top-k0 is guaranteed;
/// then one warp per request at a time holds S0_r as a bitset (lane l holds word l), sums
/// the request's own column mass in a scratch row, and adds its m_r heaviest experts
/// outside S0_r by warp argmax, in `heavier_expert` order.

#include <cstdint>

#include "moe_routing/core/expert_order.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/kernels/warp_row.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/per_request.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, per_request> {
  template <class Context>
  __device__ static void apply(const per_request& stage, Context& context) {
    cuda::detail::for_each_thread_item(context.tokens(), [&](int token) {
      if (context.is_valid(token)) context.guarantee(token, stage.k0);
    });
    if (stage.m_r == 0) return;
    const int warp = static_cast<int>(threadIdx.x) / cuda::detail::warp_lanes;
    const int warps = static_cast<int>(blockDim.x) / cuda::detail::warp_lanes;
    std::int64_t* mass = context.scratch_request_mass(warp);
    for (int request = warp; request < context.requests(); request += warps) {
      const std::uint32_t base_word = sum_request_mass(stage, context, request, mass);
      add_heaviest(stage, context, mass, base_word);
      __syncwarp();
    }
  }

 private:
  /// The request's column mass into `mass`; returns this lane's word of S0_r (experts
  /// 32 lane .. 32 lane + 31).
  template <class Context>
  __device__ static std::uint32_t sum_request_mass(const per_request& stage, Context& context, int request,
                                                   std::int64_t* mass) {
    using cuda::detail::warp_lanes;
    const int lane = cuda::detail::lane_id();
    const auto& batch = context.batch();
    for (int e = lane; e < context.experts(); e += warp_lanes) mass[e] = 0;
    __syncwarp();
    std::uint32_t base_word = 0;
    for (int token = context.request_begin(request); token < context.request_end(request); ++token) {
      if (!context.is_valid(token)) continue;
      const auto top = context.top_experts(token);
      for (int j = 0; j < stage.k0; ++j) {
        if ((top[j] >> 5) == lane) base_word |= 1u << (top[j] & 31);
      }
      if (stage.gate == column_mass::sparse) {
        if (lane < context.top_k()) {
          atomicAdd(reinterpret_cast<unsigned long long*>(mass + top[lane]),
                    static_cast<unsigned long long>(to_fixed_mass(context.top_gates(token)[lane])));
        }
      } else {
        const auto* row = batch.scores.row(token);
        for (int e = lane; e < context.experts(); e += warp_lanes) {
          mass[e] += to_fixed_mass(probability_of(batch.mode, to_float(row[e]), context.stats(token)));
        }
      }
      __syncwarp();
    }
    return base_word;
  }

  /// m_r rounds of a warp argmax over `heavier_expert` order, each below the last pick.
  template <class Context>
  __device__ static void add_heaviest(const per_request& stage, Context& context, const std::int64_t* mass,
                                      std::uint32_t base_word) {
    using cuda::detail::full_warp;
    using cuda::detail::warp_lanes;
    const int lane = cuda::detail::lane_id();
    std::int64_t last_mass = -1;
    int last_expert = -1;
    for (int round = 0; round < stage.m_r; ++round) {
      std::int64_t best_mass = 0;
      int best_expert = -1;
      for (int slot = 0; slot * warp_lanes < context.experts(); ++slot) {  // uniform trip count: shuffles
        const bool in_base = (__shfl_sync(full_warp, base_word, slot) >> lane) & 1u;
        const int e = lane + slot * warp_lanes;
        if (e >= context.experts()) continue;
        const std::int64_t m = mass[e];
        const bool below_last = last_expert < 0 || heavier_expert(last_mass, last_expert, m, e);
        if (m > 0 && !in_base && below_last && (best_expert < 0 || m > best_mass)) {
          best_mass = m;
          best_expert = e;
        }
      }
      for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
        const std::int64_t other_mass = __shfl_xor_sync(full_warp, best_mass, offset);
        const int other_expert = __shfl_xor_sync(full_warp, best_expert, offset);
        const bool other_wins =
            other_expert >= 0 && (best_expert < 0 || heavier_expert(other_mass, other_expert, best_mass, best_expert));
        best_mass = other_wins ? other_mass : best_mass;
        best_expert = other_wins ? other_expert : best_expert;
      }
      if (best_expert < 0) break;
      if (lane == 0) context.selected.insert(best_expert);
      last_mass = best_mass;
      last_expert = best_expert;
    }
  }
};

}  // namespace moe_routing
