#pragma once
/// \file
/// `per_request` on one thread block (XShare alg. 3): every token's top-k0 is guaranteed;
/// then one warp per request at a time holds S0_r as a bitset (lane l holds word l), sums
/// the request's own column mass in a scratch row, and adds its m_r heaviest experts
/// outside S0_r by warp argmax, in `heavier_expert` order. Sparse mass touches k entries
/// per token, so a request costs O(tokens * k), not O(E) (n x E at n = 16384 without
/// segments, where every token is a request).

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
    const bool sparse = stage.gate == column_mass::sparse;
    if (sparse) {
      // The scratch rows start at zero once per call; each request then clears only the
      // entries its tokens touched (k per token), not the whole row.
      std::int64_t* rows = context.scratch_request_mass(0);
      cuda::detail::for_each_thread_item(cuda::request_warps * context.experts(), [&](int i) { rows[i] = 0; });
      __syncthreads();
    }
    const int warp = static_cast<int>(threadIdx.x) / cuda::detail::warp_lanes;
    const int warps = static_cast<int>(blockDim.x) / cuda::detail::warp_lanes;
    std::int64_t* mass = context.scratch_request_mass(warp);
    for (int request = warp; request < context.requests(); request += warps) {
      bool any_valid = false;
      const std::uint32_t base_word = sum_request_mass(stage, context, request, mass, any_valid);
      if (any_valid) add_heaviest(stage, context, request, mass, base_word);
      if (sparse) clear_touched(context, request, mass);
      __syncwarp();
    }
  }

 private:
  /// The request's column mass into `mass`; returns this lane's word of S0_r (experts
  /// 32 lane .. 32 lane + 31). Sparse gates are added to a zeroed row; dense ones overwrite
  /// the row at the request's first valid token and add after it (no clearing pass).
  template <class Context>
  __device__ static std::uint32_t sum_request_mass(const per_request& stage, Context& context, int request,
                                                   std::int64_t* mass, bool& any_valid) {
    using cuda::detail::warp_lanes;
    const int lane = cuda::detail::lane_id();
    const auto& batch = context.batch();
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
          const std::int64_t m = to_fixed_mass(probability_of(batch.mode, to_float(row[e]), context.stats(token)));
          mass[e] = any_valid ? mass[e] + m : m;
        }
      }
      any_valid = true;
      __syncwarp();
    }
    return base_word;
  }

  /// Sets the entries the request's sparse gates added to back to zero.
  template <class Context>
  __device__ static void clear_touched(Context& context, int request, std::int64_t* mass) {
    const int lane = cuda::detail::lane_id();
    __syncwarp();
    for (int token = context.request_begin(request); token < context.request_end(request); ++token) {
      if (context.is_valid(token) && lane < context.top_k()) mass[context.top_experts(token)[lane]] = 0;
    }
  }

  /// m_r rounds of a warp argmax over `heavier_expert` order, each below the last pick. The
  /// candidates are every expert with dense mass, and only the request's top-k experts
  /// with sparse mass (no other expert has any).
  template <class Context>
  __device__ static void add_heaviest(const per_request& stage, Context& context, int request, const std::int64_t* mass,
                                      std::uint32_t base_word) {
    using cuda::detail::full_warp;
    using cuda::detail::warp_lanes;
    const int lane = cuda::detail::lane_id();
    const bool sparse = stage.gate == column_mass::sparse;
    std::int64_t last_mass = -1;
    int last_expert = -1;
    for (int round = 0; round < stage.m_r; ++round) {
      std::int64_t best_mass = 0;
      int best_expert = -1;
      // Every lane calls it with its candidate (or none) in step: it shuffles.
      const auto consider = [&](int e, bool has_candidate) {
        const int word = __shfl_sync(full_warp, base_word, has_candidate ? e >> 5 : 0);
        if (!has_candidate || ((word >> (e & 31)) & 1u) != 0) return;  // in S0_r
        const std::int64_t m = mass[e];
        const bool below_last = last_expert < 0 || heavier_expert(last_mass, last_expert, m, e);
        if (m > 0 && below_last && (best_expert < 0 || heavier_expert(m, e, best_mass, best_expert))) {
          best_mass = m;
          best_expert = e;
        }
      };
      if (sparse) {
        for (int token = context.request_begin(request); token < context.request_end(request); ++token) {
          if (!context.is_valid(token)) continue;  // uniform: the token is the warp's
          const bool mine = lane < context.top_k();
          consider(mine ? context.top_experts(token)[lane] : 0, mine);
        }
      } else {
        for (int slot = 0; slot * warp_lanes < context.experts(); ++slot) {  // uniform trip count
          const int e = lane + slot * warp_lanes;
          consider(e, e < context.experts());
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
