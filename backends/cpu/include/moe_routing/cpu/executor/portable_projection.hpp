#pragma once
/// \file
/// The portable row kernel: plain loops over 16 logical lanes that the compiler maps onto
/// whatever SIMD the build targets. Each weight row is converted to float 16 values at a
/// time (bfloat16: a shift) and used for every token of the tile; the lanes are combined by
/// a halving tree (lane l with l + 8, then l + 4, l + 2, l + 1), the order
/// `_mm512_reduce_add_ps` uses, then the columns past the last whole group of 16 are added.

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/row_sweep.hpp"

namespace moe_routing::cpu {

constexpr int tile_tokens_of(portable_kernel) noexcept { return 4; }

namespace detail {

inline constexpr int portable_lanes = 16;

inline float reduce_lanes(float (&lanes)[portable_lanes]) noexcept {
  for (int half = portable_lanes / 2; half >= 1; half /= 2) {
    for (int l = 0; l < half; ++l) lanes[l] += lanes[l + half];
  }
  return lanes[0];
}

template <int Tokens, class Weight>
void portable_tile(const row_block<Weight>& block, int cols, const float* __restrict x, std::ptrdiff_t x_stride,
                   tile_sums& sums) noexcept {
  float acc[block_rows][Tokens][portable_lanes] = {};
  const int full = cols / portable_lanes * portable_lanes;
  for (int c = 0; c < full; c += portable_lanes) {
    for (int i = 0; i < block_rows; ++i) {
      float w[portable_lanes];
      for (int l = 0; l < portable_lanes; ++l) w[l] = to_float(block.rows[i][c + l]);
      for (int t = 0; t < Tokens; ++t) {
        const float* xt = x + t * x_stride + c;
        for (int l = 0; l < portable_lanes; ++l) acc[i][t][l] += w[l] * xt[l];
      }
    }
  }
  for (int i = 0; i < block_rows; ++i) {
    for (int t = 0; t < Tokens; ++t) {
      float sum = reduce_lanes(acc[i][t]);
      for (int c = full; c < cols; ++c) sum += to_float(block.rows[i][c]) * x[t * x_stride + c];
      sums[i][t] = sum;
    }
  }
}

}  // namespace detail

/// Sums of the block's rows with `tokens` (1..4) float activation rows.
template <class Weight>
void multiply_tile(portable_kernel, const row_block<Weight>& block, int cols, const float* x, std::ptrdiff_t x_stride,
                   int tokens, tile_sums& sums) noexcept {
  switch (tokens) {
    case 1:
      return detail::portable_tile<1>(block, cols, x, x_stride, sums);
    case 2:
      return detail::portable_tile<2>(block, cols, x, x_stride, sums);
    case 3:
      return detail::portable_tile<3>(block, cols, x, x_stride, sums);
    default:
      return detail::portable_tile<4>(block, cols, x, x_stride, sums);
  }
}

}  // namespace moe_routing::cpu
