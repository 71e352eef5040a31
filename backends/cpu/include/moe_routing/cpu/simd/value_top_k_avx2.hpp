#pragma once
/// \file
/// The branch-free top-k of a row by its values (`value_top_k.hpp`, steps 1 to 3 of its file
/// comment) for CPUs with AVX2 but no AVX-512: Zen 3, and Intel's client cores. There, inserting
/// expert by expert took 82% of a vanilla routing call (n = 16, E = 128, k = 8, Zen 3;
/// docs/benchmarks/routing_avx2.md), most of it in branches the scores decide.
///
/// The same three steps with 8 lanes to a register and no mask registers:
/// 1. lane maxima of the rank orders in two registers, so still 16 lanes (expert e in lane
///    e mod 16) and the same bound as the AVX-512 path for a given count;
/// 2. the experts at or above the bound compressed into the candidate list by a permutation
///    looked up from the 8-bit lane mask (AVX2 has no compress instruction);
/// 3. each candidate ranked by counting the candidates whose 32-bit keys exceed its own.
/// Unsigned comparisons, which AVX2 lacks, compare the keys with their top bits flipped.
/// `top_k_by_bound_avx2` returns -1, having written nothing, where the caller's insertion must
/// do the work: more than `avx2_rank_candidates` experts reach the bound.
/// `top_k_of_listed_avx2` ranks refine's list of S (at most `avx2_rank_candidates` experts) at
/// once, as the AVX-512 path does. Every path gives the keys of `make_rank_key`, bit for bit.

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cpu/simd/candidate_list.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

#if MOE_ROUTING_X86_KERNELS
namespace moe_routing::cpu::detail {

inline constexpr int avx2_lanes = 8;

/// Tuning data: the most candidates the AVX2 ranking takes (four registers of keys), and so
/// the largest count it serves (the bound is the count-th of 16 lane maxima).
inline constexpr int avx2_rank_candidates = 32;
inline constexpr int avx2_max_count = 16;

/// For each 8-bit lane mask, the lanes it selects first, in order, as the indices of a
/// `vpermd`: the compress that AVX-512 has as one instruction. 8 bytes a mask, 2 KiB in all.
inline constexpr auto compress_permutations = [] {
  std::array<std::uint64_t, 256> table{};
  for (unsigned mask = 0; mask < 256; ++mask) {
    std::uint64_t indices = 0;
    int placed = 0;
    for (unsigned lane = 0; lane < 8; ++lane) {
      if ((mask >> lane) & 1u) indices |= std::uint64_t{lane} << (8 * placed++);
    }
    table[mask] = indices;
  }
  return table;
}();

/// The lanes of `bits` (one a lane) as a vector mask: all ones where set.
MOE_ROUTING_TARGET_AVX2 inline __m256i lane_mask_vector(unsigned bits) noexcept {
  const __m256i lane_bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), lane_bits), lane_bits);
}

/// Lane by lane a > b as unsigned 32-bit integers (all ones where it holds).
MOE_ROUTING_TARGET_AVX2 inline __m256i greater_unsigned(__m256i a, __m256i b) noexcept {
  const __m256i top_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  return _mm256_cmpgt_epi32(_mm256_xor_si256(a, top_bit), _mm256_xor_si256(b, top_bit));
}

/// The lanes of a vector mask as 8 bits.
MOE_ROUTING_TARGET_AVX2 inline unsigned lane_bits_of(__m256i mask) noexcept {
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(mask)));
}

/// The float bits of the 8 scores from `scores` on, of which `left` (when under 8) exist: the
/// lanes past them hold 0 and nothing past them is read.
template <score_element Element>
MOE_ROUTING_TARGET_AVX2 inline __m256i load_score_bits_avx2(const Element* scores, int left) noexcept {
  if constexpr (std::is_same_v<Element, float>) {
    if (left >= avx2_lanes) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scores));
    return _mm256_maskload_epi32(reinterpret_cast<const int*>(scores), lane_mask_vector((1u << left) - 1u));
  } else {
    __m128i halves;
    if (left >= avx2_lanes) {
      halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scores));
    } else {
      std::uint16_t copy[avx2_lanes] = {};  // the row's last, short block
      std::memcpy(copy, scores, static_cast<std::size_t>(left) * sizeof(Element));
      halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(copy));
    }
    if constexpr (std::is_same_v<Element, bfloat16>) return _mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16);
    return _mm256_castps_si256(_mm256_cvtph_ps(halves));
  }
}

/// `score_order` of 8 lanes: NaN to 0, -0 onto +0.
MOE_ROUTING_TARGET_AVX2 inline __m256i score_orders_avx2(__m256i bits) noexcept {
  const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i flip = _mm256_or_si256(_mm256_srai_epi32(bits, 31), sign_bit);
  __m256i order = _mm256_xor_si256(bits, flip);
  // -0's order is one below +0's: the compare's all ones subtracted lift it.
  order = _mm256_sub_epi32(order, _mm256_cmpeq_epi32(bits, sign_bit));
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_andnot_si256(sign_bit, bits), _mm256_set1_epi32(0x7f800000));
  return _mm256_andnot_si256(nan, order);
}

/// The experts of the 8-wide block at `e`: those below `experts`, and in `allowed` when given.
inline unsigned avx2_block_lanes(int e, int experts, const expert_set* allowed) noexcept {
  const int left = experts - e;
  unsigned lanes = left >= avx2_lanes ? 0xffu : (1u << left) - 1u;
  if (allowed != nullptr) lanes &= static_cast<unsigned>(allowed->word(e >> 6) >> (e & 63));
  return lanes;
}

/// The rank orders of the block at `e` with the lanes not in `lanes` at 0.
template <score_element Element>
MOE_ROUTING_TARGET_AVX2 inline __m256i block_orders_avx2(const Element* row, int e, int experts,
                                                         unsigned lanes) noexcept {
  return _mm256_and_si256(score_orders_avx2(load_score_bits_avx2(row + e, experts - e)), lane_mask_vector(lanes));
}

/// Step 1: the count-th largest of the 16 lane maxima (count <= 16), a lower bound of the
/// row's count-th largest order. Lanes without an expert keep 0, which only lowers it.
template <score_element Element>
MOE_ROUTING_TARGET_AVX2 std::uint32_t order_bound_avx2(const Element* row, int experts, int count,
                                                       const expert_set* allowed) noexcept {
  __m256i lane_max[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int e = 0; e < experts; e += avx2_lanes) {
    const unsigned lanes = avx2_block_lanes(e, experts, allowed);
    __m256i& lane_maximum = lane_max[(e / avx2_lanes) & 1];
    lane_maximum = _mm256_max_epu32(lane_maximum, block_orders_avx2(row, e, experts, lanes));
  }
  alignas(32) std::uint32_t maxima[2 * avx2_lanes];
  _mm256_store_si256(reinterpret_cast<__m256i*>(maxima), lane_max[0]);
  _mm256_store_si256(reinterpret_cast<__m256i*>(maxima + avx2_lanes), lane_max[1]);
  // The smallest of the maxima that fewer than `count` others exceed, chosen by a minimum,
  // not a branch.
  std::uint32_t bound = ~std::uint32_t{0};
  for (const std::uint32_t m : maxima) {
    const __m256i value = _mm256_set1_epi32(static_cast<int>(m));
    const int above = std::popcount(lane_bits_of(greater_unsigned(lane_max[0], value)) |
                                    lane_bits_of(greater_unsigned(lane_max[1], value)) << avx2_lanes);
    const std::uint32_t eligible = above < count ? m : ~std::uint32_t{0};
    bound = eligible < bound ? eligible : bound;
  }
  return bound;
}

/// Step 2: the experts at or above `bound` into `orders` and `ids` (room for
/// `avx2_rank_candidates + 8`). Stops once more than `avx2_rank_candidates` are found;
/// returns how many.
template <score_element Element>
MOE_ROUTING_TARGET_AVX2 int collect_candidates_avx2(const Element* row, int experts, const expert_set* allowed,
                                                    std::uint32_t bound, std::uint32_t* orders,
                                                    std::uint32_t* ids) noexcept {
  const __m256i lane_index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i below_bound = _mm256_set1_epi32(static_cast<int>(bound - 1));  // bound >= 1 where used
  int found = 0;
  for (int e = 0; e < experts && found <= avx2_rank_candidates; e += avx2_lanes) {
    const unsigned lanes = avx2_block_lanes(e, experts, allowed);
    if (lanes == 0) continue;
    const __m256i block = block_orders_avx2(row, e, experts, lanes);
    const unsigned reach =
        bound == 0 ? lanes : lanes & lane_bits_of(greater_unsigned(block, below_bound));  // order >= bound
    const __m256i permutation =
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(compress_permutations[reach])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(orders + found), _mm256_permutevar8x32_epi32(block, permutation));
    const __m256i block_ids = _mm256_add_epi32(lane_index, _mm256_set1_epi32(e));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ids + found), _mm256_permutevar8x32_epi32(block_ids, permutation));
    found += std::popcount(reach);
  }
  return found;
}

/// The 32-bit keys of step 3 (`short_keys` in value_top_k.hpp): above 0, so that 0 stands for
/// "not a candidate"; half-precision keys carry the expert in their 13 free low bits.
template <score_element Element>
MOE_ROUTING_TARGET_AVX2 inline __m256i short_keys_avx2(__m256i orders, __m256i experts) noexcept {
  if constexpr (std::is_same_v<Element, float>) {
    return _mm256_add_epi32(orders, _mm256_set1_epi32(1));
  } else {
    static_assert(max_experts < 0x1fff);
    const __m256i tie_break = _mm256_sub_epi32(_mm256_set1_epi32(max_experts), experts);  // 1..1024
    return _mm256_or_si256(_mm256_andnot_si256(_mm256_set1_epi32(0x1fff), orders), tie_break);
  }
}

/// The lanes whose keys (`order`, `id`) are below `below`: a lower order, or the same order
/// and a higher expert (a lower low half).
MOE_ROUTING_TARGET_AVX2 inline __m256i below_lanes_avx2(__m256i order, __m256i id, rank_key below) noexcept {
  const __m256i below_order = _mm256_set1_epi32(static_cast<int>(below >> 32));
  const __m256i below_low = _mm256_set1_epi32(static_cast<int>(below & 0xffffffffu));
  const __m256i low = _mm256_sub_epi32(_mm256_set1_epi32(-1), id);
  return _mm256_or_si256(greater_unsigned(below_order, order),
                         _mm256_and_si256(_mm256_cmpeq_epi32(order, below_order), greater_unsigned(below_low, low)));
}

/// Step 3 for the `found <= 8 * Vectors` candidates whose keys are below `below`, on their
/// short keys (0 for the others). Returns how many it placed, or -1, having written nothing,
/// when float keys tie.
template <int Vectors, score_element Element>
MOE_ROUTING_TARGET_AVX2 int place_by_rank_avx2(const std::uint32_t* orders, const std::uint32_t* ids, int found,
                                               int count, rank_key below, rank_key* top_keys) noexcept {
  alignas(32) std::uint32_t keys[avx2_lanes * Vectors];
  __m256i key_vectors[Vectors];
  int kept = 0;
  for (int v = 0; v < Vectors; ++v) {
    const int first = avx2_lanes * v;
    const __m256i order = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(orders + first));
    const __m256i id = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids + first));
    const int left = found - first;
    const unsigned present = left >= avx2_lanes ? 0xffu : left <= 0 ? 0u : (1u << left) - 1u;
    const __m256i wanted = _mm256_and_si256(lane_mask_vector(present), below_lanes_avx2(order, id, below));
    kept += std::popcount(lane_bits_of(wanted));
    key_vectors[v] = _mm256_and_si256(short_keys_avx2<Element>(order, id), wanted);
    _mm256_store_si256(reinterpret_cast<__m256i*>(keys + first), key_vectors[v]);
  }
  int ranks[avx2_lanes * Vectors];
  int rank_sum = 0;
  for (int c = 0; c < found; ++c) {
    const __m256i key = _mm256_set1_epi32(static_cast<int>(keys[c]));
    std::uint32_t larger = 0;
    for (int v = 0; v < Vectors; ++v) larger |= lane_bits_of(greater_unsigned(key_vectors[v], key)) << (avx2_lanes * v);
    ranks[c] = std::popcount(larger);  // those not wanted (key 0) rank at `kept`
    rank_sum += ranks[c];
  }
  return place_ranked<Element>(orders, ids, ranks, found, kept, rank_sum, count, top_keys);
}

/// Step 3 for `found <= avx2_rank_candidates` candidates (`orders` and `ids` readable up to
/// that many), with as few registers as they need; tied float keys are inserted one by one.
template <score_element Element>
MOE_ROUTING_TARGET_AVX2 int rank_candidates_found_avx2(const std::uint32_t* orders, const std::uint32_t* ids, int found,
                                                       int count, rank_key below, rank_key* top_keys) noexcept {
  static_assert(avx2_rank_candidates == 4 * avx2_lanes);
  const int placed = found <= avx2_lanes ? place_by_rank_avx2<1, Element>(orders, ids, found, count, below, top_keys)
                     : found <= 2 * avx2_lanes
                         ? place_by_rank_avx2<2, Element>(orders, ids, found, count, below, top_keys)
                         : place_by_rank_avx2<4, Element>(orders, ids, found, count, below, top_keys);
  return placed >= 0 ? placed : insert_below(orders, ids, found, count, below, top_keys);
}

/// Steps 1 to 3 for count <= `avx2_max_count`: writes the row's best `count` keys among
/// `allowed` (every expert when null) and returns how many, or returns -1, having written
/// nothing, when more than `avx2_rank_candidates` experts reach the bound.
template <score_element Element>
MOE_ROUTING_TARGET_AVX2 int top_k_by_bound_avx2(const Element* row, int experts, int count, rank_key* top_keys,
                                                const expert_set* allowed) noexcept {
  // A subset this small is all candidates: no bound needed.
  const bool small_subset = allowed != nullptr && allowed->size() <= avx2_rank_candidates;
  const std::uint32_t bound = small_subset ? 0 : order_bound_avx2(row, experts, count, allowed);
  alignas(32) std::uint32_t orders[avx2_rank_candidates + avx2_lanes] = {};
  alignas(32) std::uint32_t ids[avx2_rank_candidates + avx2_lanes] = {};
  const int found = collect_candidates_avx2(row, experts, allowed, bound, orders, ids);
  if (found > avx2_rank_candidates) return -1;
  return rank_candidates_found_avx2<Element>(orders, ids, found, count, no_key_limit, top_keys);
}

/// `top_k_of_listed` (value_top_k.hpp) for at most `avx2_rank_candidates` listed experts:
/// every listed expert is a candidate, ranked at once.
template <score_element Element>
MOE_ROUTING_TARGET_AVX2 int top_k_of_listed_avx2(const Element* row, const std::int32_t* listed, int listed_count,
                                                 int count, rank_key* top_keys, rank_key below) noexcept {
  Element scores[avx2_rank_candidates];
  for (int j = 0; j < listed_count; ++j) scores[j] = row[listed[j]];
  alignas(32) std::uint32_t orders[avx2_rank_candidates] = {};
  alignas(32) std::uint32_t ids[avx2_rank_candidates] = {};
  for (int first = 0; first < listed_count; first += avx2_lanes) {
    const int left = listed_count - first;
    const __m256i present = lane_mask_vector(left >= avx2_lanes ? 0xffu : (1u << left) - 1u);
    _mm256_store_si256(reinterpret_cast<__m256i*>(orders + first),
                       score_orders_avx2(load_score_bits_avx2(scores + first, left)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(ids + first),
                       _mm256_maskload_epi32(reinterpret_cast<const int*>(listed + first), present));
  }
  return rank_candidates_found_avx2<Element>(orders, ids, listed_count, count, below, top_keys);
}

}  // namespace moe_routing::cpu::detail
#endif
