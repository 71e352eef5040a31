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

/// Writes the packed copy of `tokens` float rows (`row_of(p)`, each `columns` long, an even
/// count) rounded to bfloat16, zero up to whole tiles: `packed[packed_index(p, c, columns)]`.
/// Walks each row once in order and stores its (c, c + 1) pairs 64 bytes apart, so no
/// index is recomputed per element (the executor packs every expert's inputs this way).
template <class RowOf>
void pack_rows(RowOf&& row_of, int tokens, int columns, bfloat16* packed) noexcept {
  const int pairs = columns / 2;
  for (int p = 0; p < padded_tokens(tokens); ++p) {
    auto* out = reinterpret_cast<std::uint32_t*>(packed + packed_index(p, 0, columns));
    if (p >= tokens) {
      for (int j = 0; j < pairs; ++j) out[static_cast<std::ptrdiff_t>(j) * tile_tokens] = 0;
      continue;
    }
    const float* in = row_of(p);
    for (int j = 0; j < pairs; ++j) {
      const std::uint32_t low = to_bfloat16(in[2 * j]).bits, high = to_bfloat16(in[2 * j + 1]).bits;
      out[static_cast<std::ptrdiff_t>(j) * tile_tokens] = low | high << 16;
    }
  }
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

/// Sums of two 16-row weight blocks for one group of up to 16 tokens: [block][row][token].
using block_sums = float[2][tile_rows][tile_tokens];

/// Tiles 0-1 sums of the two blocks, 2-3 their weights, 4 the tokens; all 16 x 64 bytes.
inline void configure_tiles() noexcept {
  tile_config config;
  for (int t = 0; t < 5; ++t) config.bytes_per_row[t] = 64, config.rows[t] = 16;
  // Not _tile_loadconfig: GCC 12's tells the compiler that LDTILECFG reads 8 bytes, so at -O2
  // the stores to the other 56 were dropped and the instruction faulted on garbage; an
  // operand naming the whole struct keeps every byte.
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

/// Multiplies the 16-row blocks `first` and `second` (null: only `first`) of a row-major
/// matrix `columns` wide by every group of 16 packed tokens, handing each group's sums to
/// `take(sums, first_token, count)`. Needs `configure_tiles()` beforehand.
template <class Take>
inline void multiply_blocks(const bfloat16* first, const bfloat16* second, int columns, const bfloat16* packed, int tokens,
                            Take&& take) noexcept {
  alignas(64) block_sums sums;
  const std::size_t stride = static_cast<std::size_t>(columns) * sizeof(bfloat16);
  for (int t0 = 0; t0 < tokens; t0 += tile_tokens) {
    const bfloat16* group = packed + static_cast<std::ptrdiff_t>(t0) * columns;
    _tile_zero(0);
    _tile_zero(1);
    for (int c = 0; c < columns; c += tile_columns) {
      if (t0 == 0 && c + prefetch_columns < columns) {  // one stream per weight row: help the prefetcher
        for (int r = 0; r < tile_rows; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(first + static_cast<std::ptrdiff_t>(r) * columns + c + prefetch_columns), _MM_HINT_T0);
          if (second != nullptr) {
            _mm_prefetch(reinterpret_cast<const char*>(second + static_cast<std::ptrdiff_t>(r) * columns + c + prefetch_columns), _MM_HINT_T0);
          }
        }
      }
      _tile_loadd(4, group + static_cast<std::ptrdiff_t>(c) * tile_tokens, 64);
      _tile_loadd(2, first + c, stride);
      _tile_dpbf16ps(0, 2, 4);
      if (second != nullptr) {
        _tile_loadd(3, second + c, stride);
        _tile_dpbf16ps(1, 3, 4);
      }
    }
    _tile_stored(0, sums[0], 64);
    if (second != nullptr) _tile_stored(1, sums[1], 64);
    take(sums, t0, std::min(tile_tokens, tokens - t0));
  }
}
}  // namespace detail

/// Rows [row_begin, row_end) of `matrix` (`columns` wide, row-major; the count a multiple
/// of 16, `columns` a multiple of 32) times `tokens` packed token vectors:
/// writes `out[t * out_stride + r]`.
inline void project_rows(const bfloat16* matrix, int row_begin, int row_end, int columns, const bfloat16* packed,
                         int tokens, float* out, std::ptrdiff_t out_stride) noexcept {
  detail::configure_tiles();
  for (int r0 = row_begin; r0 < row_end; r0 += 2 * tile_rows) {
    const int blocks = r0 + tile_rows < row_end ? 2 : 1;
    const bfloat16* first = matrix + static_cast<std::ptrdiff_t>(r0) * columns;
    const bfloat16* second = blocks == 2 ? first + static_cast<std::ptrdiff_t>(tile_rows) * columns : nullptr;
    detail::multiply_blocks(first, second, columns, packed, tokens, [&](const detail::block_sums& sums, int t0, int count) {
      for (int block = 0; block < blocks; ++block) {
        for (int t = 0; t < count; ++t) {
          float* row = out + static_cast<std::ptrdiff_t>(t0 + t) * out_stride + r0 + block * tile_rows;
          for (int r = 0; r < tile_rows; ++r) row[r] = sums[block][r][t];
        }
      }
    });
  }
  _tile_release();
}

/// The gate and up projections of 16 intermediate rows at once, finished in registers:
/// `gate` and `up` point at row `row` of their matrices (`columns` wide); writes
/// activation(gate . x, up . x) of rows [row, row + 16) for every token, rounded to
/// bfloat16, straight into the down projection's packed copy `act` (`width` columns),
/// zero for the padding tokens. Saves the float gate/up rows and a pass over them.
template <class Activation>
inline void project_gate_up(const bfloat16* gate, const bfloat16* up, int row, int columns, const bfloat16* packed,
                            int tokens, int width, bfloat16* act, Activation&& activation) noexcept {
  detail::configure_tiles();
  detail::multiply_blocks(gate, up, columns, packed, tokens, [&](const detail::block_sums& sums, int t0, int count) {
    for (int t = 0; t < tile_tokens; ++t) {
      for (int r = 0; r < tile_rows; ++r) {
        act[packed_index(t0 + t, row + r, width)] = t < count ? to_bfloat16(activation(sums[0][r][t], sums[1][r][t])) : bfloat16{0};
      }
    }
  });
  _tile_release();
}
#endif

}  // namespace moe_routing::cpu::amx
