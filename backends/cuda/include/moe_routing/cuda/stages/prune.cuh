#pragma once
/// \file
/// `prune` on one thread block: each valid token's baseline b_i (`prune::baseline_size`) is
/// guaranteed and joins S.

#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/prune.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, prune> {
  template <class Context>
  __device__ static void apply(const prune& stage, Context& context) {
    cuda::detail::for_each_thread_item(context.tokens(), [&](int token) {
      if (!context.is_valid(token)) return;
      context.guarantee(
          token, stage.baseline_size(context.top_probabilities(token).data(), context.stats(token).candidate_total));
    });
  }
};

}  // namespace moe_routing
