#pragma once
/// \file
/// The lane sums of four 512-bit float vectors at once, for the row kernels' epilogues.
///
/// A row kernel ends each tile with one accumulator per (row, token): 24 of them for the
/// AVX512_BF16 kernel's 4 x 6 tile. Reduced one by one (`_mm512_reduce_add_ps`: four
/// extracts or shuffles and four adds each, in GCC 12), they weigh on short rows: a down-projection tile
/// of 768 columns has only 24 steps of multiply-adds. Interleaving four accumulators first
/// lets each shuffle and add work for all four: 13 instructions where four separate
/// reductions take 32.

#include "moe_routing/core/config.hpp"
#include "moe_routing/cpu/simd/avx512_warnings.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

#if MOE_ROUTING_X86_KERNELS
MOE_ROUTING_AVX512_WARNINGS_OFF

namespace moe_routing::cpu::detail {

/// {sum of a's lanes, of b's, of c's, of d's}. The additions are grouped differently from
/// `_mm512_reduce_add_ps` (float sums may differ in the last bits, as any order would).
MOE_ROUTING_TARGET_AVX512 inline __m128 four_lane_sums(__m512 a, __m512 b, __m512 c, __m512 d) noexcept {
  // Within each 128-bit lane: {a0 + a2, b0 + b2, a1 + a3, b1 + b3}, and the same for c, d.
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  // Within each 128-bit lane: {a, b, c, d}, each the sum of that lane's four values.
  const __m512 abcd = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  // The four 128-bit lanes added together.
  const __m256 halves =
      _mm256_add_ps(_mm512_castps512_ps256(abcd), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(abcd), 1)));
  return _mm_add_ps(_mm256_castps256_ps128(halves), _mm256_extractf128_ps(halves, 1));
}

/// `sums[i][t]` = the sum of `acc[i][t]`'s lanes, for a row kernel's tile of a multiple of four
/// rows (`block_rows`, `wide_block_rows`).
template <int Rows, int Tokens, int SumsTokens>
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX512 inline void store_lane_sums(const __m512 (&acc)[Rows][Tokens],
                                                                             float (&sums)[Rows][SumsTokens]) noexcept {
  static_assert(Tokens <= SumsTokens);
  static_assert(Rows % 4 == 0, "four rows at a time");
  MOE_ROUTING_UNROLL
  for (int r = 0; r < Rows; r += 4) {
    MOE_ROUTING_UNROLL
    for (int t = 0; t < Tokens; ++t) {
      alignas(16) float rows[4];
      _mm_store_ps(rows, four_lane_sums(acc[r][t], acc[r + 1][t], acc[r + 2][t], acc[r + 3][t]));
      MOE_ROUTING_UNROLL
      for (int i = 0; i < 4; ++i) sums[r + i][t] = rows[i];
    }
  }
}

}  // namespace moe_routing::cpu::detail

MOE_ROUTING_AVX512_WARNINGS_ON
#endif
