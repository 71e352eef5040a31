#pragma once
/// \file
/// Top-k of a row ranked by its raw values (any row without a bias), optionally among a
/// subset of its experts: the CPU's hot loop when scoring a token and when `refine`
/// looks past a token's stored top-k for experts of S.
///
/// Inserting expert by expert into the sorted top-k costs a mispredicted branch whenever
/// an expert enters it, about k (1 + ln(E / k)) times a row on fresh scores. On CPUs with
/// AVX-512 (chosen at run time, `cpu_features.hpp`, whatever the build targets) the rows are
/// therefore selected without data-dependent branches where they can (count <= 16):
/// 1. the rank orders of 16 experts per register, and the largest order of each of the
///    16 lanes over the row: 16 different experts, so the count-th largest of those
///    maxima is a lower bound T of the row's count-th largest order;
/// 2. the experts at or above T (typically 1 to 2 x count of them) compressed into a
///    candidate list;
/// 3. each candidate's rank = how many candidates' keys exceed its own (distinct keys,
///    so ranks are distinct), and the candidates ranked below count stored at their rank.
///    The keys compared are 32 bits, 16 to a register: a half-precision score's order
///    leaves 13 low bits free, which take the expert (so these keys are distinct); a
///    float's order is used whole, and where two candidates tie (the ranks then sum to
///    less than 0 + 1 + ... ) the candidates are inserted one by one instead (rare:
///    equal float logits).
/// A subset of at most `rank_candidates` experts skips step 1: all of it is candidates.
/// Where more than `rank_candidates` experts reach T (mass ties, a sparse subset), and for
/// count > 16, the AVX-512 block scan does the work: once k keys are held, one compare per 16
/// experts against the k-th key's order, inserting only the lanes that beat it (a later
/// expert beats the k-th key exactly when its order is strictly larger, as equal orders
/// tie to the lower, earlier index). CPUs with AVX2 but no AVX-512 take steps 1 to 3 with 8
/// lanes to a register (`value_top_k_avx2.hpp`) for count <= 16, and insert expert by expert
/// for count > 16 or where more than 32 experts reach T; other CPUs always insert
/// (`top_k_by_insertion`).
/// Every path gives the keys of `make_rank_key`, bit for bit.
///
/// The top-k entry points, from the building block up (every one writes rank keys in
/// rank order and is named for what it ranks):
/// - core (`core/score_row.hpp`, host and device): `insert_ranked` (one key into a sorted
///   top-k), `top_k_by_insertion` (any key function), `top_k_of_keys` (a row of keys) and
///   `top_k_of_values_by_insertion` (a row by its values);
/// - here, the CPU's: `top_k_of_values` (a row by its values, optionally among a subset S;
///   the public entry) and `top_k_of_listed` (a row's listed experts), which choose among
///   `top_k_by_bound` (the branch-free selection) and `top_k_by_block_scan` (one compare per
///   16 experts) on AVX-512, `top_k_by_bound_avx2` and `top_k_of_listed_avx2` on AVX2,
///   falling back to the core's insertion.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cpu/simd/avx512_warnings.hpp"
#include "moe_routing/cpu/simd/candidate_list.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"
#include "moe_routing/cpu/simd/lane_masks.hpp"
#include "moe_routing/cpu/simd/value_top_k_avx2.hpp"

MOE_ROUTING_AVX512_WARNINGS_OFF

namespace moe_routing::cpu {

#if MOE_ROUTING_X86_KERNELS
namespace detail {

inline constexpr int value_lanes = 16;

/// The float bits of the selected lanes of 16 scores (others 0; nothing past them is read).
template <score_element Element>
MOE_ROUTING_TARGET_AVX512 inline __m512i load_score_bits(const Element* scores, __mmask16 lanes) noexcept {
  if constexpr (std::is_same_v<Element, float>) {
    return _mm512_maskz_loadu_epi32(lanes, scores);
  } else if constexpr (std::is_same_v<Element, bfloat16>) {
    return _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, scores)), 16);
  } else {
    return _mm512_castps_si512(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, scores)));
  }
}

/// `score_order` of 16 lanes: NaN to 0, -0 onto +0.
MOE_ROUTING_TARGET_AVX512 inline __m512i score_orders(__m512i bits) noexcept {
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i flip = _mm512_or_si512(_mm512_srai_epi32(bits, 31), sign_bit);
  __m512i order = _mm512_xor_si512(bits, flip);
  order = _mm512_mask_add_epi32(order, _mm512_cmpeq_epi32_mask(bits, sign_bit), order, _mm512_set1_epi32(1));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_andnot_si512(sign_bit, bits), _mm512_set1_epi32(0x7f800000));
  return _mm512_maskz_mov_epi32(static_cast<__mmask16>(~nan), order);
}

/// Tuning data: the most candidates the branch-free ranking takes (two registers of keys).
inline constexpr int rank_candidates = 32;

/// The experts of a 16-wide block: those below `experts`, and in `allowed` when given.
MOE_ROUTING_TARGET_AVX512 inline __mmask16 block_lanes(int e, int experts, const expert_set* allowed) noexcept {
  const int left = experts - e;
  auto lanes = first_lanes<__mmask16>(left);
  if (allowed != nullptr) lanes &= static_cast<__mmask16>(allowed->word(e >> 6) >> (e & 63));
  return lanes;
}

/// The lanes whose order is strictly above `key`'s: the experts that beat the k-th key.
MOE_ROUTING_TARGET_AVX512 inline __mmask16 lanes_above(__mmask16 lanes, __m512i orders, rank_key key) noexcept {
  return _mm512_mask_cmpgt_epu32_mask(lanes, orders, _mm512_set1_epi32(static_cast<int>(key >> 32)));
}

/// The block scan (see the file comment); any count.
template <score_element Element>
MOE_ROUTING_TARGET_AVX512 int top_k_by_block_scan(const Element* row, int experts, int count, rank_key* top_keys,
                                                  const expert_set* allowed) noexcept {
  int filled = 0;
  alignas(64) std::uint32_t lane_orders[value_lanes];
  for (int e = 0; e < experts; e += value_lanes) {
    const __mmask16 lanes = block_lanes(e, experts, allowed);
    if (lanes == 0) continue;
    const __m512i orders = score_orders(load_score_bits(row + e, lanes));
    auto candidates = filled == count ? lanes_above(lanes, orders, top_keys[count - 1]) : lanes;
    if (candidates == 0) continue;
    _mm512_store_si512(lane_orders, orders);
    while (candidates != 0) {
      const int lane = std::countr_zero(static_cast<unsigned>(candidates));
      candidates &= static_cast<__mmask16>(candidates - 1);
      const bool was_full = filled == count;
      insert_ranked(top_keys, filled, count, order_rank_key(lane_orders[lane], e + lane));
      // Once full, the block's other lanes are filtered once; later in the block
      // insert_ranked's own compare is cheaper than a vector compare's latency.
      if (!was_full && filled == count) candidates &= lanes_above(lanes, orders, top_keys[count - 1]);
    }
  }
  return filled;
}

/// The count-th largest of 16 lane maxima (count <= 16), in every lane: a lower bound of
/// the count-th largest order among the values the maxima were taken over.
MOE_ROUTING_TARGET_AVX512 inline __m512i bound_of_lane_maxima(__m512i lane_max, int count) noexcept {
  const __m512i one = _mm512_set1_epi32(1);
  __m512i above = _mm512_setzero_si512();  // per lane: how many lane maxima exceed it
  __m512i other = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int shift = 1; shift < value_lanes; ++shift) {
    other = _mm512_and_si512(_mm512_add_epi32(other, one), _mm512_set1_epi32(value_lanes - 1));
    const __m512i rotated = _mm512_permutexvar_epi32(other, lane_max);
    above = _mm512_mask_add_epi32(above, _mm512_cmpgt_epu32_mask(rotated, lane_max), above, one);
  }
  const __mmask16 top_lanes = _mm512_cmplt_epu32_mask(above, _mm512_set1_epi32(count));
  return _mm512_set1_epi32(static_cast<int>(_mm512_mask_reduce_min_epu32(top_lanes, lane_max)));
}

/// Step 1 of the file comment: the lower bound of the count-th largest order.
template <score_element Element>
MOE_ROUTING_TARGET_AVX512 __m512i order_bound(const Element* row, int experts, int count,
                                              const expert_set* allowed) noexcept {
  // Lane maxima; lanes without an expert keep 0, which only lowers the bound.
  __m512i lane_max = _mm512_setzero_si512();
  for (int e = 0; e < experts; e += value_lanes) {
    const __mmask16 lanes = block_lanes(e, experts, allowed);
    lane_max = _mm512_mask_max_epu32(lane_max, lanes, lane_max, score_orders(load_score_bits(row + e, lanes)));
  }
  return bound_of_lane_maxima(lane_max, count);
}

/// The 32-bit keys of step 3 for 16 experts, all above 0 so that 0 can stand for "not a
/// candidate". Half-precision orders are equal in their 13 low bits within a sign, so the
/// expert (ties to the lower one) replaces those bits and the keys are distinct; float
/// orders are kept whole, plus one, and may tie.
template <score_element Element>
MOE_ROUTING_TARGET_AVX512 __m512i short_keys(__m512i orders, __m512i experts) noexcept {
  if constexpr (std::is_same_v<Element, float>) {
    return _mm512_add_epi32(orders, _mm512_set1_epi32(1));
  } else {
    static_assert(max_experts < 0x1fff);
    const __m512i tie_break = _mm512_sub_epi32(_mm512_set1_epi32(max_experts), experts);  // 1..1024
    return _mm512_or_si512(_mm512_andnot_si512(_mm512_set1_epi32(0x1fff), orders), tie_break);
  }
}

/// Step 2 of the file comment: the experts at or above `bound` into `orders` and `ids`
/// (room for `rank_candidates + value_lanes`). Stops early once more than
/// `rank_candidates` are found; returns how many.
template <score_element Element>
MOE_ROUTING_TARGET_AVX512 int collect_candidates(const Element* row, int experts, const expert_set* allowed,
                                                 __m512i bound, std::uint32_t* orders, std::uint32_t* ids) noexcept {
  const __m512i lane_index = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int found = 0;
  for (int e = 0; e < experts && found <= rank_candidates; e += value_lanes) {
    const __mmask16 lanes = block_lanes(e, experts, allowed);
    if (lanes == 0) continue;
    const __m512i block_orders = score_orders(load_score_bits(row + e, lanes));
    const __mmask16 reach = _mm512_mask_cmpge_epu32_mask(lanes, block_orders, bound);
    // Compressed in registers, then stored whole (room is left for it): a compressing
    // store to memory is microcoded and measured 4x slower.
    _mm512_storeu_si512(orders + found, _mm512_maskz_compress_epi32(reach, block_orders));
    _mm512_storeu_si512(ids + found,
                        _mm512_maskz_compress_epi32(reach, _mm512_add_epi32(lane_index, _mm512_set1_epi32(e))));
    found += std::popcount(static_cast<unsigned>(reach));
  }
  return found;
}

/// The `lanes` whose keys (`order`, `id`) are below `below`: a lower order, or the same
/// order and a higher expert (a lower low half).
MOE_ROUTING_TARGET_AVX512 inline __mmask16 below_lanes(__mmask16 lanes, __m512i order, __m512i id,
                                                       rank_key below) noexcept {
  const __m512i below_order = _mm512_set1_epi32(static_cast<int>(below >> 32));
  const __m512i below_low = _mm512_set1_epi32(static_cast<int>(below & 0xffffffffu));
  const __m512i low = _mm512_sub_epi32(_mm512_set1_epi32(-1), id);
  return _mm512_mask_cmplt_epu32_mask(lanes, order, below_order) |
         (_mm512_mask_cmpeq_epu32_mask(lanes, order, below_order) & _mm512_cmplt_epu32_mask(low, below_low));
}

/// Step 3 of the file comment for the `found <= 16 * Vectors` candidates whose keys are
/// below `below`, on their short keys (0 for the others). Returns how many it placed, or
/// -1, having written nothing, when float keys tie.
template <int Vectors, score_element Element>
MOE_ROUTING_TARGET_AVX512 int place_by_rank(const std::uint32_t* orders, const std::uint32_t* ids, int found, int count,
                                            rank_key below, rank_key* top_keys) noexcept {
  alignas(64) std::uint32_t keys[value_lanes * Vectors];
  __m512i key_vectors[Vectors];
  int kept = 0;
  for (int v = 0; v < Vectors; ++v) {
    const __m512i order = _mm512_load_si512(orders + value_lanes * v);
    const __m512i id = _mm512_load_si512(ids + value_lanes * v);
    const __mmask16 wanted = below_lanes(block_lanes(value_lanes * v, found, nullptr), order, id, below);
    kept += std::popcount(static_cast<unsigned>(wanted));
    key_vectors[v] = _mm512_maskz_mov_epi32(wanted, short_keys<Element>(order, id));
    _mm512_store_si512(keys + value_lanes * v, key_vectors[v]);
  }
  int rank_sum = 0;
  int ranks[value_lanes * Vectors];
  for (int c = 0; c < found; ++c) {
    const __m512i key = _mm512_set1_epi32(static_cast<int>(keys[c]));
    std::uint32_t larger = 0;
    for (int v = 0; v < Vectors; ++v) {
      larger |= static_cast<std::uint32_t>(_mm512_cmpgt_epu32_mask(key_vectors[v], key)) << (value_lanes * v);
    }
    const int rank = std::popcount(larger);  // those not wanted (key 0) rank at `kept`
    rank_sum += rank;
    ranks[c] = rank;
  }
  return place_ranked<Element>(orders, ids, ranks, found, kept, rank_sum, count, top_keys);
}

/// Step 3 for `found <= rank_candidates` candidates (`orders` and `ids` readable up to
/// 32), with as few registers as they need; tied float keys are inserted one by one.
template <score_element Element>
MOE_ROUTING_TARGET_AVX512 int rank_candidates_found(const std::uint32_t* orders, const std::uint32_t* ids, int found,
                                                    int count, rank_key below, rank_key* top_keys) noexcept {
  static_assert(rank_candidates == 2 * value_lanes);
  const int placed = found <= value_lanes ? place_by_rank<1, Element>(orders, ids, found, count, below, top_keys)
                                          : place_by_rank<2, Element>(orders, ids, found, count, below, top_keys);
  return placed >= 0 ? placed : insert_below(orders, ids, found, count, below, top_keys);
}

/// Steps 1 to 3 of the file comment (count <= 16). Returns -1, having written nothing,
/// when more than `rank_candidates` experts reach the bound.
template <score_element Element>
MOE_ROUTING_TARGET_AVX512 int top_k_by_bound(const Element* row, int experts, int count, rank_key* top_keys,
                                             const expert_set* allowed) noexcept {
  // A subset this small is all candidates: no bound needed.
  const bool small_subset = allowed != nullptr && allowed->size() <= rank_candidates;
  const __m512i bound = small_subset ? _mm512_setzero_si512() : order_bound(row, experts, count, allowed);
  alignas(64) std::uint32_t orders[rank_candidates + value_lanes] = {};
  alignas(64) std::uint32_t ids[rank_candidates + value_lanes] = {};
  const int found = collect_candidates(row, experts, allowed, bound, orders, ids);
  if (found > rank_candidates) return -1;
  return rank_candidates_found<Element>(orders, ids, found, count, no_key_limit, top_keys);
}

}  // namespace detail
#endif

/// The most experts `top_k_of_listed` takes.
inline constexpr int max_listed = 64;

#if MOE_ROUTING_X86_KERNELS
namespace detail {

/// `top_k_of_listed` on AVX-512 (see there).
template <score_element Element>
MOE_ROUTING_TARGET_AVX512 int top_k_of_listed_avx512(const Element* row, const std::int32_t* listed, int listed_count,
                                                     int count, rank_key* top_keys, rank_key below) noexcept {
  alignas(64) Element scores[max_listed];
  for (int j = 0; j < listed_count; ++j) scores[j] = row[listed[j]];
  alignas(64) std::uint32_t orders[max_listed] = {};
  alignas(64) std::uint32_t ids[max_listed] = {};
  for (int first = 0; first < listed_count; first += value_lanes) {
    const __mmask16 lanes = block_lanes(first, listed_count, nullptr);
    _mm512_store_si512(orders + first, score_orders(load_score_bits(scores + first, lanes)));
    _mm512_store_si512(ids + first, _mm512_maskz_loadu_epi32(lanes, listed + first));
  }
  if (listed_count <= rank_candidates) {
    return rank_candidates_found<Element>(orders, ids, listed_count, count, below, top_keys);
  }
  if (count <= value_lanes) {
    // Over the experts below `below` only: the others would raise the bound.
    __mmask16 wanted[max_listed / value_lanes];
    __m512i lane_max = _mm512_setzero_si512();
    for (int v = 0; v * value_lanes < listed_count; ++v) {
      const __m512i order = _mm512_load_si512(orders + v * value_lanes);
      wanted[v] = below_lanes(block_lanes(v * value_lanes, listed_count, nullptr), order,
                              _mm512_load_si512(ids + v * value_lanes), below);
      lane_max = _mm512_mask_max_epu32(lane_max, wanted[v], lane_max, order);
    }
    const __m512i bound = bound_of_lane_maxima(lane_max, count);
    alignas(64) std::uint32_t candidate_orders[rank_candidates + value_lanes] = {};
    alignas(64) std::uint32_t candidate_ids[rank_candidates + value_lanes] = {};
    int found = 0;
    for (int v = 0; v * value_lanes < listed_count && found <= rank_candidates; ++v) {
      const __m512i order = _mm512_load_si512(orders + v * value_lanes);
      const __mmask16 reach = _mm512_mask_cmpge_epu32_mask(wanted[v], order, bound);
      _mm512_storeu_si512(candidate_orders + found, _mm512_maskz_compress_epi32(reach, order));
      _mm512_storeu_si512(candidate_ids + found,
                          _mm512_maskz_compress_epi32(reach, _mm512_load_si512(ids + v * value_lanes)));
      found += std::popcount(static_cast<unsigned>(reach));
    }
    if (found <= rank_candidates) {
      return rank_candidates_found<Element>(candidate_orders, candidate_ids, found, count, below, top_keys);
    }
  }
  return insert_below(orders, ids, listed_count, count, below, top_keys);  // count > 16, or many ties
}

/// `top_k_of_values` on AVX-512 (see there).
template <score_element Element>
MOE_ROUTING_TARGET_AVX512 int top_k_of_values_avx512(const Element* row, int experts, int count, rank_key* top_keys,
                                                     const expert_set* allowed) noexcept {
  if (count <= value_lanes) {
    const int kept = top_k_by_bound(row, experts, count, top_keys, allowed);
    if (kept >= 0) return kept;
  }
  return top_k_by_block_scan(row, experts, count, top_keys, allowed);
}

}  // namespace detail
#endif

/// `top_k_of_values` among the `listed` experts (ascending, at most `max_listed`) whose keys
/// are below `below`: refine's search of a small S that every token of the batch shares,
/// past the token's own top-k. Reads only the listed scores, then ranks them without
/// data-dependent branches on CPUs with AVX-512: all of them when at most `rank_candidates`,
/// else those at or above the bound of step 1 taken over the list (count <= 16); on CPUs
/// with AVX2 but no AVX-512, all of them when at most `detail::avx2_rank_candidates`.
template <score_element Element>
inline int top_k_of_listed(const Element* row, const std::int32_t* listed, int listed_count, int count,
                           rank_key* top_keys, rank_key below = no_key_limit) noexcept {
#if MOE_ROUTING_X86_KERNELS
  if (cpu_runs(isa_level::avx512))
    return detail::top_k_of_listed_avx512(row, listed, listed_count, count, top_keys, below);
  if (listed_count <= detail::avx2_rank_candidates && cpu_runs(isa_level::avx2))
    return detail::top_k_of_listed_avx2(row, listed, listed_count, count, top_keys, below);
#endif
  int filled = 0;
  for (int j = 0; j < listed_count; ++j) {
    const rank_key key = make_rank_key(to_float(row[listed[j]]), listed[j]);
    if (key < below) insert_ranked(top_keys, filled, count, key);
  }
  return filled;
}

/// Writes the best `count` keys of `row` (ranked by value, `make_rank_key`) among the
/// experts in `allowed` (every expert when null) to `top_keys`, in rank order. Returns how
/// many it wrote: `count`, or fewer when the row has fewer experts or fewer are allowed.
template <score_element Element>
inline int top_k_of_values(const Element* row, int experts, int count, rank_key* top_keys,
                           const expert_set* allowed = nullptr) noexcept {
#if MOE_ROUTING_X86_KERNELS
  if (cpu_runs(isa_level::avx512)) return detail::top_k_of_values_avx512(row, experts, count, top_keys, allowed);
  if (count <= detail::avx2_max_count && cpu_runs(isa_level::avx2)) {
    const int kept = detail::top_k_by_bound_avx2(row, experts, count, top_keys, allowed);
    if (kept >= 0) return kept;
  }
#endif
  if (allowed == nullptr) {
    top_k_of_values_by_insertion(row, experts, count, top_keys);
    return std::min(count, experts);  // a row of fewer experts fills fewer keys, as the vector paths say
  }
  int filled = 0;
  allowed->for_each([&](int e) {
    if (e < experts) insert_ranked(top_keys, filled, count, make_rank_key(to_float(row[e]), e));
  });
  return filled;
}

}  // namespace moe_routing::cpu

MOE_ROUTING_AVX512_WARNINGS_ON
