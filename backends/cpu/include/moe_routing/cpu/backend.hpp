#pragma once
/// \file
/// The CPU backend's tag: `stage_executor<cpu_backend, Stage>` runs a stage on the CPU.

namespace moe_routing {

struct cpu_backend {};

}  // namespace moe_routing
