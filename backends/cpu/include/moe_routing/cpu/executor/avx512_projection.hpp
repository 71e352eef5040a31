#pragma once
/// \file
/// The AVX-512 row kernel for weights of any type: 16 weights per register widened to float
/// (bfloat16 by a shift, float16 by vcvtph2ps), multiplied into float accumulators, one per
/// (row, token) of the tile, summed four at a time at the row's end (`four_lane_sums.hpp`). A
/// row's last partial 16 columns are read with masked loads, so there is no scalar tail.
/// Compiled for AVX-512 by target attributes (`isa_targets.hpp`), whatever the build targets.

#include <cstddef>
#include <type_traits>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/row_sweep.hpp"
#include "moe_routing/cpu/simd/avx512_warnings.hpp"
#include "moe_routing/cpu/simd/four_lane_sums.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"
#include "moe_routing/cpu/simd/keep_in_register.hpp"
#include "moe_routing/cpu/simd/lane_masks.hpp"

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

/// One step of a tile: the 16 columns from `c` on that `valid` holds.
template <int Tokens, prefetch_mode Mode, class Weight>
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX512 inline void avx512_step(__m512 (&acc)[block_rows][Tokens],
                                                                         const row_block<Weight>& block, int c,
                                                                         int cols, const float* __restrict x,
                                                                         std::ptrdiff_t x_stride,
                                                                         __mmask16 valid) noexcept {
  prefetch_step<Mode>(block, c, cols);
  __m512 w[block_rows];
  MOE_ROUTING_UNROLL
  for (int i = 0; i < block_rows; ++i) w[i] = load_widened(block.rows[i] + c, valid);
  MOE_ROUTING_UNROLL
  for (int t = 0; t < Tokens; ++t) {
    __m512 xt = _mm512_maskz_loadu_ps(valid, x + t * x_stride + c);
    keep_in_register(xt);  // one load for the block's rows, not one per multiply-add
    MOE_ROUTING_UNROLL
    for (int i = 0; i < block_rows; ++i) acc[i][t] = _mm512_fmadd_ps(w[i], xt, acc[i][t]);
  }
}

/// A tile: every whole step of 16 columns, then the row's last partial step masked.
template <int Tokens, prefetch_mode Mode, class Weight>
MOE_ROUTING_TARGET_AVX512 void avx512_tile(const row_block<Weight>& block, int cols, const float* __restrict x,
                                           std::ptrdiff_t x_stride, tile_sums& sums) noexcept {
  constexpr int lanes = 16;
  __m512 acc[block_rows][Tokens];
  MOE_ROUTING_UNROLL
  for (auto& row : acc) {
    MOE_ROUTING_UNROLL
    for (auto& a : row) a = _mm512_setzero_ps();
  }
  const int whole = cols - cols % lanes;
  for (int c = 0; c < whole; c += lanes) avx512_step<Tokens, Mode>(acc, block, c, cols, x, x_stride, __mmask16(0xffff));
  if (whole < cols) {
    avx512_step<Tokens, Mode>(acc, block, whole, cols, x, x_stride, first_lanes<__mmask16>(cols - whole));
  }
  store_lane_sums(acc, sums);
}

template <int Tokens, class Weight>
MOE_ROUTING_TARGET_AVX512 void avx512_tile(const row_block<Weight>& block, int cols, const float* __restrict x,
                                           std::ptrdiff_t x_stride, tile_sums& sums) noexcept {
  with_prefetch_mode(block,
                     [&](auto mode) { avx512_tile<Tokens, decltype(mode)::value>(block, cols, x, x_stride, sums); });
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
