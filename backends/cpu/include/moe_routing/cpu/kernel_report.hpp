#pragma once
/// \file
/// Which kernels this build runs on this machine, in words: for the benchmarks' reports, for
/// a consumer checking that a build without `-march` still takes the fast paths, and for
/// users asking why a machine is slow. Every choice is made at run time from `cpu_isa()`.

#include <string>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/kernel_choice.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/run_ahead.hpp"
#include "moe_routing/cpu/executor/stream_cache.hpp"
#include "moe_routing/cpu/executor/sweep_order.hpp"
#include "moe_routing/cpu/parallel_backend.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"

namespace moe_routing::cpu {

/// The kernels calls take here, e.g. on Zen 4 "cpu: avx512_bf16; executor: avx512_bf16 for
/// bfloat16 weights with bfloat16 activations, avx512_pairs for other bfloat16 weights, avx512
/// otherwise; weight rows streamed into L2; avx512_bf16 sweeps blocks first; run-ahead: a whole
/// block; routing top-k and mass ranking: avx512; parallel loops: TBB", on Ice Lake "cpu: avx512;
/// executor: avx512_pairs for bfloat16 weights, avx512 otherwise; ...; run-ahead: one row per
/// later pass; ...", or on an AMD CPU with AVX2 "cpu: avx2; executor: avx2_bf16 for bfloat16
/// weights, avx2 otherwise; weight rows streamed into L1; avx2_bf16 sweeps blocks first;
/// run-ahead: a whole block; routing top-k and mass ranking: avx2; parallel loops: TBB", or
/// where one kernel takes every weight type "executor: portable for every weight type". The AMX tiles walk their
/// own order, so an AMX machine's report names no sweep order.
inline std::string kernel_report() {
  const isa_level bf16 = best_projection_level(), other = projection_level(isa_level::amx, false);
  std::string bf16_kernel, float_kernel, bf16_sweeps;
  bool rounds_activations = false;  // only the kernels of bf16 x bf16 products need them rounded
  with_projection_kernel<bfloat16>(bf16, [&](auto kernel) {
    bf16_kernel = decltype(kernel)::name;
    rounds_activations = takes_bf16_activations<decltype(kernel)>;
    // The AMX tiles walk their own order; the row kernels sweep in `sweep_order_of`'s.
    if constexpr (row_kernel<decltype(kernel)>) {
      bf16_sweeps = std::string("; ") + bf16_kernel + " sweeps " +
                    (sweep_order_of(kernel) == sweep_order::blocks_first ? "blocks first" : "token groups first");
    }
  });
  with_projection_kernel<float>(other, [&](auto kernel) { float_kernel = decltype(kernel)::name; });
  // Where bfloat16 weights with float activations take a kernel of their own (the pair-order ones).
  std::string float_bf16_kernel;
  with_projection_kernel<bfloat16>(other, [&](auto kernel) { float_bf16_kernel = decltype(kernel)::name; });
  const std::string other_bf16 = rounds_activations && float_bf16_kernel != float_kernel
                                     ? ", " + float_bf16_kernel + " for other bfloat16 weights"
                                     : "";
  const std::string executor =
      bf16_kernel == float_kernel
          ? bf16_kernel + " for every weight type"
          : bf16_kernel + " for bfloat16 weights" + (rounds_activations ? " with bfloat16 activations" : "") +
                (bf16 == isa_level::amx ? " (d in whole tiles)" : "") + other_bf16 + ", " + float_kernel + " otherwise";
  const char* routing = cpu_runs(isa_level::avx512) ? "avx512" : cpu_runs(isa_level::avx2) ? "avx2" : "portable";
  const char* streamed_into = weight_stream_cache() == stream_cache::l2 ? "L2" : "L1";
  const char* run_ahead =
      weight_run_ahead() == run_ahead_style::one_row_per_pass ? "one row per later pass" : "a whole block";
  return std::string("cpu: ") + name_of(cpu_isa()) + "; executor: " + executor + "; weight rows streamed into " +
         streamed_into + bf16_sweeps + "; run-ahead: " + run_ahead + "; routing top-k and mass ranking: " + routing +
         "; parallel loops: " + parallel_backend_name();
}

}  // namespace moe_routing::cpu
