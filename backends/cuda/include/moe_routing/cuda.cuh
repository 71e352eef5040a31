#pragma once
/// \file
/// The CUDA backend's routing: `moe_routing::cuda::route` on device pointers (CUDA runtime,
/// CUB). The reference executor on cuBLAS is `moe_routing/cuda/executor/moe_forward.cuh`.

#include "moe_routing/cuda/cuda_status.cuh"
#include "moe_routing/cuda/route.cuh"
#include "moe_routing/cuda/workspace.cuh"
#include "moe_routing/moe_routing.hpp"
