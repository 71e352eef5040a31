#pragma once
/// \file
/// Group scores (`detail::score_group`: the best s of an expert group, or the two best summed)
/// 8 members at a time, for rows scored with a group limit (DeepSeek-V3's 8 groups of 32). Each
/// lane keeps the best two orders of its members by unsigned maxima and minima; the lanes are
/// then merged in three steps. One member at a time, the two best wait on each other: about
/// 3 dependent operations per member, the largest part of a DeepSeek-V3 row's time after its
/// exps (`scoring/deepseek_v3` in the routing benchmark; docs/benchmarks/routing_avx2.md).
/// The same orders as the scalar form, so the same group keys.

#include <cstdint>

#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

#if MOE_ROUTING_X86_KERNELS
namespace moe_routing::cpu::detail {

/// `score_order` of 8 scores, but for -0, which stays one below +0 (as in `skip_order`): no score
/// lies between them, so a group's best two give the same group key either way.
MOE_ROUTING_TARGET_AVX2 inline __m256i score_orders_avx2(__m256 scores) noexcept {
  const __m256i bits = _mm256_castps_si256(scores);
  const __m256i top_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i order = _mm256_xor_si256(bits, _mm256_or_si256(_mm256_srai_epi32(bits, 31), top_bit));
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  return _mm256_andnot_si256(nan, order);
}

/// Per lane: the best two of (best, second) and (other_best, other_second).
MOE_ROUTING_TARGET_AVX2 inline void merge_best_two(__m256i& best, __m256i& second, __m256i other_best,
                                                   __m256i other_second) noexcept {
  const __m256i lower_best = _mm256_min_epu32(best, other_best);
  best = _mm256_max_epu32(best, other_best);
  second = _mm256_max_epu32(lower_best, _mm256_max_epu32(second, other_second));
}

MOE_ROUTING_TARGET_AVX2 inline float score_group_avx2(const float* s, int begin, int end, group_score kind) noexcept {
  __m256i best = _mm256_setzero_si256(), second = _mm256_setzero_si256();  // order 0 is NaN's, the lowest
  int e = begin;
  for (; e + 8 <= end; e += 8) {
    const __m256i order = score_orders_avx2(_mm256_loadu_ps(s + e));
    const __m256i lower = _mm256_min_epu32(best, order);
    best = _mm256_max_epu32(best, order);
    second = _mm256_max_epu32(second, lower);
  }
  merge_best_two(best, second, _mm256_permute2x128_si256(best, best, 1), _mm256_permute2x128_si256(second, second, 1));
  merge_best_two(best, second, _mm256_shuffle_epi32(best, 0x4e), _mm256_shuffle_epi32(second, 0x4e));  // 64-bit swap
  merge_best_two(best, second, _mm256_shuffle_epi32(best, 0xb1), _mm256_shuffle_epi32(second, 0xb1));  // 32-bit swap
  auto top = static_cast<std::uint32_t>(_mm256_cvtsi256_si32(best));
  auto next = static_cast<std::uint32_t>(_mm256_cvtsi256_si32(second));
  for (; e < end; ++e) moe_routing::detail::take_into_best_two(top, next, score_order(s[e]));
  return moe_routing::detail::group_score_of_orders(top, next, end - begin, kind);
}

/// `score_row`'s group scores (`scalar_group_scores`' contract) 8 members at a time.
struct group_scores_avx2 {
  MOE_ROUTING_TARGET_AVX2 float operator()(const float* s, int begin, int end, group_score kind) const noexcept {
    return score_group_avx2(s, begin, end, kind);
  }
};

}  // namespace moe_routing::cpu::detail
#endif
