#pragma once
/// \file
/// `per_request` on the CPU: every token's top-k0 is guaranteed; each request then adds
/// its own m_r heaviest experts by its own column mass, requests in parallel blocks.

#include <algorithm>
#include <cstdint>

#include "moe_routing/core/expert_order.hpp"
#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/cpu/score_row_path.hpp"
#include "moe_routing/policies/per_request.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, per_request> {
  template <class Context>
  static void apply(const per_request& stage, Context& context) {
    const int e_count = context.experts();
    // Guarantees first (serial, cheap): each token's top-k0 joins S.
    for (int token = 0; token < context.tokens(); ++token) {
      if (context.is_valid(token)) context.guarantee(token, stage.k0);
    }
    if (stage.m_r == 0) return;
    expert_set* chunk_selected = context.scratch_chunk_sets();  // one per parallel block
    for (int b = 0; b < context.chunk_count(); ++b) chunk_selected[b].clear();
    context.parallel_blocks(context.requests(), [&](int request, int chunk) {
      std::int64_t* mass = context.scratch_mass(chunk);
      std::int32_t* candidates = context.scratch_order(chunk);
      std::fill(mass, mass + e_count, 0);
      expert_set base;  // S0_r
      cpu::detail::score_row_path_once path;
      const int begin = context.request_begin(request), end = context.request_end(request);
      for (int token = begin; token < end; ++token) {
        if (!context.is_valid(token)) continue;
        const auto top = context.top_experts(token);
        for (int j = 0; j < stage.k0; ++j) base.insert(top[static_cast<std::size_t>(j)]);
        if (stage.gate == column_mass::sparse) {
          const auto gates = context.top_gates(token);
          for (int j = 0; j < context.top_k(); ++j) {
            mass[top[static_cast<std::size_t>(j)]] += to_fixed_mass(gates[static_cast<std::size_t>(j)]);
          }
        } else {
          context.score_full_row(token, chunk, path.get());
          const float* p = context.scratch_p(chunk);
          for (int e = 0; e < e_count; ++e) mass[e] += to_fixed_mass(p[e]);
        }
      }
      int count = 0;
      for (int e = 0; e < e_count; ++e) {
        if (mass[e] > 0 && !base.contains(e)) candidates[count++] = e;
      }
      const int take = std::min(count, stage.m_r);
      std::partial_sort(candidates, candidates + take, candidates + count,
                        [&](std::int32_t a, std::int32_t b) { return heavier_expert(mass[a], a, mass[b], b); });
      for (int i = 0; i < take; ++i) chunk_selected[chunk].insert(candidates[i]);
    });
    for (int b = 0; b < context.chunk_count(); ++b) context.selected |= chunk_selected[b];
  }
};

}  // namespace moe_routing
