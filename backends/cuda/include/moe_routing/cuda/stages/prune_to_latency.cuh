#pragma once
/// \file
/// `prune_to_latency` on one thread block: `prune_to_budget`'s search with the latency
/// model as the fit (`cuda/stages/prune_to_budget.cuh`).

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/prune_to_budget.cuh"
#include "moe_routing/policies/prune_to_latency.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, prune_to_latency> {
  template <class Context>
  __device__ static void apply(const prune_to_latency& stage, Context& context) {
    cuda::detail::guarantee_deepest_fitting(stage, context);
  }
};

}  // namespace moe_routing
