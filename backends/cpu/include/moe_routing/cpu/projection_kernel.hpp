#pragma once
/// \file
/// The executor's inner kernel: `out[t][r] = sum_c W[r][c] * x[t][c]` for a block of weight
/// rows and every token of an expert. Each weight row is read once and converted to float
/// in registers (bfloat16: a shift; never copied to a float buffer), then used for up to
/// `token_block` tokens at a time while it sits in L1. Sums run in 16 logical lanes combined
/// in a fixed order, which the compiler maps onto SIMD registers (one AVX-512 register,
/// two AVX2, four SSE) without reassociating anything: the same bits on every x86-64 build.

#include <algorithm>
#include <cstddef>

#include "moe_routing/core/half.hpp"

namespace moe_routing::cpu {

/// Tuning data: lanes per partial sum and tokens sharing one pass over a weight row.
inline constexpr int projection_lanes = 16;
inline constexpr int token_block = 4;

namespace detail {

template <int Tokens, class Weight>
inline void project_row(const Weight* __restrict row, int cols, const float* __restrict x, std::ptrdiff_t x_stride,
                        float* __restrict out, std::ptrdiff_t out_stride) {
  float acc[Tokens][projection_lanes] = {};
  int c = 0;
  for (; c + projection_lanes <= cols; c += projection_lanes) {
    float w[projection_lanes];
    for (int l = 0; l < projection_lanes; ++l) w[l] = to_float(row[c + l]);
    for (int t = 0; t < Tokens; ++t) {
      const float* xt = x + t * x_stride + c;
      for (int l = 0; l < projection_lanes; ++l) acc[t][l] += w[l] * xt[l];
    }
  }
  for (int t = 0; t < Tokens; ++t) {
    float sum = 0;
    for (int l = 0; l < projection_lanes; ++l) sum += acc[t][l];
    for (int tail = c; tail < cols; ++tail) sum += to_float(row[tail]) * x[t * x_stride + tail];
    out[t * out_stride] = sum;
  }
}

}  // namespace detail

/// Rows [row_begin, row_end) of `matrix` (`cols` wide, row-major) times `m` token vectors
/// (`x`, rows `x_stride` apart): writes `out[t * out_stride + r]`.
template <class Weight>
void project_rows(const Weight* matrix, int row_begin, int row_end, int cols, const float* x, std::ptrdiff_t x_stride,
                  int m, float* out, std::ptrdiff_t out_stride) {
  for (int r = row_begin; r < row_end; ++r) {
    const Weight* row = matrix + static_cast<std::ptrdiff_t>(r) * cols;
    int t = 0;
    for (; t + token_block <= m; t += token_block) {
      detail::project_row<token_block>(row, cols, x + t * x_stride, x_stride, out + t * out_stride + r, out_stride);
    }
    switch (m - t) {
      case 3: detail::project_row<3>(row, cols, x + t * x_stride, x_stride, out + t * out_stride + r, out_stride); break;
      case 2: detail::project_row<2>(row, cols, x + t * x_stride, x_stride, out + t * out_stride + r, out_stride); break;
      case 1: detail::project_row<1>(row, cols, x + t * x_stride, x_stride, out + t * out_stride + r, out_stride); break;
      default: break;
    }
  }
}

static_assert(token_block == 4, "project_rows' tail switch covers token_block - 1 = 3 leftover tokens");

}  // namespace moe_routing::cpu
