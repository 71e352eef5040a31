#pragma once
/// \file
/// The largest problem an executor workspace serves (CPU and CUDA executors).

namespace moe_routing {

struct executor_shape {
  int max_tokens = 0;
  int top_k = 0;
  int experts = 0;
  int hidden = 0;               ///< d
  int intermediate = 0;         ///< h
  int shared_experts = 0;
  int shared_intermediate = 0;  ///< 0 = h
  /// bfloat16 weights only: round x and the SwiGLU activations to bfloat16 before they are
  /// multiplied (bf16 x bf16 products, float32 sums, as engines compute). false keeps them
  /// float32: more exact, and never on AMX tiles. The CUDA executor always rounds (its
  /// cuBLAS GEMMs take both operands in the weight type).
  bool bf16_activations = true;
};

}  // namespace moe_routing
