#pragma once
/// \file
/// Redundant experts on the CUDA backend: after the plan is written and padded, one thread
/// dispatches every assignment to a physical slot (`dispatch_to_replicas`, the code the CPU
/// backend runs) into `plan.physical_ids` when given, and the device loads become the
/// physical slots dispatched to. Sequential on purpose: `least_loaded` depends on every
/// earlier assignment, and n k is small in decode. The map's arrays must be device memory.

#include <cstdint>

#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/replica_map.hpp"
#include "moe_routing/cuda/stages/block_context.cuh"

namespace moe_routing::cuda::detail {

/// Every thread of the block calls it; `inputs_usable` is false after any device-side input
/// error (`inputs_valid`), a bad map among them: nothing is then dispatched (and
/// `plan.physical_ids` is not written), so a bad map is never read through.
template <class Call>
__device__ void dispatch_to_replicas_on_block(const Call& c, block_sets& sh, bool inputs_usable) {
  if (!c.batch.has_replicas() || !inputs_usable) return;
  __syncthreads();  // the rows and their padding are written
  if (threadIdx.x == 0) {
    std::int32_t* loads = c.plan.device_loads != nullptr ? c.plan.device_loads : sh.scratch;
    expert_set used;
    c.plan.summary->max_device_load =
        dispatch_to_replicas(c.batch.replicas, c.plan.ids, c.plan.counts, c.batch.tokens(), c.plan.top_k,
                             c.plan.physical_ids, loads, sh.cursor, used);
  }
  __syncthreads();
}

}  // namespace moe_routing::cuda::detail
