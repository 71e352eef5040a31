#pragma once
/// \file
/// The CUDA backend's tag: `stage_executor<cuda_backend, Stage>` runs a stage on the GPU.

namespace moe_routing {

struct cuda_backend {};

}  // namespace moe_routing
