#pragma once
/// \file
/// The best k of a whole row of rank keys (`top_k_of_keys`), as the scoring pass needs them for
/// every row it scores in full: rows with a bias (DeepSeek-V3's e_score_correction_bias), a
/// group limit, or a full softmax. Once k keys are held, a block of 16 keys is compared with
/// the k-th all at once (4 keys of 64 bits a register, unsigned compares emulated by flipping
/// the top bit) and only the keys that beat it are inserted. The one-by-one scan
/// (`top_k_by_insertion`) took the maximum of each block first and, for a block that beat the
/// k-th key, tried all 16, each insertion a branch that went either way: 31% of a DeepSeek-V3
/// routing call once its exps were vectorized (`exp_avx2.hpp`; docs/benchmarks/routing_avx2.md).
///
/// The result is the same keys in the same order: rank keys are distinct (each holds its
/// expert's index), so the best k of a row is one set whatever order its keys are tried in,
/// and a key that does not beat the k-th key of the moment cannot be among them.

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

namespace moe_routing::cpu {

namespace detail {
#if MOE_ROUTING_X86_KERNELS
/// `top_k_of_keys` with the blocks compared 4 keys a register.
MOE_ROUTING_TARGET_AVX2 inline void top_k_of_keys_avx2(const rank_key* keys, int experts, int count,
                                                       rank_key* top_keys) noexcept {
  int filled = 0, e = 0;
  for (; e < experts && filled < count; ++e) insert_ranked(top_keys, filled, count, keys[e]);
  const __m256i top_bit = _mm256_set1_epi64x(static_cast<long long>(rank_key{1} << 63));
  for (; e + top_k_scan_block <= experts; e += top_k_scan_block) {
    const __m256i last = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(top_keys[count - 1])), top_bit);
    unsigned beats = 0;
    for (int q = 0; q < top_k_scan_block / 4; ++q) {
      const __m256i four =
          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + e + 4 * q)), top_bit);
      beats |= static_cast<unsigned>(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(four, last))))
               << (4 * q);
    }
    for (; beats != 0; beats &= beats - 1) insert_ranked(top_keys, filled, count, keys[e + __builtin_ctz(beats)]);
  }
  for (; e < experts; ++e) insert_ranked(top_keys, filled, count, keys[e]);
}
#endif
}  // namespace detail

/// The best `count` keys of `keys[0..experts)` into `top_keys`, in rank order (`top_k_of_keys`;
/// count <= experts), by the CPU's best path.
inline void top_k_of_keys_dispatched(const rank_key* keys, int experts, int count, rank_key* top_keys) noexcept {
#if MOE_ROUTING_X86_KERNELS
  if (cpu_runs(isa_level::avx2)) return detail::top_k_of_keys_avx2(keys, experts, count, top_keys);
#endif
  top_k_of_keys(keys, experts, count, top_keys);
}

}  // namespace moe_routing::cpu
