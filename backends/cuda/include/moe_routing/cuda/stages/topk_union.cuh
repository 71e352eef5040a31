#pragma once
/// \file
/// `topk_union` on one thread block: every valid token's top-k joins S, tokens spread over
/// the threads.

#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/topk_union.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, topk_union> {
  template <class Context>
  __device__ static void apply(const topk_union& stage, Context& context) {
    const int k = stage.effective_k(context.top_k());
    cuda::detail::for_each_thread_item(context.tokens(), [&](int token) {
      if (!context.is_valid(token)) return;
      for (int j = 0; j < k; ++j) context.selected.insert(context.top_experts(token)[j]);
    });
  }
};

}  // namespace moe_routing
