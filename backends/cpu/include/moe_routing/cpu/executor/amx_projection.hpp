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
/// (c, c + 1), the 16 tokens' two values side by side, one 64-byte tile row. Compiled on
/// x86-64 Linux for AMX by target attributes (`isa_targets.hpp`), whatever the build
/// targets; it runs where the CPU has AMX and Linux grants the tile state (`available()`).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "moe_routing/core/half.hpp"

#include "moe_routing/cpu/simd/cpu_features.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

#if MOE_ROUTING_X86_KERNELS && defined(__linux__)
#define MOE_ROUTING_HAS_AMX 1
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

/// Whether the tiles run here: an AMX build (`MOE_ROUTING_HAS_AMX`), a CPU with AMX and
/// `MOE_ROUTING_CPU_ISA` not below `amx`, and Linux granting the process the tile data
/// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once, on the first call).
inline bool available() noexcept {
#if MOE_ROUTING_HAS_AMX
  if (!cpu_runs(isa_level::amx)) return false;
  static const bool granted = [] {
    constexpr long request_permission = 0x1023, tile_data = 18;
    return syscall(SYS_arch_prctl, request_permission, tile_data) == 0;
  }();
  return granted;
#else
  return false;
#endif
}

/// Tokens rounded up to whole tiles: the packed copy's padding is zero.
constexpr int padded_tokens(int tokens) noexcept { return (tokens + tile_tokens - 1) / tile_tokens * tile_tokens; }

/// Where token t's value of column c sits in a packed copy of `columns` columns.
constexpr std::size_t packed_index(int token, int c, int columns) noexcept {
  return static_cast<std::size_t>(token / tile_tokens) * tile_tokens * static_cast<std::size_t>(columns) +
         static_cast<std::size_t>(c / 2) * (2 * tile_tokens) + static_cast<std::size_t>(token % tile_tokens) * 2 +
         static_cast<std::size_t>(c % 2);
}

/// Two values rounded to bfloat16 side by side, as one 32-bit lane of a packed tile row.
inline std::uint32_t bf16_pair(float low, float high) noexcept {
  return static_cast<std::uint32_t>(to_bfloat16(low).bits) | static_cast<std::uint32_t>(to_bfloat16(high).bits) << 16;
}

/// Writes the packed copy of `tokens` float rows (`row_of(p)`, each `columns` long, an even
/// count) rounded to bfloat16, zero up to whole tiles: `packed[packed_index(p, c, columns)]`.
/// Builds each 64-byte tile row (one column pair of 16 tokens) in registers and stores it
/// whole, so the padding of a group with few tokens costs no more than one store per row.
template <class RowOf>
void pack_rows(RowOf&& row_of, int tokens, int columns, bfloat16* packed) noexcept {
  const int pairs = columns / 2;
  for (int t0 = 0; t0 < tokens; t0 += tile_tokens) {
    const int count = std::min(tile_tokens, tokens - t0);
    const float* rows[tile_tokens] = {};
    for (int t = 0; t < count; ++t) rows[t] = row_of(t0 + t);
    bfloat16* group = packed + packed_index(t0, 0, columns);
    for (int j = 0; j < pairs; ++j) {
      std::uint32_t line[tile_tokens] = {};
      for (int t = 0; t < count; ++t) line[t] = bf16_pair(rows[t][2 * j], rows[t][2 * j + 1]);
      std::memcpy(group + static_cast<std::ptrdiff_t>(j) * 2 * tile_tokens, line, sizeof line);
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
MOE_ROUTING_TARGET_AMX inline void configure_tiles() noexcept {
  tile_config config;
  for (int t = 0; t < 5; ++t) config.bytes_per_row[t] = 64, config.rows[t] = 16;
  // Not _tile_loadconfig: GCC 12's tells the compiler that LDTILECFG reads 8 bytes, so at -O2
  // the stores to the other 56 were dropped and the instruction faulted on garbage; an
  // operand naming the whole struct keeps every byte.
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

/// One or two 16-row weight blocks of a row-major matrix (`second` null: only `first`).
struct block_pair {
  const bfloat16* first = nullptr;
  const bfloat16* second = nullptr;
};

/// Prefetches column `c`'s line in every row of the blocks: one stream per weight row,
/// which the hardware alone tracks poorly.
inline void prefetch_column(block_pair blocks, int c, int columns) noexcept {
  for (int r = 0; r < tile_rows; ++r) {
    const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(r) * columns + c;
    _mm_prefetch(reinterpret_cast<const char*>(blocks.first + at), _MM_HINT_T0);
    if (blocks.second != nullptr) _mm_prefetch(reinterpret_cast<const char*>(blocks.second + at), _MM_HINT_T0);
  }
}

/// Multiplies `blocks` (`columns` wide) by every group of 16 packed tokens, handing each
/// group's sums to `take(sums, first_token, count)`. Prefetches `prefetch_columns` ahead
/// and, over the last of them, the first columns of `next` (the blocks this thread most
/// likely multiplies next; null: none), so memory keeps streaming through the epilogue and
/// the next call's first steps. Needs `configure_tiles()` beforehand.
template <class Take>
MOE_ROUTING_TARGET_AMX inline void multiply_blocks(block_pair blocks, block_pair next, int columns,
                                                   const bfloat16* packed, int tokens, Take&& take) noexcept {
  alignas(64) block_sums sums;
  const std::size_t stride = static_cast<std::size_t>(columns) * sizeof(bfloat16);
  for (int t0 = 0; t0 < tokens; t0 += tile_tokens) {
    const bfloat16* group = packed + static_cast<std::ptrdiff_t>(t0) * columns;
    _tile_zero(0);
    _tile_zero(1);
    for (int c = 0; c < columns; c += tile_columns) {
      if (t0 == 0) {
        const int ahead = c + prefetch_columns;
        if (ahead < columns) {
          prefetch_column(blocks, ahead, columns);
        } else if (next.first != nullptr) {
          prefetch_column(next, ahead - columns, columns);
        }
      }
      _tile_loadd(4, group + static_cast<std::ptrdiff_t>(c) * tile_tokens, 64);
      _tile_loadd(2, blocks.first + c, stride);
      _tile_dpbf16ps(0, 2, 4);
      if (blocks.second != nullptr) {
        _tile_loadd(3, blocks.second + c, stride);
        _tile_dpbf16ps(1, 3, 4);
      }
    }
    _tile_stored(0, sums[0], 64);
    if (blocks.second != nullptr) _tile_stored(1, sums[1], 64);
    take(sums, t0, std::min(tile_tokens, tokens - t0));
  }
}
}  // namespace detail

/// Rows [row_begin, row_end) of `matrix` (`rows` x `columns`, row-major; the count a
/// multiple of 16, `columns` a multiple of 32) times `tokens` packed token vectors:
/// writes `out[t * out_stride + r]`.
MOE_ROUTING_TARGET_AMX inline void project_rows(const bfloat16* matrix, int rows, int row_begin, int row_end,
                                                int columns, const bfloat16* packed, int tokens, float* out,
                                                std::ptrdiff_t out_stride) noexcept {
  detail::configure_tiles();
  auto pair_at = [&](int r0, int end) {
    const bfloat16* first = matrix + static_cast<std::ptrdiff_t>(r0) * columns;
    const bool two = r0 + tile_rows < end;
    return detail::block_pair{first, two ? first + static_cast<std::ptrdiff_t>(tile_rows) * columns : nullptr};
  };
  for (int r0 = row_begin; r0 < row_end; r0 += 2 * tile_rows) {
    const detail::block_pair blocks = pair_at(r0, row_end);
    const int after = r0 + 2 * tile_rows;  // the matrix's next rows: this call's next pair or the next item's
    const detail::block_pair next = after < rows ? pair_at(after, rows) : detail::block_pair{};
    auto store = [&](const detail::block_sums& sums, int t0, int count) {
      for (int block = 0; block < (blocks.second != nullptr ? 2 : 1); ++block) {
        for (int t = 0; t < count; ++t) {
          float* row = out + static_cast<std::ptrdiff_t>(t0 + t) * out_stride + r0 + block * tile_rows;
          for (int r = 0; r < tile_rows; ++r) row[r] = sums[block][r][t];
        }
      }
    };
    detail::multiply_blocks(blocks, next, columns, packed, tokens, store);
  }
  _tile_release();
}

/// The gate and up projections of 16 intermediate rows at once, finished in registers:
/// `gate` and `up` are the `width` x `columns` matrices; writes activation(gate . x, up . x)
/// of rows [row, row + 16) for every token, rounded to bfloat16, straight into the down
/// projection's packed copy `act` (`width` columns), zero for the padding tokens. Saves
/// the float gate/up rows and a pass over them.
template <class Activation>
MOE_ROUTING_TARGET_AMX inline void project_gate_up(const bfloat16* gate, const bfloat16* up, int row, int columns,
                                                   const bfloat16* packed, int tokens, int width, bfloat16* act,
                                                   Activation&& activation) noexcept {
  detail::configure_tiles();
  auto pair_at = [&](int r) {
    const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(r) * columns;
    return detail::block_pair{gate + at, up + at};
  };
  const detail::block_pair next = row + tile_rows < width ? pair_at(row + tile_rows) : detail::block_pair{};
  auto store_activations = [&](const detail::block_sums& sums, int t0, int count) {
    bfloat16* group = act + packed_index(t0, row, width);  // rows (row + r, row + r + 1): one tile row each
    for (int r = 0; r < tile_rows; r += 2) {
      std::uint32_t line[tile_tokens] = {};
      for (int t = 0; t < count; ++t) {
        line[t] = bf16_pair(activation(sums[0][r][t], sums[1][r][t]), activation(sums[0][r + 1][t], sums[1][r + 1][t]));
      }
      std::memcpy(group + static_cast<std::ptrdiff_t>(r) * tile_tokens, line, sizeof line);
    }
  };
  detail::multiply_blocks(pair_at(row), next, columns, packed, tokens, store_activations);
  _tile_release();
}
#endif

}  // namespace moe_routing::cpu::amx
