#pragma once
/// \file
/// The AVX512_BF16 row kernel: bfloat16 weights times bfloat16 activations with vdpbf16ps,
/// which multiplies 16 pairs of adjacent columns and adds both products to a float lane in
/// one instruction: 32 columns per weight load, no widening, half the multiply-adds of the
/// float kernel. The products are those the AMX tiles form (bf16 x bf16, exact in float),
/// summed in float; a row's last partial 32 columns are read with masked loads (zero pairs
/// add nothing). The instruction treats bfloat16 subnormals as zero, as the tiles do.
/// Compiled for AVX512_BF16 by target attributes (`isa_targets.hpp`).

#include <cstddef>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/row_sweep.hpp"
#include "moe_routing/cpu/simd/avx512_warnings.hpp"
#include "moe_routing/cpu/simd/four_lane_sums.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"
#include "moe_routing/cpu/simd/keep_in_register.hpp"
#include "moe_routing/cpu/simd/lane_masks.hpp"

#if MOE_ROUTING_X86_KERNELS
MOE_ROUTING_AVX512_WARNINGS_OFF

namespace moe_routing::cpu {

constexpr int tile_tokens_of(avx512_bf16_kernel) noexcept { return 6; }

/// Sweeps of 1-3 tokens take 8 rows at a time (`wide_tile_tokens_of`), at most 24 accumulators
/// as in the 4 x 6 tile. On Zen 4 the memory-bound layer's paired fraction rose from 0.88, 0.89,
/// 0.87 and 0.76 to 0.92, 0.92, 0.90 and 0.78 at n = 1, 4, 16 and 64 with the machine's read at
/// 31-35 GB/s, and by 3-10 points in the fewer samples at 51-61 GB/s; the compute alone moved by
/// under 2% (docs/benchmarks/executor_zen4.md). The 8 x 3 tile holds 24 accumulators and 8
/// weight vectors, one more than the 32 registers: GCC 12 keeps one accumulator on the stack (a
/// load and a store per 24 `vdpbf16ps`), which a pass this memory-bound does not feel.
constexpr int wide_tile_tokens_of(avx512_bf16_kernel) noexcept { return 3; }

/// A one-token sweep of consecutive rows (the down projection of an expert with one token) is
/// read in address order, each row to its end before the next, so the core reads one stream;
/// blocks of 8 rows read 8 streams a row apart. On Zen 4, with the memory in its fast state (the
/// plain read at 48-53 GB/s), blocks of 8 one-token rows drew 1.02, 0.94 and 0.91 of the read
/// with rows of 4, 3 and 2 KiB, but 0.64-0.75 with Qwen3's down rows (h = 768: 1.5 KiB); 16 or
/// 24 rows per block drew 0.72-0.75, a longer reach less. In address order those rows drew 0.97-1.03 of
/// it (1.00-1.03 in the slow state, where blocks drew 0.88-0.99). In the executor the paired
/// fraction at n = 1 rose from 0.73 to 0.82 in the fast state and from 0.92 to 0.96 in the slow
/// one (docs/benchmarks/executor_zen4.md, the eighth session). Used only where the first pass
/// streams into L2 (`stream_cache.hpp`), where it was measured; with 2 or 3 tokens the address
/// order drew no more than the blocks, so those keep the wide tiles.
constexpr bool reads_one_token_rows_in_order(avx512_bf16_kernel) noexcept { return true; }

/// Tuning data: how far ahead of its reads `multiply_rows_in_order` asks for rows into L2, in
/// bytes (on Zen 4 1 and 2 KiB drew 0.97-1.03 of the read in the fast memory state, 3 KiB 0.82).
inline constexpr int in_order_prefetch_bytes = 2048;

namespace detail {

/// 32 bfloat16 values at `p` where `lanes` is set (zero elsewhere), as vdpbf16ps's operand.
MOE_ROUTING_TARGET_AVX512_BF16 inline __m512bh load_pairs(const bfloat16* p, __mmask32 lanes) noexcept {
  return (__m512bh)_mm512_maskz_loadu_epi16(lanes, p);
}

/// One step of a tile: the 32 columns from `c` on that `valid` holds.
template <int Rows, int Tokens, prefetch_mode Mode>
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX512_BF16 inline void bf16_step(
    __m512 (&acc)[Rows][Tokens], const row_block<bfloat16, Rows>& block, int c, int cols, const bfloat16* __restrict x,
    std::ptrdiff_t x_stride, __mmask32 valid) noexcept {
  prefetch_step<Mode>(block, c, cols);
  __m512bh w[Rows];
  MOE_ROUTING_UNROLL
  for (int i = 0; i < Rows; ++i) {
    w[i] = load_pairs(block.rows[i] + c, valid);
    // Used once per token. GCC 12 otherwise chose, in the 3-token tile only, to load each
    // weight vector once per token (15 loads for 12 vdpbf16ps, where the core issues about one
    // 64-byte load per two vdpbf16ps): that tile ran 2.7-4.3 G vdpbf16ps per second in L1 while
    // the 2- and 4-token ones ran 4.2-4.7 and 6.4; with it, 6.0-6.1
    // (docs/benchmarks/executor_zen5.md).
    if constexpr (Tokens > 1) keep_in_register(w[i]);
  }
  MOE_ROUTING_UNROLL
  for (int t = 0; t < Tokens; ++t) {
    const __m512bh xt = load_pairs(x + t * x_stride + c, valid);
    MOE_ROUTING_UNROLL
    for (int i = 0; i < Rows; ++i) acc[i][t] = _mm512_dpbf16_ps(acc[i][t], w[i], xt);
  }
}

/// A tile: every whole step of 32 columns, then the row's last partial step masked.
template <int Rows, int Tokens, prefetch_mode Mode>
MOE_ROUTING_TARGET_AVX512_BF16 void bf16_tile(const row_block<bfloat16, Rows>& block, int cols,
                                              const bfloat16* __restrict x, std::ptrdiff_t x_stride,
                                              block_sums<Rows>& sums) noexcept {
  constexpr int columns = 32;
  __m512 acc[Rows][Tokens];
  MOE_ROUTING_UNROLL
  for (auto& row : acc) {
    MOE_ROUTING_UNROLL
    for (auto& a : row) a = _mm512_setzero_ps();
  }
  const int whole = cols - cols % columns;
  for (int c = 0; c < whole; c += columns) {
    bf16_step<Rows, Tokens, Mode>(acc, block, c, cols, x, x_stride, ~__mmask32(0));
  }
  if (whole < cols) {
    bf16_step<Rows, Tokens, Mode>(acc, block, whole, cols, x, x_stride, first_lanes<__mmask32>(cols - whole));
  }
  store_lane_sums(acc, sums);
}

template <int Rows, int Tokens>
MOE_ROUTING_TARGET_AVX512_BF16 void bf16_tile(const row_block<bfloat16, Rows>& block, int cols,
                                              const bfloat16* __restrict x, std::ptrdiff_t x_stride,
                                              block_sums<Rows>& sums) noexcept {
  with_prefetch_mode(
      block, [&](auto mode) { bf16_tile<Rows, Tokens, decltype(mode)::value>(block, cols, x, x_stride, sums); });
}

}  // namespace detail

/// `out[r] = row r . x` for the `rows` rows of a row-major matrix `cols` wide from `first_row`
/// (`reads_one_token_rows_in_order`): each row to its end before the next, in two chains of
/// vdpbf16ps (even and odd 32-column steps, so one chain's latency does not pace the row), its
/// last partial step masked. The prefetches run on past a row's end into the next row.
MOE_ROUTING_TARGET_AVX512_BF16 inline void multiply_rows_in_order(avx512_bf16_kernel, const bfloat16* first_row,
                                                                  int rows, int cols, const bfloat16* x,
                                                                  float* out) noexcept {
  constexpr int columns = 32;
  constexpr __mmask32 all = ~__mmask32(0);
  for (int r = 0; r < rows; ++r) {
    const bfloat16* row = first_row + static_cast<std::ptrdiff_t>(r) * cols;
    __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
    int c = 0;
    for (; c + 2 * columns <= cols; c += 2 * columns) {
      prefetch_address<2>(address_on(row + c, in_order_prefetch_bytes));
      prefetch_address<2>(address_on(row + c + columns, in_order_prefetch_bytes));
      even = _mm512_dpbf16_ps(even, detail::load_pairs(row + c, all), detail::load_pairs(x + c, all));
      odd = _mm512_dpbf16_ps(odd, detail::load_pairs(row + c + columns, all), detail::load_pairs(x + c + columns, all));
    }
    for (; c < cols; c += columns) {  // at most one whole step, then the masked rest
      const __mmask32 valid = first_lanes<__mmask32>(cols - c);
      prefetch_address<2>(address_on(row + c, in_order_prefetch_bytes));
      even = _mm512_dpbf16_ps(even, detail::load_pairs(row + c, valid), detail::load_pairs(x + c, valid));
    }
    out[r] = _mm512_reduce_add_ps(_mm512_add_ps(even, odd));
  }
}

/// Sums of the block's rows with `tokens` (1..6) bfloat16 activation rows.
MOE_ROUTING_TARGET_AVX512_BF16 inline void multiply_tile(avx512_bf16_kernel, const row_block<bfloat16>& block, int cols,
                                                         const bfloat16* x, std::ptrdiff_t x_stride, int tokens,
                                                         tile_sums& sums) noexcept {
  switch (tokens) {
    case 1:
      return detail::bf16_tile<block_rows, 1>(block, cols, x, x_stride, sums);
    case 2:
      return detail::bf16_tile<block_rows, 2>(block, cols, x, x_stride, sums);
    case 3:
      return detail::bf16_tile<block_rows, 3>(block, cols, x, x_stride, sums);
    case 4:
      return detail::bf16_tile<block_rows, 4>(block, cols, x, x_stride, sums);
    case 5:
      return detail::bf16_tile<block_rows, 5>(block, cols, x, x_stride, sums);
    default:
      return detail::bf16_tile<block_rows, 6>(block, cols, x, x_stride, sums);
  }
}

/// Sums of the wide block's rows with `tokens` (1..3) bfloat16 activation rows.
MOE_ROUTING_TARGET_AVX512_BF16 inline void multiply_tile(avx512_bf16_kernel,
                                                         const row_block<bfloat16, wide_block_rows>& block, int cols,
                                                         const bfloat16* x, std::ptrdiff_t x_stride, int tokens,
                                                         block_sums<wide_block_rows>& sums) noexcept {
  switch (tokens) {
    case 1:
      return detail::bf16_tile<wide_block_rows, 1>(block, cols, x, x_stride, sums);
    case 2:
      return detail::bf16_tile<wide_block_rows, 2>(block, cols, x, x_stride, sums);
    default:
      return detail::bf16_tile<wide_block_rows, 3>(block, cols, x, x_stride, sums);
  }
}

}  // namespace moe_routing::cpu

MOE_ROUTING_AVX512_WARNINGS_ON
#endif
