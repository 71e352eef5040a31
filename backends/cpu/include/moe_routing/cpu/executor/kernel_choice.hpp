#pragma once
/// \file
/// Which projection kernel a call runs, decided once per call at run time: the highest
/// level the CPU runs (`cpu_isa()`), at most the workspace's forced level, and at most
/// `avx512` unless the products are bfloat16 x bfloat16 (bfloat16 weights with
/// `bf16_activations`), the only products the AVX512_BF16 and AMX kernels form. Then
/// `with_projection_kernel` hands the body the tag of the level and weight type
/// (`kernel_tags.hpp`).

#include <string>
#include <type_traits>

#include "moe_routing/core/error.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/amx_projection.hpp"
#include "moe_routing/cpu/executor/avx2_bf16_projection.hpp"
#include "moe_routing/cpu/executor/avx2_projection.hpp"
#include "moe_routing/cpu/executor/avx512_bf16_projection.hpp"
#include "moe_routing/cpu/executor/avx512_pairs_projection.hpp"
#include "moe_routing/cpu/executor/avx512_projection.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/portable_projection.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"

namespace moe_routing::cpu {

/// The level a call runs at, below `ceiling`, with or without bf16 x bf16 products.
inline isa_level projection_level(isa_level ceiling, bool bf16_products) {
  if (!MOE_ROUTING_X86_KERNELS) return isa_level::portable;
  isa_level level = static_cast<int>(ceiling) < static_cast<int>(cpu_isa()) ? ceiling : cpu_isa();
  if (!bf16_products && static_cast<int>(level) > static_cast<int>(isa_level::avx512)) level = isa_level::avx512;
  if (level == isa_level::amx && !amx::available()) level = isa_level::avx512_bf16;
  return level;
}

/// The highest level an executor call can run here (bfloat16 weights and activations).
inline isa_level best_projection_level() { return projection_level(isa_level::amx, true); }

/// Throws routing_error naming the level when this machine does not run it (the CPU,
/// `MOE_ROUTING_CPU_ISA`, or for `amx` Linux's grant of the tile data): a forced kernel must
/// not quietly become another.
inline void check_runnable(isa_level level) {
  if (!cpu_runs(level) || (level == isa_level::amx && !amx::available())) {
    throw routing_error(errc::invalid_parameter, std::string("executor kernel = ") + name_of(level) +
                                                     ": this CPU runs at most " + name_of(best_projection_level()));
  }
}

/// Calls `body(tag)` with the tag of `level` (from `projection_level`, so a bfloat16 level
/// only comes with bfloat16 weights) for `Weight`: at `avx2` and `avx512`, bfloat16 weights take
/// the pair-order kernels (`avx2_bf16_kernel`, `avx512_pairs_kernel`).
template <class Weight, class Body>
void with_projection_kernel(isa_level level, Body&& body) {
#if MOE_ROUTING_X86_KERNELS
  if constexpr (std::is_same_v<Weight, bfloat16>) {
#if MOE_ROUTING_HAS_AMX
    if (level == isa_level::amx) return body(amx_kernel{});
#endif
    if (level == isa_level::avx512_bf16) return body(avx512_bf16_kernel{});
  }
  if (level == isa_level::avx512) {
    if constexpr (std::is_same_v<Weight, bfloat16>) {
      return body(avx512_pairs_kernel{});
    } else {
      return body(avx512_kernel{});
    }
  }
  if (level == isa_level::avx2) {
    if constexpr (std::is_same_v<Weight, bfloat16>) {
      return body(avx2_bf16_kernel{});
    } else {
      return body(avx2_kernel{});
    }
  }
#endif
  (void)level;
  body(portable_kernel{});
}

}  // namespace moe_routing::cpu
