#pragma once
/// \file
/// The CPU backend's set stages (SPEC section 3). Each reads and updates the
/// `route_context`; none allocates. Sorting happens over at most E experts.

#include <algorithm>
#include <bit>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/avx512_warnings.hpp"
#include "moe_routing/cpu/route_context.hpp"
#include "moe_routing/policies/confidence_keep.hpp"
#include "moe_routing/policies/ep_fill.hpp"
#include "moe_routing/policies/greedy_mass.hpp"
#include "moe_routing/policies/per_request.hpp"
#include "moe_routing/policies/prune.hpp"
#include "moe_routing/policies/topk_union.hpp"
#include "moe_routing/policies/vote_drop.hpp"

namespace moe_routing {

/// Tag of the CPU backend.
struct cpu_backend {};

namespace cpu::detail {

/// Bit l set where values[l] > 0, for l < width <= 64.
inline std::uint64_t positive_bits(const std::int64_t* values, int width) noexcept {
  std::uint64_t bits = 0;
#if defined(__AVX512F__)
  for (int q = 0; q < width; q += 8) {
    const int left = width - q;
    const auto lanes = static_cast<__mmask8>(left >= 8 ? 0xffu : (1u << left) - 1u);
    const __mmask8 positive = _mm512_mask_cmpgt_epi64_mask(lanes, _mm512_maskz_loadu_epi64(lanes, values + q), _mm512_setzero_si512());
    bits |= static_cast<std::uint64_t>(positive) << q;
  }
#else
  for (int l = 0; l < width; ++l) bits |= static_cast<std::uint64_t>(values[l] > 0) << l;
#endif
  return bits;
}

MOE_ROUTING_AVX512_WARNINGS_OFF

/// The largest of `keys[0..count)` below `limit` (0 if none); `keys` is padded with zeros
/// to a whole number of 8-key vectors.
inline std::uint64_t largest_below(const std::uint64_t* keys, int count, std::uint64_t limit) noexcept {
#if defined(__AVX512F__)
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
#else
  std::uint64_t best = 0;
  for (int i = 0; i < count; ++i) best = keys[i] < limit && keys[i] > best ? keys[i] : best;
  return best;
#endif
}

/// The experts of the `needed` largest distinct `keys` (count <= 32, zero-padded to whole
/// vectors) into `picked` (room for needed + 1), each key's rank counted against all the
/// others at once: no chain of maxima. Returns false where there is no AVX-512 or more
/// than 32 keys.
inline bool rank_packed_masses(const std::uint64_t* keys, int count, const std::int32_t* order, int needed,
                               std::int32_t* picked) noexcept {
#if defined(__AVX512F__)
  if (count > 32) return false;
  __m512i key_vectors[4];
  for (int q = 0; q < 4; ++q) key_vectors[q] = q * 8 < count ? _mm512_load_si512(keys + 8 * q) : _mm512_setzero_si512();
  for (int i = 0; i < count; ++i) {
    const __m512i key = _mm512_set1_epi64(static_cast<long long>(keys[i]));
    int rank = 0;
    for (int q = 0; q < 4; ++q) rank += std::popcount(static_cast<unsigned>(_mm512_cmpgt_epu64_mask(key_vectors[q], key)));
    picked[std::min(rank, needed)] = order[i];  // slot `needed` takes the rest; a minimum, not a branch
  }
  return true;
#else
  (void)keys, (void)count, (void)order, (void)needed, (void)picked;
  return false;
#endif
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
inline int rank_unselected_by_mass(std::span<const std::int64_t> mass, const expert_set& selected,
                                   std::int32_t* order, int needed = max_experts) {
  // Gathered 64 experts at a time, branch-free: in decode most experts have no mass, and a
  // test per expert mispredicts on the few that do.
  int count = 0;
  const int experts = static_cast<int>(mass.size());
  for (int base = 0; base < experts; base += 64) {
    const int width = std::min(64, experts - base);
    const std::uint64_t positive = positive_bits(mass.data() + base, width);
    for (std::uint64_t bits = positive & ~selected.word(base / 64); bits != 0; bits &= bits - 1) {
      order[count++] = base + std::countr_zero(bits);
    }
  }
  const auto heavier = [&](std::int32_t a, std::int32_t b) {
    const auto ma = mass[static_cast<std::size_t>(a)], mb = mass[static_cast<std::size_t>(b)];
    return ma != mb ? ma > mb : a < b;
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
    // (gates clamped at 2^16) take the partial sort below.
    if ((any_bits >> (64 - pick_position_bits)) == 0) {
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

}  // namespace cpu::detail

template <>
struct stage_executor<cpu_backend, topk_union> {
  template <class Context>
  static void apply(const topk_union& stage, Context& context) {
    const int k = stage.effective_k(context.top_k());
    for (int token = 0; token < context.tokens(); ++token) {
      if (!context.is_valid(token)) continue;
      const auto top = context.top_experts(token);
      for (int j = 0; j < k; ++j) context.selected.insert(top[static_cast<std::size_t>(j)]);
    }
  }
};

template <>
struct stage_executor<cpu_backend, prune> {
  template <class Context>
  static void apply(const prune& stage, Context& context) {
    for (int token = 0; token < context.tokens(); ++token) {
      if (!context.is_valid(token)) continue;
      context.guarantee(token, stage.baseline_size(context.top_probabilities(token).data(),
                                                   context.stats(token).candidate_total));
    }
  }
};

template <>
struct stage_executor<cpu_backend, greedy_mass> {
  template <class Context>
  static void apply(const greedy_mass& stage, Context& context) {
    const auto mass = context.mass(stage.gate);
    std::int32_t* order = context.storage().order.data();
    const int needed = stage.add >= 0    ? stage.add
                       : stage.size >= 0 ? stage.size - context.selected.size()
                                         : max_experts;
    const int available = cpu::detail::rank_unselected_by_mass(mass, context.selected, order, needed);
    if (stage.add >= 0) {
      for (int i = 0; i < std::min(stage.add, available); ++i) context.selected.insert(order[i]);
    } else if (stage.size >= 0) {
      int size = context.selected.size();
      for (int i = 0; i < available && size < stage.size; ++i, ++size) context.selected.insert(order[i]);
    } else {
      std::int64_t total = 0, held = 0;
      for (int e = 0; e < context.experts(); ++e) {
        total += mass[static_cast<std::size_t>(e)];
        if (context.selected.contains(e)) held += mass[static_cast<std::size_t>(e)];
      }
      const double target = static_cast<double>(stage.mass) * static_cast<double>(total);
      for (int i = 0; i < available && static_cast<double>(held) < target; ++i) {
        context.selected.insert(order[i]);
        held += mass[static_cast<std::size_t>(order[i])];
      }
    }
  }
};

template <>
struct stage_executor<cpu_backend, per_request> {
  template <class Context>
  static void apply(const per_request& stage, Context& context) {
    const int e_count = context.experts();
    // Guarantees first (serial, cheap): each token's top-k0 joins S.
    for (int token = 0; token < context.tokens(); ++token) {
      if (context.is_valid(token)) context.guarantee(token, stage.k0);
    }
    if (stage.m_r == 0) return;
    auto& chunk_selected = context.storage().chunk_selected;
    for (int b = 0; b < context.chunk_count(); ++b) chunk_selected[static_cast<std::size_t>(b)].clear();
    context.parallel_blocks(context.requests(), [&](int request, int chunk) {
      std::int64_t* mass = context.scratch_mass(chunk);
      std::int32_t* candidates = context.scratch_order(chunk);
      std::fill(mass, mass + e_count, 0);
      expert_set base;  // S0_r
      const int begin = context.request_begin(request), end = context.request_end(request);
      for (int token = begin; token < end; ++token) {
        if (!context.is_valid(token)) continue;
        const auto top = context.top_experts(token);
        for (int j = 0; j < stage.k0; ++j) base.insert(top[static_cast<std::size_t>(j)]);
        if (stage.gate == column_mass::sparse) {
          const auto gates = context.top_gates(token);
          for (int j = 0; j < context.top_k(); ++j) {
            mass[top[static_cast<std::size_t>(j)]] += to_fixed_mass(gates[static_cast<std::size_t>(j)]);
          }
        } else {
          context.score_full_row(token, chunk);
          const float* p = context.scratch_p(chunk);
          for (int e = 0; e < e_count; ++e) mass[e] += to_fixed_mass(p[e]);
        }
      }
      int count = 0;
      for (int e = 0; e < e_count; ++e) {
        if (mass[e] > 0 && !base.contains(e)) candidates[count++] = e;
      }
      const int take = std::min(count, stage.m_r);
      std::partial_sort(candidates, candidates + take, candidates + count,
                        [&](std::int32_t a, std::int32_t b) {
                          return mass[a] != mass[b] ? mass[a] > mass[b] : a < b;
                        });
      for (int i = 0; i < take; ++i) chunk_selected[static_cast<std::size_t>(chunk)].insert(candidates[i]);
    });
    for (int b = 0; b < context.chunk_count(); ++b) context.selected |= chunk_selected[static_cast<std::size_t>(b)];
  }
};

template <>
struct stage_executor<cpu_backend, ep_fill> {
  template <class Context>
  static void apply(const ep_fill& stage, Context& context) {
    const int devices = context.devices();
    auto& ws = context.storage();
    std::int32_t* load = ws.expert_scratch.data();
    std::int32_t* cursor = ws.device_cursor.data();
    std::fill(load, load + devices, 0);
    std::fill(cursor, cursor + devices, 0);
    context.selected.for_each([&](int e) { ++load[context.device_of(e)]; });
    std::int32_t* order = ws.order.data();
    const int available = cpu::detail::rank_unselected_by_mass(context.mass(stage.gate), context.selected, order);
    for (bool added = true; added;) {
      added = false;
      for (int device = 0; device < devices; ++device) {
        if (load[device] >= stage.m_g) continue;
        int& i = cursor[device];
        while (i < available && context.device_of(order[i]) != device) ++i;
        if (i == available) continue;
        context.selected.insert(order[i++]);
        ++load[device];
        added = true;
      }
    }
  }
};

template <>
struct stage_executor<cpu_backend, vote_drop> {
  template <class Context>
  static void apply(const vote_drop& stage, Context& context) {
    const auto votes = context.votes();
    const auto mass = context.mass(stage.gate);
    std::int32_t* order = context.storage().order.data();
    int count = 0;
    context.selected.for_each([&](int e) {
      if (!context.guaranteed.contains(e)) order[count++] = e;
    });
    std::sort(order, order + count, [&](std::int32_t a, std::int32_t b) {
      if (votes[static_cast<std::size_t>(a)] != votes[static_cast<std::size_t>(b)]) {
        return votes[static_cast<std::size_t>(a)] < votes[static_cast<std::size_t>(b)];
      }
      if (mass[static_cast<std::size_t>(a)] != mass[static_cast<std::size_t>(b)]) {
        return mass[static_cast<std::size_t>(a)] < mass[static_cast<std::size_t>(b)];
      }
      return a > b;
    });
    int size = context.selected.size();
    for (int i = 0; i < std::min(stage.d, count) && size > 1; ++i, --size) {
      context.selected.erase(order[i]);
    }
  }
};

template <>
struct stage_executor<cpu_backend, confidence_keep> {
  template <class Context>
  static bool important(const confidence_keep& stage, const Context& context, int token) {
    const row_stats& stats = context.stats(token);
    const float confidence = stats.max_candidate_p / stats.candidate_total;
    return confidence >= stage.min_confidence;
  }

  template <class Context>
  static void apply(const confidence_keep& stage, Context& context) {
    bool any_important = false;
    for (int token = 0; token < context.tokens() && !any_important; ++token) {
      any_important = context.is_valid(token) && important(stage, context, token);
    }
    auto& ws = context.storage();
    std::int32_t* votes = ws.expert_scratch.data();  // votes of the important tokens only
    std::fill(votes, votes + context.experts(), 0);
    expert_set kept;
    for (int token = 0; token < context.tokens(); ++token) {
      if (!context.is_valid(token) || (any_important && !important(stage, context, token))) continue;
      const auto top = context.top_experts(token);
      kept.insert(top[0]);
      for (const std::int32_t e : top) ++votes[e];
    }
    const auto mass = context.mass(stage.gate);
    std::int32_t* order = ws.order.data();
    int count = 0;
    for (int e = 0; e < context.experts(); ++e) {
      if (votes[e] > 0 && !kept.contains(e)) order[count++] = e;
    }
    std::sort(order, order + count, [&](std::int32_t a, std::int32_t b) {
      if (votes[a] != votes[b]) return votes[a] > votes[b];
      if (mass[static_cast<std::size_t>(a)] != mass[static_cast<std::size_t>(b)]) {
        return mass[static_cast<std::size_t>(a)] > mass[static_cast<std::size_t>(b)];
      }
      return a < b;
    });
    int size = kept.size();
    for (int i = 0; i < count && size < stage.budget; ++i, ++size) kept.insert(order[i]);
    context.selected = kept;
  }
};

/// Any other set stage runs its own `apply(context)`: the extension point for stages
/// written outside the library (see examples/custom_stage.cpp).
template <set_stage Stage>
struct stage_executor<cpu_backend, Stage> {
  template <class Context>
  static void apply(const Stage& stage, Context& context) {
    static_assert(requires { stage.apply(context); },
                  "A set stage that is not built in must have a member function "
                  "`void apply(auto& context) const` for the CPU backend to run it.");
    stage.apply(context);
  }
};

}  // namespace moe_routing
