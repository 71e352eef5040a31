#pragma once
/// \file
/// Which compiled `score_row` the CPU backend scores whole rows with (`score_row_on`): the
/// build for the widest vector instructions the CPU runs, with the exps 8 at a time where they
/// give the C library's values (`exp_avx2.hpp`). Every path gives the same values, bit for bit.

#include <cfenv>

#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cpu/simd/avx512_warnings.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"
#include "moe_routing/cpu/simd/exp_avx2.hpp"
#include "moe_routing/cpu/simd/group_score_avx2.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

namespace moe_routing::cpu {

namespace detail {
#if MOE_ROUTING_X86_KERNELS
/// `score_row` with everything it calls inlined and compiled for one instruction set (`TARGET`):
/// the conversions, maxima, divisions and keys over all E experts of a row, which a consumer's
/// build for the x86-64 baseline otherwise runs 4 lanes (or 1) at a time (Lynx-Acc's
/// confidence, every full-softmax policy and every row with a bias or group limit score each
/// row this way). The same values bit for bit: the exps are `std::exp`'s (the library call, or
/// `vector_exp` where it gives the same values), the sums keep their order (`weight_sum`) and
/// the group scores are taken 8 members at a time (`group_scores_avx2`) from the same orders.
/// One definition per instruction set, since a target attribute cannot be a template parameter.
#define MOE_ROUTING_FLATTENED_SCORE_ROW(NAME, TARGET)                                                         \
  template <score_element Element, class ExpInPlace>                                                          \
  [[gnu::flatten]] TARGET row_stats NAME(const Element* row, int experts, scoring mode, const float* bias,    \
                                         const group_limit& groups, float* p, rank_key* keys, float* scratch, \
                                         ExpInPlace exp_in_place) noexcept {                                  \
    return score_row(row, experts, mode, bias, groups, p, keys, scratch, exp_in_place, group_scores_avx2{});  \
  }
MOE_ROUTING_AVX512_WARNINGS_OFF
MOE_ROUTING_FLATTENED_SCORE_ROW(score_row_avx512, MOE_ROUTING_TARGET_AVX512)
MOE_ROUTING_AVX512_WARNINGS_ON
MOE_ROUTING_FLATTENED_SCORE_ROW(score_row_avx2, MOE_ROUTING_TARGET_AVX2)
#undef MOE_ROUTING_FLATTENED_SCORE_ROW
#endif

/// Which compiled `score_row` a thread scores rows with: the widest vector build the CPU runs,
/// and whether its exps are `vector_exp` (where they give the C library's values) or the
/// library's own.
struct score_row_path {
  isa_level width = isa_level::portable;
  bool vector_exp = false;
};

/// The path for rows scored on this thread (a row of DeepSeek-V3's shape takes about 3000 cycles;
/// this about 20). Asked on the thread that scores, since the rounding mode is each thread's own
/// and the vector exps match glibc's only when rounding to nearest (glibc's overflow and
/// underflow follow the mode). The mode is read first: the one-time sample check
/// (`vector_exp_matches_library`) must run rounding to nearest, or it would fail and leave the
/// vector exps off for the rest of the process.
inline score_row_path choose_score_row_path() noexcept {
#if MOE_ROUTING_X86_KERNELS
  if (cpu_runs(isa_level::avx2)) {
    const bool vector = std::fegetround() == FE_TONEAREST && vector_exp_matches_library();
    return {cpu_runs(isa_level::avx512) ? isa_level::avx512 : isa_level::avx2, vector};
  }
#endif
  return {};
}

/// `choose_score_row_path()`, asked at the first row of a block that needs it: a block that
/// scores no whole row (softmax rows ranked by their logits, which take the top-k-only path)
/// never asks. Asked per block regardless, `fegetround` alone was 1.9% of a vanilla routing call
/// at n = 1 on Zen 3 (a `perf` profile).
class score_row_path_once {
 public:
  score_row_path get() noexcept {
    if (!chosen_) {
      path_ = choose_score_row_path();
      chosen_ = true;
    }
    return path_;
  }

 private:
  score_row_path path_{};
  bool chosen_ = false;
};

#if MOE_ROUTING_X86_KERNELS
template <score_element Element, class ExpInPlace>
row_stats score_row_flattened(isa_level width, const Element* row, int experts, scoring mode, const float* bias,
                              const group_limit& groups, float* p, rank_key* keys, float* scratch,
                              ExpInPlace exp_in_place) noexcept {
  if (width >= isa_level::avx512) {
    return score_row_avx512(row, experts, mode, bias, groups, p, keys, scratch, exp_in_place);
  }
  return score_row_avx2(row, experts, mode, bias, groups, p, keys, scratch, exp_in_place);
}
#endif

/// `score_row` on `path`: the same values on every path, bit for bit.
template <score_element Element>
row_stats score_row_on(score_row_path path, const Element* row, int experts, scoring mode, const float* bias,
                       const group_limit& groups, float* p, rank_key* keys, float* scratch) noexcept {
#if MOE_ROUTING_X86_KERNELS
  if (path.width >= isa_level::avx2) {
    return path.vector_exp
               ? score_row_flattened(path.width, row, experts, mode, bias, groups, p, keys, scratch, vector_exp{})
               : score_row_flattened(path.width, row, experts, mode, bias, groups, p, keys, scratch, library_exp{});
  }
#endif
  return score_row(row, experts, mode, bias, groups, p, keys, scratch);
}
}  // namespace detail

}  // namespace moe_routing::cpu
