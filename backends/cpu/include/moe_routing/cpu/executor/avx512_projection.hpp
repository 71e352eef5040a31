#pragma once
/// \file
/// The AVX-512 row kernel for weights of any type: 16 weights per register widened to float
/// (bfloat16 by a shift, float16 by vcvtph2ps), multiplied into float accumulators, one per
/// (row, token) of the tile, each combined with `_mm512_reduce_add_ps` at the row's end. A
/// row's last partial 16 columns are read with masked loads, so there is no scalar tail.
/// Compiled for AVX-512 by target attributes (`isa_targets.hpp`), whatever the build targets.

#include <cstddef>
#include <type_traits>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/row_sweep.hpp"
#include "moe_routing/cpu/simd/avx512_warnings.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

#if MOE_ROUTING_X86_KERNELS
MOE_ROUTING_AVX512_WARNINGS_OFF

namespace moe_routing::cpu {

constexpr int tile_tokens_of(avx512_kernel) noexcept { return 4; }

namespace detail {

/// The 16 weights at `w` whose lanes are set in `lanes`, widened to float (zero elsewhere).
template <class Weight>
MOE_ROUTING_TARGET_AVX512 inline __m512 load_widened(const Weight* w, __mmask16 lanes) noexcept {
  if constexpr (std::is_same_v<Weight, float>) {
    return _mm512_maskz_loadu_ps(lanes, w);
  } else if constexpr (std::is_same_v<Weight, bfloat16>) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, w));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  } else {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, w));
  }
}

template <int Tokens, class Weight>
MOE_ROUTING_TARGET_AVX512 void avx512_tile(const row_block<Weight>& block, int cols, const float* __restrict x,
                                           std::ptrdiff_t x_stride, tile_sums& sums) noexcept {
  constexpr int lanes = 16;
  __m512 acc[block_rows][Tokens];
  MOE_ROUTING_UNROLL
  for (auto& row : acc) {
    MOE_ROUTING_UNROLL
    for (auto& a : row) a = _mm512_setzero_ps();
  }
  for (int c = 0; c < cols; c += lanes) {
    const __mmask16 valid = cols - c >= lanes ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (cols - c)) - 1u);
    prefetch_step(block, c, cols);
    __m512 w[block_rows];
    MOE_ROUTING_UNROLL
    for (int i = 0; i < block_rows; ++i) w[i] = load_widened(block.rows[i] + c, valid);
    MOE_ROUTING_UNROLL
    for (int t = 0; t < Tokens; ++t) {
      const __m512 xt = _mm512_maskz_loadu_ps(valid, x + t * x_stride + c);
      MOE_ROUTING_UNROLL
      for (int i = 0; i < block_rows; ++i) acc[i][t] = _mm512_fmadd_ps(w[i], xt, acc[i][t]);
    }
  }
  MOE_ROUTING_UNROLL
  for (int i = 0; i < block_rows; ++i) {
    MOE_ROUTING_UNROLL
    for (int t = 0; t < Tokens; ++t) sums[i][t] = _mm512_reduce_add_ps(acc[i][t]);
  }
}

}  // namespace detail

/// Sums of the block's rows with `tokens` (1..4) float activation rows.
template <class Weight>
MOE_ROUTING_TARGET_AVX512 void multiply_tile(avx512_kernel, const row_block<Weight>& block, int cols, const float* x,
                                             std::ptrdiff_t x_stride, int tokens, tile_sums& sums) noexcept {
  switch (tokens) {
    case 1:
      return detail::avx512_tile<1>(block, cols, x, x_stride, sums);
    case 2:
      return detail::avx512_tile<2>(block, cols, x, x_stride, sums);
    case 3:
      return detail::avx512_tile<3>(block, cols, x, x_stride, sums);
    default:
      return detail::avx512_tile<4>(block, cols, x, x_stride, sums);
  }
}

}  // namespace moe_routing::cpu

MOE_ROUTING_AVX512_WARNINGS_ON
#endif
