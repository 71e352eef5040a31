#pragma once
/// \file
/// The AVX2 row kernel (AVX2 + FMA + F16C) for weights of any type: 8 weights per register
/// widened to float, float multiply-adds, a tile of 4 rows by 2 tokens (the 16 vector
/// registers hold its 8 accumulators, 4 weight vectors and a token's values), each sum
/// combined across lanes at the row's end and the columns past the last whole 8 added one
/// by one. Compiled for AVX2 by target attributes (`isa_targets.hpp`).

#include <cstddef>
#include <type_traits>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/row_sweep.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"
#include "moe_routing/cpu/simd/keep_in_register.hpp"

#if MOE_ROUTING_X86_KERNELS
namespace moe_routing::cpu {

constexpr int tile_tokens_of(avx2_kernel) noexcept { return 2; }

namespace detail {

/// 8 weights at `w` widened to float.
template <class Weight>
MOE_ROUTING_TARGET_AVX2 inline __m256 load_widened8(const Weight* w) noexcept {
  if constexpr (std::is_same_v<Weight, float>) {
    return _mm256_loadu_ps(w);
  } else if constexpr (std::is_same_v<Weight, bfloat16>) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  }
}

MOE_ROUTING_TARGET_AVX2 inline float reduce8(__m256 v) noexcept {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(quarter, _mm_movehdup_ps(quarter)));
}

template <int Tokens, prefetch_mode Mode, class Weight>
MOE_ROUTING_TARGET_AVX2 void avx2_tile(const row_block<Weight>& block, int cols, const float* __restrict x,
                                       std::ptrdiff_t x_stride, tile_sums& sums) noexcept {
  constexpr int lanes = 8;
  __m256 acc[block_rows][Tokens];
  MOE_ROUTING_UNROLL
  for (auto& row : acc) {
    MOE_ROUTING_UNROLL
    for (auto& a : row) a = _mm256_setzero_ps();
  }
  const int full = cols / lanes * lanes;
  for (int c = 0; c < full; c += lanes) {
    prefetch_step<Mode>(block, c, cols);
    __m256 w[block_rows];
    MOE_ROUTING_UNROLL
    for (int i = 0; i < block_rows; ++i) w[i] = load_widened8(block.rows[i] + c);
    MOE_ROUTING_UNROLL
    for (int t = 0; t < Tokens; ++t) {
      __m256 xt = _mm256_loadu_ps(x + t * x_stride + c);
      keep_in_register(xt);  // one load for the block's rows, not one per multiply-add
      MOE_ROUTING_UNROLL
      for (int i = 0; i < block_rows; ++i) acc[i][t] = _mm256_fmadd_ps(w[i], xt, acc[i][t]);
    }
  }
  MOE_ROUTING_UNROLL
  for (int i = 0; i < block_rows; ++i) {
    MOE_ROUTING_UNROLL
    for (int t = 0; t < Tokens; ++t) {
      float sum = reduce8(acc[i][t]);
      for (int c = full; c < cols; ++c) sum += to_float(block.rows[i][c]) * x[t * x_stride + c];
      sums[i][t] = sum;
    }
  }
}

template <int Tokens, class Weight>
MOE_ROUTING_TARGET_AVX2 void avx2_tile(const row_block<Weight>& block, int cols, const float* __restrict x,
                                       std::ptrdiff_t x_stride, tile_sums& sums) noexcept {
  with_prefetch_mode(block,
                     [&](auto mode) { avx2_tile<Tokens, decltype(mode)::value>(block, cols, x, x_stride, sums); });
}

}  // namespace detail

/// Sums of the block's rows with `tokens` (1..2) float activation rows.
template <class Weight>
MOE_ROUTING_TARGET_AVX2 void multiply_tile(avx2_kernel, const row_block<Weight>& block, int cols, const float* x,
                                           std::ptrdiff_t x_stride, int tokens, tile_sums& sums) noexcept {
  if (tokens == 1) return detail::avx2_tile<1>(block, cols, x, x_stride, sums);
  detail::avx2_tile<2>(block, cols, x, x_stride, sums);
}

}  // namespace moe_routing::cpu
#endif
