#pragma once
/// \file
/// Which kernels this build runs on this machine, in words: for the benchmarks' reports, for
/// a consumer checking that a build without `-march` still takes the fast paths, and for
/// users asking why a machine is slow. Every choice is made at run time from `cpu_isa()`.

#include <string>

#include "moe_routing/cpu/executor/kernel_choice.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"

namespace moe_routing::cpu {

/// The kernels calls take here, e.g. "cpu: avx512_bf16; executor: avx512_bf16 for bfloat16
/// weights with bfloat16 activations, avx512 otherwise; routing top-k and mass ranking:
/// avx512".
inline std::string kernel_report() {
  const isa_level bf16 = best_projection_level(), other = projection_level(isa_level::amx, false);
  const bool vector_routing = cpu_runs(isa_level::avx512);
  return std::string("cpu: ") + name_of(cpu_isa()) + "; executor: " + name_of(bf16) +
         " for bfloat16 weights with bfloat16 activations" + (bf16 == isa_level::amx ? " (d in whole tiles)" : "") +
         ", " + name_of(other) +
         " otherwise; routing top-k and mass ranking: " + (vector_routing ? "avx512" : "portable");
}

}  // namespace moe_routing::cpu
