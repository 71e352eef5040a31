#pragma once
/// \file
/// `coverage_greedy` on the CPU: a lazy greedy over a binary heap of marginal gains. F is
/// submodular, so a gain computed for a smaller S bounds the gain now from above: the top
/// of the heap is re-evaluated until the one on top was computed for the current S, and
/// that one is the largest gain (ties to the lower index, `coverage_greedy::better_gain`),
/// exactly the plain greedy's choice. Every gain is summed in fixed point, so the order
/// is the CUDA backend's. The heap, the gains and their stamps live in the workspace's
/// scratch (E int32, one chunk's E int64, max_experts int32): no allocation.
///
/// O(n k^2) for the first gains, then O(n k + votes(e) k^2) for each re-evaluation.

#include <algorithm>
#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/policies/coverage_greedy.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, coverage_greedy> {
  template <class Context>
  static void apply(const coverage_greedy& stage, Context& context) {
    const int wanted = stage.wanted(context.selected.size());
    if (wanted <= 0) return;
    const int uses = stage.effective_k(context.top_k());
    std::int64_t* gain = context.scratch_mass(0);    // gain[e], computed for S as it was at stamp[e]
    std::int32_t* stamp = context.scratch_counts();  // experts added when gain[e] was computed
    std::int32_t* heap = context.scratch_experts();  // experts outside S with a positive gain
    const auto in_selection = [&](int e) { return context.selected.contains(e); };
    const auto gates = [&](int token) {
      return stage.gate == column_mass::dense ? context.top_probabilities(token).data()
                                              : context.top_gates(token).data();
    };

    std::fill(gain, gain + context.experts(), std::int64_t{0});
    std::fill(stamp, stamp + context.experts(), 0);
    for (int token = 0; token < context.tokens(); ++token) {
      if (!context.is_valid(token)) continue;
      coverage_greedy::token_gains(context.top_experts(token).data(), gates(token), context.top_k(), uses, in_selection,
                                   [&](int e, std::int64_t g) { gain[e] += g; });
    }
    int count = 0;
    for (int e = 0; e < context.experts(); ++e) {
      if (gain[e] > 0) heap[count++] = e;  // positive gains come only from experts outside S
    }
    // std::*_heap keep the largest under `below` on top.
    const auto below = [&](int a, int b) { return coverage_greedy::better_gain(gain[b], b, gain[a], a); };
    std::make_heap(heap, heap + count, below);

    int added = 0;
    while (added < wanted && count > 0) {
      std::pop_heap(heap, heap + count, below);
      const int expert = heap[--count];
      if (stamp[expert] == added) {  // fresh: no other gain can beat it
        context.selected.insert(expert);
        ++added;
        continue;
      }
      gain[expert] = gain_of(expert, uses, context, gates);
      stamp[expert] = added;
      if (gain[expert] > 0) {  // a zero gain stays zero as S grows
        heap[count++] = expert;
        std::push_heap(heap, heap + count, below);
      }
    }
  }

 private:
  /// F(S + expert) - F(S) for the current S: the sum of the gains of the tokens that hold
  /// `expert` in their top-k.
  template <class Context, class Gates>
  static std::int64_t gain_of(int expert, int uses, Context& context, Gates& gates) {
    const auto in_selection = [&](int e) { return context.selected.contains(e); };
    std::int64_t total = 0;
    for (int token = 0; token < context.tokens(); ++token) {
      if (!context.is_valid(token)) continue;
      const auto top = context.top_experts(token);
      if (std::find(top.begin(), top.end(), expert) == top.end()) continue;
      coverage_greedy::token_gains(top.data(), gates(token), context.top_k(), uses, in_selection,
                                   [&](int e, std::int64_t g) {
                                     if (e == expert) total += g;
                                   });
    }
    return total;
  }
};

}  // namespace moe_routing
