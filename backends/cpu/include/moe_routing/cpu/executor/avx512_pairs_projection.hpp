#pragma once
/// \file
/// The AVX-512 row kernel for bfloat16 weights on CPUs without AVX512_BF16 (Skylake-SP, Cascade
/// Lake, Ice Lake, Tiger and Rocket Lake), and on every AVX-512 CPU for bfloat16 weights whose
/// activations are not rounded to bfloat16: float activations in AVX-512's pair order
/// (`pair_order.hpp`, groups of 32 columns), float multiply-adds; the products `avx512_kernel`
/// forms for these weights, summed in another order.
///
/// One 64-byte load holds 32 bfloat16 columns of a row as 16 (even, odd) pairs; a shift left by
/// 16 makes floats of the even columns, a mask of the top halves floats of the odd ones, and the
/// activations in pair order meet them lane for lane: two instructions to widen 32 weights.
/// `avx512_kernel` widens 16 with two (vpmovzxwd and a shift), both on the ports that run the
/// multiply-adds. On Ice Lake (two 512-bit FMA ports) its 4-token tile in cache ran 60 G
/// multiply-adds per second, 0.66 of the core's 91 G: one widening instruction for every two
/// multiply-adds, as if those ports alone set the pace (docs/benchmarks/executor_icelake.md).
///
/// A tile is 4 rows by up to 4 tokens; with one or two tokens, even and odd columns go to
/// separate accumulators, so enough chains of multiply-adds are in flight to keep both ports
/// busy. The loop takes 32 columns (a 64-byte line of each row) per step with one prefetch per
/// row; the columns past the last whole 32 stay in place and are widened and masked as
/// `avx512_kernel` does (16 columns and one prefetch per row a step). Compiled for AVX-512 by
/// target attributes (`isa_targets.hpp`).

#include <cstddef>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/avx512_projection.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/pair_order.hpp"
#include "moe_routing/cpu/executor/row_sweep.hpp"
#include "moe_routing/cpu/simd/avx512_warnings.hpp"
#include "moe_routing/cpu/simd/four_lane_sums.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"
#include "moe_routing/cpu/simd/keep_in_register.hpp"
#include "moe_routing/cpu/simd/lane_masks.hpp"

#if MOE_ROUTING_X86_KERNELS
MOE_ROUTING_AVX512_WARNINGS_OFF

namespace moe_routing::cpu {

constexpr int tile_tokens_of(avx512_pairs_kernel) noexcept { return 4; }

namespace detail {

/// 32 columns of a weight row as floats: the even columns and the odd ones.
struct wide_split_columns {
  __m512 even;
  __m512 odd;
};

[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX512 inline wide_split_columns split_wide_pairs(
    const bfloat16* p, __m512i top_halves) noexcept {
  __m512i v = _mm512_loadu_si512(p);
  keep_in_register(v);  // one load for both halves
  return {_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), _mm512_castsi512_ps(_mm512_and_si512(v, top_halves))};
}

/// One group of 32 columns from `c` on: each row's split weights times each token's activations
/// (loaded once for the block's rows), into `acc[chain][row][token]`: chain 0 the even columns
/// and, with two chains, 1 the odd ones.
template <int Tokens, int Chains, prefetch_mode Mode>
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX512 inline void wide_pair_step(__m512 (&acc)[Chains][block_rows][Tokens],
                                                                            const row_block<bfloat16>& block, int c,
                                                                            int cols, const float* __restrict x,
                                                                            std::ptrdiff_t x_stride,
                                                                            __m512i top_halves) noexcept {
  constexpr int half = wide_pair_group_columns / 2;
  prefetch_step<Mode>(block, c, cols);
  __m512 even_x[Tokens], odd_x[Tokens];
  MOE_ROUTING_UNROLL
  for (int t = 0; t < Tokens; ++t) {
    even_x[t] = _mm512_loadu_ps(x + t * x_stride + c);
    odd_x[t] = _mm512_loadu_ps(x + t * x_stride + c + half);
    keep_in_register(even_x[t]);  // not folded into each multiply-add
    keep_in_register(odd_x[t]);
  }
  MOE_ROUTING_UNROLL
  for (int i = 0; i < block_rows; ++i) {
    const wide_split_columns w = split_wide_pairs(block.rows[i] + c, top_halves);
    MOE_ROUTING_UNROLL
    for (int t = 0; t < Tokens; ++t) {
      acc[0][i][t] = _mm512_fmadd_ps(w.even, even_x[t], acc[0][i][t]);
      acc[Chains - 1][i][t] = _mm512_fmadd_ps(w.odd, odd_x[t], acc[Chains - 1][i][t]);
    }
  }
}

template <int Tokens, prefetch_mode Mode>
MOE_ROUTING_TARGET_AVX512 void wide_pair_tile(const row_block<bfloat16>& block, int cols, const float* __restrict x,
                                              std::ptrdiff_t x_stride, tile_sums& sums) noexcept {
  constexpr int group = wide_pair_group_columns, lanes = 16;
  constexpr int chains = Tokens <= 2 ? 2 : 1;
  const __m512i top_halves = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 acc[chains][block_rows][Tokens];
  MOE_ROUTING_UNROLL
  for (auto& chain : acc) {
    MOE_ROUTING_UNROLL
    for (auto& row : chain) {
      MOE_ROUTING_UNROLL
      for (auto& a : row) a = _mm512_setzero_ps();
    }
  }
  const int whole = cols - cols % group;
  for (int c = 0; c < whole; c += group)
    wide_pair_step<Tokens, chains, Mode>(acc, block, c, cols, x, x_stride, top_halves);
  // The rest, in place: 16 columns at a time, the last masked.
  for (int c = whole; c < cols; c += lanes)
    avx512_step<Tokens, Mode>(acc[0], block, c, cols, x, x_stride, first_lanes<__mmask16>(cols - c));
  if constexpr (chains == 2) {
    MOE_ROUTING_UNROLL
    for (int i = 0; i < block_rows; ++i) {
      MOE_ROUTING_UNROLL
      for (int t = 0; t < Tokens; ++t) acc[0][i][t] = _mm512_add_ps(acc[0][i][t], acc[1][i][t]);
    }
  }
  store_lane_sums(acc[0], sums);
}

template <int Tokens>
MOE_ROUTING_TARGET_AVX512 void wide_pair_tile(const row_block<bfloat16>& block, int cols, const float* __restrict x,
                                              std::ptrdiff_t x_stride, tile_sums& sums) noexcept {
  with_prefetch_mode(block,
                     [&](auto mode) { wide_pair_tile<Tokens, decltype(mode)::value>(block, cols, x, x_stride, sums); });
}

}  // namespace detail

/// Sums of the block's rows with `tokens` (1..4) float activation rows in AVX-512's pair order.
MOE_ROUTING_TARGET_AVX512 inline void multiply_tile(avx512_pairs_kernel, const row_block<bfloat16>& block, int cols,
                                                    const float* x, std::ptrdiff_t x_stride, int tokens,
                                                    tile_sums& sums) noexcept {
  switch (tokens) {
    case 1:
      return detail::wide_pair_tile<1>(block, cols, x, x_stride, sums);
    case 2:
      return detail::wide_pair_tile<2>(block, cols, x, x_stride, sums);
    case 3:
      return detail::wide_pair_tile<3>(block, cols, x, x_stride, sums);
    default:
      return detail::wide_pair_tile<4>(block, cols, x, x_stride, sums);
  }
}

}  // namespace moe_routing::cpu

MOE_ROUTING_AVX512_WARNINGS_ON
#endif
