#pragma once
/// \file
/// The AVX2 row kernel for bfloat16 weights (AVX2 + FMA): float activations in pair order
/// (`pair_order.hpp`), float multiply-adds; the same products as `avx2_kernel` forms for these
/// weights, in other sums, with fewer instructions per weight.
///
/// A bfloat16 value is the top half of a float's bits, so one 32-byte load of 16 bfloat16
/// columns holds 8 pairs, and two instructions make floats of them: a shift left by 16 gives
/// the even columns, a mask of the top halves the odd ones. The activations, in pair order,
/// meet them lane for lane, so each (row, token) sum takes two multiply-adds per 16 columns.
/// `avx2_kernel` widens 8 weights with vpmovzxwd and a shift, two instructions on the pipes
/// that also do the multiply-adds on Zen 3 for every 8 weights; here one shift serves 16 (the
/// mask runs on any pipe). Measured in cache on Zen 3 (`tile/avx2_bf16` against `tile/avx2` and
/// `compute/fma_peak_one_core` in the executor benchmark; docs/benchmarks/executor_zen3.md):
/// 0.78 of the core's multiply-add peak at two tokens per tile, against 0.50.
///
/// A tile is 4 rows by up to 2 tokens: 8 accumulators, the tile's activations for the 16
/// columns (2 registers a token) and one row's split weights, in the 16 vector registers. With
/// one token, even and odd columns go to separate accumulators, so 8 chains of multiply-adds
/// (4 cycles each on Zen 3) keep both pipes busy. The loop takes 32 columns (a 64-byte line of
/// each row) per step; the columns past the last whole 16 are added one by one. Compiled for AVX2 by target attributes
/// (`isa_targets.hpp`).

#include <cstddef>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/avx2_projection.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/pair_order.hpp"
#include "moe_routing/cpu/executor/row_sweep.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"
#include "moe_routing/cpu/simd/keep_in_register.hpp"

#if MOE_ROUTING_X86_KERNELS
namespace moe_routing::cpu {

constexpr int tile_tokens_of(avx2_bf16_kernel) noexcept { return 2; }

namespace detail {

/// 16 columns of a weight row from `c` on, as floats: the even columns and the odd ones.
struct split_columns {
  __m256 even;
  __m256 odd;
};

[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX2 inline split_columns split_pairs(const bfloat16* p,
                                                                                __m256 top_halves) noexcept {
  __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  keep_in_register(v);  // one load for both halves: GCC 12 otherwise loads again for the mask
  return {_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), _mm256_and_ps(_mm256_castsi256_ps(v), top_halves)};
}

/// The 16 columns from `c` on (one group of pair order): each row's split weights times each
/// token's activations, into `acc[row][token][chain]` (chain 0 the even columns and, with two
/// chains, 1 the odd ones). The activations are loaded once into registers for all 4 rows: as
/// operands of each multiply-add they took 20 loads per 16 multiply-adds, and with the
/// prefetches the load ports, not the multiply-adds, set the pace; held in registers, a
/// streaming tile takes 0.65-0.74 of that time and a gate/up item 0.72-0.89 (Zen 3,
/// docs/benchmarks/executor_zen3.md).
template <int Tokens, int Chains>
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX2 inline void pair_group_step(__m256 (&acc)[block_rows][Tokens][Chains],
                                                                           const row_block<bfloat16>& block, int c,
                                                                           const float* __restrict x,
                                                                           std::ptrdiff_t x_stride,
                                                                           __m256 top_halves) noexcept {
  constexpr int half = pair_group_columns / 2;
  __m256 even_x[Tokens], odd_x[Tokens];
  MOE_ROUTING_UNROLL
  for (int t = 0; t < Tokens; ++t) {
    even_x[t] = _mm256_loadu_ps(x + t * x_stride + c);
    odd_x[t] = _mm256_loadu_ps(x + t * x_stride + c + half);
    keep_in_register(even_x[t]);  // not folded into each multiply-add
    keep_in_register(odd_x[t]);
  }
  MOE_ROUTING_UNROLL
  for (int i = 0; i < block_rows; ++i) {
    const split_columns w = split_pairs(block.rows[i] + c, top_halves);
    MOE_ROUTING_UNROLL
    for (int t = 0; t < Tokens; ++t) {
      acc[i][t][0] = _mm256_fmadd_ps(w.even, even_x[t], acc[i][t][0]);
      acc[i][t][Chains - 1] = _mm256_fmadd_ps(w.odd, odd_x[t], acc[i][t][Chains - 1]);
    }
  }
}

/// `pair_group_step` with its prefetches, `distance` bytes on (`prefetch_distance`): in the
/// streaming pass, one per row for every 8 columns, four for each 64 bytes, `stream_ahead_bytes`
/// ahead (`prefetch_lines`; the run-ahead pass asks once per 64 bytes). The distance is chosen at
/// the first column of the kernel's 32-column step: on a row whose width is not a multiple of 32,
/// the step that straddles the point that distance before the row's end asks for up to 48 bytes
/// past the row (the next row in memory) instead of the next block's first line: a hint lost, no
/// value changed. Measured on Zen 3 against one per line: 0.92 of the layer's time at n = 1, 4
/// and 16 with two, 0.97 of that with four (docs/benchmarks/executor_zen3.md). Our reading: the
/// core drops a software prefetch it has no room to queue, and a later one for the same line
/// gets it in.
template <int Tokens, int Chains, prefetch_mode Mode>
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX2 inline void prefetched_pair_group_step(
    __m256 (&acc)[block_rows][Tokens][Chains], const row_block<bfloat16>& block, int c, std::ptrdiff_t distance,
    const float* __restrict x, std::ptrdiff_t x_stride, __m256 top_halves) noexcept {
  prefetch_lines<Mode>(block, c, distance);
  prefetch_lines<Mode>(block, c + pair_group_columns / 2, distance);
  pair_group_step<Tokens, Chains>(acc, block, c, x, x_stride, top_halves);
}

template <int Tokens, prefetch_mode Mode>
MOE_ROUTING_TARGET_AVX2 void avx2_bf16_tile(const row_block<bfloat16>& block, int cols, const float* __restrict x,
                                            std::ptrdiff_t x_stride, tile_sums& sums) noexcept {
  constexpr int line = 2 * pair_group_columns;  // a 64-byte line of each weight row
  constexpr int chains = Tokens == 1 ? 2 : 1;
  const __m256 top_halves = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0xffff0000u)));
  __m256 acc[block_rows][Tokens][chains];
  MOE_ROUTING_UNROLL
  for (auto& row : acc) {
    MOE_ROUTING_UNROLL
    for (auto& token : row) {
      MOE_ROUTING_UNROLL
      for (auto& a : token) a = _mm256_setzero_ps();
    }
  }
  const int lines = cols - cols % line, whole = cols - cols % pair_group_columns;
  for (int c = 0; c < lines; c += line) {
    const std::ptrdiff_t distance = prefetch_distance<Mode>(block, c, cols);  // one for the whole line
    prefetched_pair_group_step<Tokens, chains, Mode>(acc, block, c, distance, x, x_stride, top_halves);
    prefetched_pair_group_step<Tokens, chains, Mode>(acc, block, c + pair_group_columns, distance, x, x_stride,
                                                     top_halves);
  }
  if (lines < whole) {
    prefetched_pair_group_step<Tokens, chains, Mode>(acc, block, lines, prefetch_distance<Mode>(block, lines, cols), x,
                                                     x_stride, top_halves);
  }
  MOE_ROUTING_UNROLL
  for (int i = 0; i < block_rows; ++i) {
    MOE_ROUTING_UNROLL
    for (int t = 0; t < Tokens; ++t) {
      const __m256 both = chains == 1 ? acc[i][t][0] : _mm256_add_ps(acc[i][t][0], acc[i][t][chains - 1]);
      float sum = reduce8(both);
      for (int c = whole; c < cols; ++c) sum += to_float(block.rows[i][c]) * x[t * x_stride + c];
      sums[i][t] = sum;
    }
  }
}

template <int Tokens>
MOE_ROUTING_TARGET_AVX2 void avx2_bf16_tile(const row_block<bfloat16>& block, int cols, const float* __restrict x,
                                            std::ptrdiff_t x_stride, tile_sums& sums) noexcept {
  with_prefetch_mode(block,
                     [&](auto mode) { avx2_bf16_tile<Tokens, decltype(mode)::value>(block, cols, x, x_stride, sums); });
}

}  // namespace detail

/// Sums of the block's rows with `tokens` (1..2) float activation rows in pair order.
MOE_ROUTING_TARGET_AVX2 inline void multiply_tile(avx2_bf16_kernel, const row_block<bfloat16>& block, int cols,
                                                  const float* x, std::ptrdiff_t x_stride, int tokens,
                                                  tile_sums& sums) noexcept {
  if (tokens == 1) return detail::avx2_bf16_tile<1>(block, cols, x, x_stride, sums);
  detail::avx2_bf16_tile<2>(block, cols, x, x_stride, sums);
}

}  // namespace moe_routing::cpu
#endif
