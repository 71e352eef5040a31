#pragma once
/// \file
/// The executor's projections on Intel AMX tiles, for bfloat16 weights with activations
/// rounded to bfloat16 (what the engines' bf16 GEMMs compute: bf16 products, float32 sums).
/// One TDPBF16PS multiplies a 16 x 32 block of weight rows, loaded straight from the
/// row-major matrix, by 32 columns of 16 tokens, so the tiles do in one instruction what
/// takes the vector unit about 32; at decode batch sizes the projection becomes bound by
/// memory again instead of by multiply-adds (docs/executor.md).
///
/// Tokens enter as a "VNNI" packed copy: per group of 16 tokens and per column pair
/// (c, c + 1), the 16 tokens' two values side by side, one 64-byte tile row. Built only
/// when the compiler targets AMX (-march=native on such a CPU, or -mamx-tile -mamx-bf16)
/// on Linux, which must also grant the process the tile state once (`available()`).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "moe_routing/core/half.hpp"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__linux__)
#define MOE_ROUTING_HAS_AMX 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define MOE_ROUTING_HAS_AMX 0
#endif

namespace moe_routing::cpu::amx {

/// Tile geometry: weight rows per tile, columns (k) per tile, tokens per tile.
inline constexpr int tile_rows = 16;
inline constexpr int tile_columns = 32;
inline constexpr int tile_tokens = 16;
/// Tuning data: how far ahead (in columns) each weight row is prefetched.
inline constexpr int prefetch_columns = 256;

/// Whether this build has the AMX path and the OS lets the process use tile data
/// (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once).
inline bool available() noexcept {
#if MOE_ROUTING_HAS_AMX
  static const bool granted = [] {
    constexpr long request_permission = 0x1023, tile_data = 18;
    return syscall(SYS_arch_prctl, request_permission, tile_data) == 0;
  }();
  return granted;
#else
  return false;
#endif
}

/// Whether a projection with `rows` output rows per work item and `columns` inputs fits
/// whole tiles (anything else takes the vector kernel).
constexpr bool fits(int columns, int rows) noexcept { return columns % tile_columns == 0 && rows % tile_rows == 0; }

/// Tokens rounded up to whole tiles: the packed copy's padding is zero.
constexpr int padded_tokens(int tokens) noexcept { return (tokens + tile_tokens - 1) / tile_tokens * tile_tokens; }

/// Where token t's value of column c sits in a packed copy of `columns` columns.
constexpr std::size_t packed_index(int token, int c, int columns) noexcept {
  return static_cast<std::size_t>(token / tile_tokens) * tile_tokens * static_cast<std::size_t>(columns) +
         static_cast<std::size_t>(c / 2) * (2 * tile_tokens) + static_cast<std::size_t>(token % tile_tokens) * 2 +
         static_cast<std::size_t>(c % 2);
}

#if MOE_ROUTING_HAS_AMX
namespace detail {
/// The 64-byte LDTILECFG operand (palette 1).
struct alignas(64) tile_config {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};
}  // namespace detail

/// Rows [row_begin, row_end) of `matrix` (`columns` wide, row-major; the count a multiple
/// of 16, `columns` a multiple of 32) times `tokens` packed token vectors:
/// writes `out[t * out_stride + r]`. Tiles: 0-1 sums of two 16-row blocks, 2-3 weights, 4 tokens.
inline void project_rows(const bfloat16* matrix, int row_begin, int row_end, int columns, const bfloat16* packed,
                         int tokens, float* out, std::ptrdiff_t out_stride) noexcept {
  detail::tile_config config;
  for (int t = 0; t < 5; ++t) config.bytes_per_row[t] = 64, config.rows[t] = 16;
  _tile_loadconfig(&config);
  alignas(64) float sums[2][tile_rows][tile_tokens];
  const std::size_t stride = static_cast<std::size_t>(columns) * sizeof(bfloat16);
  for (int r0 = row_begin; r0 < row_end; r0 += 2 * tile_rows) {
    const bool pair = r0 + tile_rows < row_end;
    const bfloat16* first = matrix + static_cast<std::ptrdiff_t>(r0) * columns;
    const bfloat16* second = first + static_cast<std::ptrdiff_t>(tile_rows) * columns;
    for (int t0 = 0; t0 < tokens; t0 += tile_tokens) {
      const bfloat16* group = packed + static_cast<std::ptrdiff_t>(t0) * columns;
      _tile_zero(0);
      _tile_zero(1);
      for (int c = 0; c < columns; c += tile_columns) {
        if (t0 == 0 && c + prefetch_columns < columns) {  // one stream per weight row: help the prefetcher
          for (int r = 0; r < (pair ? 2 : 1) * tile_rows; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(first + static_cast<std::ptrdiff_t>(r) * columns + c + prefetch_columns), _MM_HINT_T0);
          }
        }
        _tile_loadd(4, group + static_cast<std::ptrdiff_t>(c) * tile_tokens, 64);
        _tile_loadd(2, first + c, stride);
        _tile_dpbf16ps(0, 2, 4);
        if (pair) {
          _tile_loadd(3, second + c, stride);
          _tile_dpbf16ps(1, 3, 4);
        }
      }
      _tile_stored(0, sums[0], 64);
      if (pair) _tile_stored(1, sums[1], 64);
      const int count = std::min(tile_tokens, tokens - t0);
      for (int block = 0; block < (pair ? 2 : 1); ++block) {
        for (int t = 0; t < count; ++t) {
          float* row = out + static_cast<std::ptrdiff_t>(t0 + t) * out_stride + r0 + block * tile_rows;
          for (int r = 0; r < tile_rows; ++r) row[r] = sums[block][r][t];
        }
      }
    }
  }
  _tile_release();
}
#endif

}  // namespace moe_routing::cpu::amx
