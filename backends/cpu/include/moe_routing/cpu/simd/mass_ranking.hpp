#pragma once
/// \file
/// The CPU's ranking of experts by column mass for the greedy stages (`greedy_mass`,
/// `ep_fill`): the experts outside S with positive mass, heaviest first
/// (`heavier_expert`), gathered 64 at a time and, for the few places decode asks for,
/// picked by vectorised maxima instead of a comparison sort. Each vector step has an AVX-512
/// form and an AVX2 one (4 keys of 64 bits to a register; AVX2 compares 64-bit integers
/// signed only, so unsigned keys are compared with their top bits flipped), chosen at run
/// time (`cpu_features.hpp`).

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/expert_order.hpp"
#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/cpu/simd/avx512_warnings.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"
#include "moe_routing/cpu/simd/lane_masks.hpp"

namespace moe_routing::cpu::detail {

/// Appends `base + l` for every bit l of `bits` to `order[count..)`, ascending; returns the
/// new count.
inline int append_experts(std::uint64_t bits, int base, std::int32_t* order, int count) noexcept {
  for (; bits != 0; bits &= bits - 1) order[count++] = base + std::countr_zero(bits);
  return count;
}

#if MOE_ROUTING_X86_KERNELS
/// `positive_bits` on AVX-512.
MOE_ROUTING_TARGET_AVX512 inline std::uint64_t positive_bits_avx512(const std::int64_t* values, int width) noexcept {
  std::uint64_t bits = 0;
  for (int q = 0; q < width; q += 8) {
    const int left = width - q;
    const auto lanes = first_lanes<__mmask8>(left);
    const __mmask8 positive =
        _mm512_mask_cmpgt_epi64_mask(lanes, _mm512_maskz_loadu_epi64(lanes, values + q), _mm512_setzero_si512());
    bits |= static_cast<std::uint64_t>(positive) << q;
  }
  return bits;
}

/// `gather_unselected_positive` on AVX-512, the whole gather in one call: dispatching each
/// 64 experts' test on its own, as this once did, cost a build without -march some 20 ns
/// of routing one token at E = 256 (four calls, each out of line) against a native build.
MOE_ROUTING_TARGET_AVX512 inline int gather_unselected_positive_avx512(const std::int64_t* mass, int experts,
                                                                       const expert_set& selected,
                                                                       std::int32_t* order) noexcept {
  int count = 0;
  for (int base = 0; base < experts; base += 64) {
    const std::uint64_t positive = positive_bits_avx512(mass + base, std::min(64, experts - base));
    count = append_experts(positive & ~selected.word(base / 64), base, order, count);
  }
  return count;
}

/// `positive_bits` on AVX2.
MOE_ROUTING_TARGET_AVX2 inline std::uint64_t positive_bits_avx2(const std::int64_t* values, int width) noexcept {
  std::uint64_t bits = 0;
  int q = 0;
  for (; q + 4 <= width; q += 4) {
    const __m256i positive =
        _mm256_cmpgt_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + q)), _mm256_setzero_si256());
    bits |= static_cast<std::uint64_t>(_mm256_movemask_pd(_mm256_castsi256_pd(positive))) << q;
  }
  for (; q < width; ++q) bits |= static_cast<std::uint64_t>(values[q] > 0) << q;
  return bits;
}

/// `positive_words` on AVX2, every word in one call (one dispatch a gather, as on AVX-512).
MOE_ROUTING_TARGET_AVX2 inline void positive_words_avx2(const std::int64_t* mass, int experts,
                                                        std::uint64_t* words) noexcept {
  for (int w = 0; w * 64 < experts; ++w) words[w] = positive_bits_avx2(mass + w * 64, std::min(64, experts - w * 64));
}
#endif

/// Bit l set where values[l] > 0, for l < width <= 64.
inline std::uint64_t positive_bits(const std::int64_t* values, int width) noexcept {
  std::uint64_t bits = 0;
  for (int l = 0; l < width; ++l) bits |= static_cast<std::uint64_t>(values[l] > 0) << l;
  return bits;
}

/// Writes the experts outside `selected` whose mass is positive to `order`, ascending;
/// returns how many. Gathered 64 experts at a time, branch-free: in decode most experts
/// have no mass, and a test per expert mispredicts on the few that do.
inline int gather_unselected_positive(std::span<const std::int64_t> mass, const expert_set& selected,
                                      std::int32_t* order) noexcept {
  const int experts = static_cast<int>(mass.size());
#if MOE_ROUTING_X86_KERNELS
  if (cpu_runs(isa_level::avx512)) return gather_unselected_positive_avx512(mass.data(), experts, selected, order);
#endif
  // Bit l of positive[w]: mass[64 w + l] > 0 (S holds at most max_experts, so mass no more).
  std::uint64_t positive[max_experts / 64];
#if MOE_ROUTING_X86_KERNELS
  if (cpu_runs(isa_level::avx2)) {
    positive_words_avx2(mass.data(), experts, positive);
  } else
#endif
  {
    for (int w = 0; w * 64 < experts; ++w)
      positive[w] = positive_bits(mass.data() + w * 64, std::min(64, experts - w * 64));
  }
  int count = 0;
  for (int w = 0; w * 64 < experts; ++w) count = append_experts(positive[w] & ~selected.word(w), w * 64, order, count);
  return count;
}

MOE_ROUTING_AVX512_WARNINGS_OFF

#if MOE_ROUTING_X86_KERNELS
/// `largest_below` on AVX-512.
MOE_ROUTING_TARGET_AVX512 inline std::uint64_t largest_below_avx512(const std::uint64_t* keys, int count,
                                                                    std::uint64_t limit) noexcept {
  const __m512i bound = _mm512_set1_epi64(static_cast<long long>(limit));
  __m512i best = _mm512_setzero_si512();
  for (int i = 0; i < count; i += 8) {
    const __m512i v = _mm512_load_si512(keys + i);
    best = _mm512_mask_max_epu64(best, _mm512_cmplt_epu64_mask(v, bound), best, v);
  }
  // Halves, quarters, then pairs (GCC 12's _mm512_reduce_max_epu64 warns of its own
  // uninitialised placeholder).
  best = _mm512_max_epu64(best, _mm512_shuffle_i64x2(best, best, 0x4e));
  best = _mm512_max_epu64(best, _mm512_shuffle_i64x2(best, best, 0xb1));
  best = _mm512_max_epu64(best, _mm512_shuffle_epi32(best, _MM_PERM_BADC));
  return static_cast<std::uint64_t>(_mm_cvtsi128_si64(_mm512_castsi512_si128(best)));
}

/// `rank_packed_masses` on AVX-512 (count <= 32).
MOE_ROUTING_TARGET_AVX512 inline void rank_packed_masses_avx512(const std::uint64_t* keys, int count,
                                                                const std::int32_t* order, int needed,
                                                                std::int32_t* picked) noexcept {
  __m512i key_vectors[4];
  for (int q = 0; q < 4; ++q) key_vectors[q] = q * 8 < count ? _mm512_load_si512(keys + 8 * q) : _mm512_setzero_si512();
  for (int i = 0; i < count; ++i) {
    const __m512i key = _mm512_set1_epi64(static_cast<long long>(keys[i]));
    int rank = 0;
    for (int q = 0; q < 4; ++q)
      rank += std::popcount(static_cast<unsigned>(_mm512_cmpgt_epu64_mask(key_vectors[q], key)));
    picked[std::min(rank, needed)] = order[i];  // slot `needed` takes the rest; a minimum, not a branch
  }
}
#endif

#if MOE_ROUTING_X86_KERNELS
/// 64-bit keys with the top bit flipped, so that signed compares order them as unsigned.
MOE_ROUTING_TARGET_AVX2 inline __m256i flip_top_bits(__m256i keys) noexcept {
  return _mm256_xor_si256(keys, _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull)));
}

/// `largest_below` on AVX2.
MOE_ROUTING_TARGET_AVX2 inline std::uint64_t largest_below_avx2(const std::uint64_t* keys, int count,
                                                                std::uint64_t limit) noexcept {
  const __m256i bound = flip_top_bits(_mm256_set1_epi64x(static_cast<long long>(limit)));
  __m256i best = flip_top_bits(_mm256_setzero_si256());
  for (int i = 0; i < count; i += 4) {
    const __m256i v = flip_top_bits(_mm256_load_si256(reinterpret_cast<const __m256i*>(keys + i)));
    const __m256i better = _mm256_and_si256(_mm256_cmpgt_epi64(bound, v), _mm256_cmpgt_epi64(v, best));
    best = _mm256_blendv_epi8(best, v, better);
  }
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), flip_top_bits(best));
  return std::max(std::max(lanes[0], lanes[1]), std::max(lanes[2], lanes[3]));
}

/// `rank_packed_masses` on AVX2 (count <= 32).
MOE_ROUTING_TARGET_AVX2 inline void rank_packed_masses_avx2(const std::uint64_t* keys, int count,
                                                            const std::int32_t* order, int needed,
                                                            std::int32_t* picked) noexcept {
  __m256i key_vectors[8];
  for (int q = 0; q < 8; ++q) {
    key_vectors[q] = flip_top_bits(q * 4 < count ? _mm256_load_si256(reinterpret_cast<const __m256i*>(keys + 4 * q))
                                                 : _mm256_setzero_si256());
  }
  for (int i = 0; i < count; ++i) {
    const __m256i key = flip_top_bits(_mm256_set1_epi64x(static_cast<long long>(keys[i])));
    int rank = 0;
    for (int q = 0; q < 8; ++q)
      rank += std::popcount(
          static_cast<unsigned>(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(key_vectors[q], key)))));
    picked[std::min(rank, needed)] = order[i];  // as on AVX-512
  }
}
#endif

/// The largest of `keys[0..count)` below `limit` (0 if none); `keys` is padded with zeros
/// to a whole number of 8-key vectors.
inline std::uint64_t largest_below(const std::uint64_t* keys, int count, std::uint64_t limit) noexcept {
#if MOE_ROUTING_X86_KERNELS
  if (cpu_runs(isa_level::avx512)) return largest_below_avx512(keys, count, limit);
  if (cpu_runs(isa_level::avx2)) return largest_below_avx2(keys, count, limit);
#endif
  std::uint64_t best = 0;
  for (int i = 0; i < count; ++i) best = keys[i] < limit && keys[i] > best ? keys[i] : best;
  return best;
}

/// The experts of the `needed` largest distinct `keys` (count <= 32, zero-padded to whole
/// vectors) into `picked` (room for needed + 1), each key's rank counted against all the
/// others at once: no chain of maxima. Returns false where there is neither AVX-512 nor AVX2,
/// or more than 32 keys.
inline bool rank_packed_masses(const std::uint64_t* keys, int count, const std::int32_t* order, int needed,
                               std::int32_t* picked) noexcept {
#if MOE_ROUTING_X86_KERNELS
  if (count <= 32 && cpu_runs(isa_level::avx512)) {
    rank_packed_masses_avx512(keys, count, order, needed, picked);
    return true;
  }
  if (count <= 32 && cpu_runs(isa_level::avx2)) {
    rank_packed_masses_avx2(keys, count, order, needed, picked);
    return true;
  }
#endif
  (void)keys, (void)count, (void)order, (void)needed, (void)picked;
  return false;
}

MOE_ROUTING_AVX512_WARNINGS_ON

/// Tuning data: `rank_unselected_by_mass` picks the heaviest one at a time (O(needed x
/// count)) for at most this many places out of at most `pick_by_maximum_pool` experts.
inline constexpr int pick_by_maximum_limit = 16;
inline constexpr int pick_by_maximum_pool = 256;
inline constexpr int pick_position_bits = std::bit_width(static_cast<unsigned>(pick_by_maximum_pool - 1));

/// Writes the experts outside S with positive mass to `order`, by mass descending
/// (ties to the lower index); returns how many. Only the first `needed` are put in order
/// (a greedy stage that adds a few experts need not sort the rest).
inline int rank_unselected_by_mass(std::span<const std::int64_t> mass, const expert_set& selected, std::int32_t* order,
                                   int needed = max_experts) {
  const int count = gather_unselected_positive(mass, selected, order);
  const auto heavier = [&](std::int32_t a, std::int32_t b) {
    return heavier_expert(mass[static_cast<std::size_t>(a)], a, mass[static_cast<std::size_t>(b)], b);
  };
  needed = std::max(needed, 0);  // a stage whose S is already full enough asks for none
  if (needed < count && needed <= pick_by_maximum_limit && count <= pick_by_maximum_pool) {
    // A few of a small pool (decode): pick the heaviest `needed` times, each a vectorised
    // maximum; a comparison sort mispredicts about every other comparison on masses. Each
    // mass is packed with its position below it, so the maximum names its expert too, and
    // equal masses go to the lower position (order is ascending, so the lower index).
    alignas(64) std::uint64_t packed[pick_by_maximum_pool];
    std::uint64_t any_bits = 0;
    for (int i = 0; i < count; ++i) {
      const auto m = static_cast<std::uint64_t>(mass[static_cast<std::size_t>(order[i])]);
      any_bits |= m;
      packed[i] = m << pick_position_bits | static_cast<std::uint64_t>(pick_by_maximum_pool - 1 - i);
    }
    // Gates of at most 1 over at most 2^14 tokens keep masses below 2^47; larger ones
    // (gates clamped at 2^16) take the partial sort below. Packed keys stay below 2^63, so
    // none equals the first round's limit (~0), which a key of mass 2^56 - 1 at position 0
    // did: it was never picked.
    if ((any_bits >> (63 - pick_position_bits)) == 0) {
      std::fill(packed + count, packed + (count + 7) / 8 * 8, 0);  // whole vectors, below every key
      std::int32_t picked[pick_by_maximum_limit + 1];
      if (!rank_packed_masses(packed, count, order, needed, picked)) {
        // Packed keys are distinct: each round's pick is the largest key below the last
        // pick, so the array is only read (a zeroed pick would stall the next round's loads).
        std::uint64_t last = ~std::uint64_t{0};
        for (int round = 0; round < needed; ++round) {
          last = largest_below(packed, count, last);
          const int at = pick_by_maximum_pool - 1 - static_cast<int>(last & (pick_by_maximum_pool - 1));
          picked[round] = order[at];
        }
      }
      std::copy(picked, picked + needed, order);
      return count;
    }
  }
  if (needed < count) {
    std::partial_sort(order, order + needed, order + count, heavier);
  } else {
    std::sort(order, order + count, heavier);
  }
  return count;
}

}  // namespace moe_routing::cpu::detail
