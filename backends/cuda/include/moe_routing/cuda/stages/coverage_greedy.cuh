#pragma once
/// \file
/// `coverage_greedy` on one thread block: the plain greedy with the gains evaluated in
/// parallel. Each round every thread sums its tokens' marginal gains
/// (`coverage_greedy::token_gains`, fixed point, so the sums are exact in any order) into
/// a row of E int64 in the device workspace, the block picks the largest by
/// `coverage_greedy::better_gain` (per thread, per warp by shuffles, then one thread over
/// the warps), and that expert joins S. The CPU's lazy greedy picks the same experts (F is
/// submodular); here a fresh evaluation of every gain costs O(n k^2 / threads) a round,
/// less than one thread re-evaluating a stale heap serially.

#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/coverage_greedy.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, coverage_greedy> {
  template <class Context>
  __device__ static void apply(const coverage_greedy& stage, Context& context) {
    const int wanted = stage.wanted(context.selected.size());
    __syncthreads();  // every thread has counted S before it grows
    if (wanted <= 0) return;
    const int uses = stage.effective_k(context.top_k());
    auto* gain = reinterpret_cast<unsigned long long*>(context.scratch_request_mass(0));
    std::int32_t* warp_best = context.scratch_cursors();
    cuda::detail::block_sets& shared = context.shared();
    const auto in_selection = [&](int e) { return context.selected.contains(e); };
    for (int added = 0; added < wanted; ++added) {
      cuda::detail::for_each_thread_item(context.experts(), [&](int e) { gain[e] = 0; });
      __syncthreads();
      cuda::detail::for_each_thread_item(context.tokens(), [&](int token) {
        if (!context.is_valid(token)) return;
        const float* gates = stage.gate == column_mass::dense ? context.top_probabilities(token).data()
                                                              : context.top_gates(token).data();
        coverage_greedy::token_gains(
            context.top_experts(token).data(), gates, context.top_k(), uses, in_selection,
            [&](int e, std::int64_t g) { atomicAdd(gain + e, static_cast<unsigned long long>(g)); });
      });
      __syncthreads();
      const int best = block_best(context, gain, warp_best);
      if (best < 0) return;  // every thread reads the same winner: no expert adds anything
      if (threadIdx.x == 0) context.selected.insert(best);
      __syncthreads();
    }
  }

 private:
  /// The expert with the largest positive gain (ties to the lower index), or -1. Every
  /// thread of the block calls it and gets the same answer.
  template <class Context>
  __device__ static int block_best(Context& context, const unsigned long long* gain, std::int32_t* warp_best) {
    long long best_gain = 0;
    int best = -1;
    for (int e = static_cast<int>(threadIdx.x); e < context.experts(); e += blockDim.x) {
      const auto g = static_cast<long long>(gain[e]);
      if (g > 0 && (best < 0 || coverage_greedy::better_gain(g, e, best_gain, best))) {
        best_gain = g;
        best = e;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const long long other_gain = __shfl_down_sync(0xffffffffu, best_gain, offset);
      const int other = __shfl_down_sync(0xffffffffu, best, offset);
      if (other >= 0 && (best < 0 || coverage_greedy::better_gain(other_gain, other, best_gain, best))) {
        best_gain = other_gain;
        best = other;
      }
    }
    if ((threadIdx.x & 31u) == 0) warp_best[threadIdx.x / 32] = best;
    __syncthreads();
    cuda::detail::block_sets& shared = context.shared();
    if (threadIdx.x == 0) {
      int winner = -1;
      for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
        const int e = warp_best[w];
        if (e >= 0 && (winner < 0 || coverage_greedy::better_gain(static_cast<long long>(gain[e]), e,
                                                                  static_cast<long long>(gain[winner]), winner))) {
          winner = e;
        }
      }
      shared.count = winner;
    }
    __syncthreads();
    return shared.count;
  }
};

}  // namespace moe_routing
