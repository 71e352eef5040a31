#pragma once
/// \file
/// The executor's inner kernel: `out[t][r] = sum_c W[r][c] * x[t][c]` for a block of weight
/// rows and every token of an expert. Each weight row is read once and converted to float
/// in registers (bfloat16: a shift; never copied to a float buffer), then used for up to
/// `token_block` tokens at a time while it sits in L1. Sums run in 16 lanes combined by a
/// halving tree. One overload per kernel tag (`kernel_tags.hpp`): `portable_kernel` is plain
/// loops the compiler maps onto whatever SIMD the build targets; `avx512_kernel` (AVX-512
/// builds) uses intrinsics: two weight rows per pass, prefetched, and columns in chunks so
/// every token's input chunk stays in L1 while the weights stream once. Both add in the same
/// order; whether a multiply-add is fused depends on the build, so results agree to float
/// rounding, not bit for bit, across ISAs.

#include <algorithm>
#include <cstddef>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"

namespace moe_routing::cpu {

/// Tuning data: lanes per partial sum and tokens sharing one pass over a weight row.
inline constexpr int projection_lanes = 16;
inline constexpr int token_block = 4;

namespace detail {

/// Adds the columns past the last full group of 16 to each token's lane-reduced sum, and
/// stores the results.
template <int Tokens, class Weight>
inline void finish_row(const float (&sums)[Tokens], const Weight* row, int c, int cols, const float* x,
                       std::ptrdiff_t x_stride, float* out, std::ptrdiff_t out_stride) {
  for (int t = 0; t < Tokens; ++t) {
    float sum = sums[t];
    for (int tail = c; tail < cols; ++tail) sum += to_float(row[tail]) * x[t * x_stride + tail];
    out[t * out_stride] = sum;
  }
}

/// The 16 lanes added as a halving tree (lane l with l + 8, then l + 4, l + 2, l + 1):
/// the order `_mm512_reduce_add_ps` uses, so both paths add alike.
inline float reduce_lanes(float (&lanes)[projection_lanes]) {
  for (int half = projection_lanes / 2; half >= 1; half /= 2) {
    for (int l = 0; l < half; ++l) lanes[l] += lanes[l + half];
  }
  return lanes[0];
}

/// The portable form: plain loops over 16 logical lanes.
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
  float reduced[Tokens];
  for (int t = 0; t < Tokens; ++t) reduced[t] = reduce_lanes(acc[t]);
  finish_row<Tokens>(reduced, row, c, cols, x, x_stride, out, out_stride);
}

#if defined(__AVX512F__)
/// 16 weights widened to float in one register: bfloat16 by a shift, float16 by vcvtph2ps.
template <class Weight>
inline __m512 load_weights(const Weight* w) {
  if constexpr (std::is_same_v<Weight, float>) {
    return _mm512_loadu_ps(w);
  } else if constexpr (std::is_same_v<Weight, bfloat16>) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  } else {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
  }
}

/// Tuning data for the column-blocked form: columns per chunk, tokens per group, rows per call.
inline constexpr int column_chunk = 512;
inline constexpr int token_group = 16;
inline constexpr int max_block_rows = 32;

/// One chunk of columns for Tokens tokens and a pair of rows, accumulating into the
/// per-(row, token) registers kept in `acc` (row r's token t at acc[r * token_group + t]).
template <int Tokens, class Weight>
inline void chunk_row_pair(const Weight* __restrict row, const Weight* __restrict next, int c_begin, int c_end,
                           const float* __restrict x, std::ptrdiff_t x_stride, __m512* __restrict acc0,
                           __m512* __restrict acc1) {
  __m512 first[Tokens], second[Tokens];
  for (int t = 0; t < Tokens; ++t) first[t] = acc0[t], second[t] = acc1[t];
  constexpr int ahead = 512 / static_cast<int>(sizeof(Weight));
  for (int c = c_begin; c < c_end; c += projection_lanes) {
    _mm_prefetch(reinterpret_cast<const char*>(row + c + ahead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(next + c + ahead), _MM_HINT_T0);
    const __m512 w0 = load_weights(row + c), w1 = load_weights(next + c);
    for (int t = 0; t < Tokens; ++t) {
      const __m512 xt = _mm512_loadu_ps(x + t * x_stride + c);
      first[t] = _mm512_fmadd_ps(w0, xt, first[t]);
      second[t] = _mm512_fmadd_ps(w1, xt, second[t]);
    }
  }
  for (int t = 0; t < Tokens; ++t) acc0[t] = first[t], acc1[t] = second[t];
}

template <int Tokens, class Weight>
inline void chunk_rows(const Weight* matrix, int rows, int cols, int c_begin, int c_end, const float* x,
                       std::ptrdiff_t x_stride, __m512* acc) {
  for (int r = 0; r + 1 < rows; r += 2) {
    const Weight* row = matrix + static_cast<std::ptrdiff_t>(r) * cols;
    __m512* row_acc = acc + r * token_group;
    chunk_row_pair<Tokens>(row, row + cols, c_begin, c_end, x, x_stride, row_acc, row_acc + token_group);
  }
  if (rows % 2 == 1) {  // a last single row: pair it with itself, keep one result
    const Weight* last = matrix + static_cast<std::ptrdiff_t>(rows - 1) * cols;
    __m512 discard[Tokens];
    for (int t = 0; t < Tokens; ++t) discard[t] = _mm512_setzero_ps();
    chunk_row_pair<Tokens>(last, last, c_begin, c_end, x, x_stride, acc + (rows - 1) * token_group, discard);
  }
}
#endif

}  // namespace detail

/// Rows [row_begin, row_end) of `matrix` (`cols` wide, row-major) times `m` token vectors
/// (`x`, rows `x_stride` apart): writes `out[t * out_stride + r]`. The portable form.
template <class Weight>
void project_rows(portable_kernel, const Weight* matrix, int row_begin, int row_end, int cols, const float* x,
                  std::ptrdiff_t x_stride, int m, float* out, std::ptrdiff_t out_stride) {
  for (int r = row_begin; r < row_end; ++r) {
    const Weight* row = matrix + static_cast<std::ptrdiff_t>(r) * cols;
    int t = 0;
    for (; t + token_block <= m; t += token_block) {
      detail::project_row<token_block>(row, cols, x + t * x_stride, x_stride, out + t * out_stride + r, out_stride);
    }
    const float* xt = x + t * x_stride;
    float* ot = out + t * out_stride + r;
    switch (m - t) {
      case 3:
        detail::project_row<3>(row, cols, xt, x_stride, ot, out_stride);
        break;
      case 2:
        detail::project_row<2>(row, cols, xt, x_stride, ot, out_stride);
        break;
      case 1:
        detail::project_row<1>(row, cols, xt, x_stride, ot, out_stride);
        break;
      default:
        break;
    }
  }
}

#if defined(__AVX512F__)
/// The same product with AVX-512 intrinsics.
template <class Weight>
void project_rows(avx512_kernel, const Weight* matrix, int row_begin, int row_end, int cols, const float* x,
                  std::ptrdiff_t x_stride, int m, float* out, std::ptrdiff_t out_stride) {
  // Column-blocked: each token's input chunk stays in L1 while the rows stream past once;
  // per-(row, token) registers wait in an L1 buffer between chunks.
  alignas(64) __m512 acc[detail::max_block_rows * detail::token_group];
  const int full = cols / projection_lanes * projection_lanes;
  for (int r0 = row_begin; r0 < row_end; r0 += detail::max_block_rows) {
    const int rows = std::min(detail::max_block_rows, row_end - r0);
    const Weight* block = matrix + static_cast<std::ptrdiff_t>(r0) * cols;
    for (int t0 = 0; t0 < m; t0 += detail::token_group) {
      const int tokens = std::min(detail::token_group, m - t0);
      for (int i = 0; i < rows * detail::token_group; ++i) acc[i] = _mm512_setzero_ps();
      for (int c0 = 0; c0 < full; c0 += detail::column_chunk) {
        const int c1 = std::min(c0 + detail::column_chunk, full);
        for (int t = 0; t < tokens; t += token_block) {
          const float* xt = x + (t0 + t) * x_stride;
          switch (std::min(token_block, tokens - t)) {
            case 4:
              detail::chunk_rows<4>(block, rows, cols, c0, c1, xt, x_stride, acc + t);
              break;
            case 3:
              detail::chunk_rows<3>(block, rows, cols, c0, c1, xt, x_stride, acc + t);
              break;
            case 2:
              detail::chunk_rows<2>(block, rows, cols, c0, c1, xt, x_stride, acc + t);
              break;
            default:
              detail::chunk_rows<1>(block, rows, cols, c0, c1, xt, x_stride, acc + t);
              break;
          }
        }
      }
      for (int rr = 0; rr < rows; ++rr) {
        const Weight* row = block + static_cast<std::ptrdiff_t>(rr) * cols;
        for (int t = 0; t < tokens; ++t) {
          float sum = _mm512_reduce_add_ps(acc[rr * detail::token_group + t]);
          for (int tail = full; tail < cols; ++tail) sum += to_float(row[tail]) * x[(t0 + t) * x_stride + tail];
          out[(t0 + t) * out_stride + r0 + rr] = sum;
        }
      }
    }
  }
}
#endif

static_assert(token_block == 4, "project_rows' tail switches cover token_block - 1 = 3 leftover tokens");

}  // namespace moe_routing::cpu
