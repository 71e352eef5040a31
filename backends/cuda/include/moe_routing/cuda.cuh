#pragma once
/// \file
/// The CUDA backend: `moe_routing::cuda::route` on device pointers (link moe_routing::cuda).

#include "moe_routing/cuda/cuda_status.cuh"
#include "moe_routing/cuda/route.cuh"
#include "moe_routing/cuda/workspace.cuh"
#include "moe_routing/moe_routing.hpp"
