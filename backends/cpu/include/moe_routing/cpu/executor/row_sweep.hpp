#pragma once
/// \file
/// How the row kernels (`kernel_tags.hpp`) walk a work item's rows: blocks of `block_rows`
/// weight rows, multiplied by the expert's tokens in groups of at most
/// `tile_tokens_of(kernel)` (a tile), by the kernel's `multiply_tile` (one overload per tag,
/// compiled for its ISA). A kernel with wide tiles takes an expert of few tokens in blocks of
/// `wide_block_rows` (`wide_tile_tokens_of`): more rows streaming at once.
///
/// Each weight row is read from memory once per call whatever the token count, in one of two
/// orders (`sweep_order_of`, per kernel and CPU: `sweep_order.hpp`):
///   - token groups first: the first group sweeps every block of the item, and each later group
///     sweeps them all again. An item's rows (32 x d x 2 bytes, 128 KiB for gate and up at
///     d = 2048 in bfloat16) stay in L2 for the later groups, the group's activation rows (at
///     most 6 x d x 2 bytes in bfloat16) in L1 for the whole item.
///   - blocks first: every group over one block before the next, and the later groups ask for
///     the next block's rows while they compute. So each block's reads overlap the previous
///     block's compute, where the other order streams the item in its first pass and computes
///     the later ones with the memory mostly idle (our reading). A busy expert's activation rows
///     come from L2 at every tile instead (22 tokens of d = 2048 are 88 KiB in bfloat16, more
///     than Zen 4's 32 KiB or Zen 5's 48 KiB L1; 8 KiB a token in float for the AVX2 kernel).
/// Which order is faster depends on the CPU; `sweep_order.hpp` holds what was measured.
///
/// While the first group works through a block, the kernel prefetches ahead along each row and
/// on into the same row of the next block, so memory keeps streaming through the block's
/// epilogue; the later groups ask for the rows the core takes next while they compute (the second
/// group all of them, or each later group one row: `run_ahead.hpp`, `prefetch_step`).
///
/// Streaming into L2, a kernel may read a one-token sweep of consecutive rows in address order
/// instead, each row to its end before the next (`reads_one_token_rows_in_order`).
///
/// Gate and up are swept together (half of each block's rows of each), and the SwiGLU activation
/// of each (row, token) is written as soon as both sums exist: no pass over a float buffer
/// in between.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/compiled_for_kernel.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/pair_order.hpp"
#include "moe_routing/cpu/executor/run_ahead.hpp"
#include "moe_routing/cpu/executor/stream_cache.hpp"
#include "moe_routing/cpu/executor/sweep_order.hpp"

namespace moe_routing::cpu {

/// Tuning data: weight rows per block, and the most tokens any kernel takes per tile.
inline constexpr int block_rows = 4;
inline constexpr int max_tile_tokens = 6;

/// Tuning data: weight rows per block of a kernel's wide tiles (`wide_tile_tokens_of`).
inline constexpr int wide_block_rows = 8;

/// The most tokens a kernel's wide tile takes: blocks of `wide_block_rows` rows by at most that
/// many tokens, for the sweeps of that many tokens or fewer. 0 (every kernel but those that say
/// otherwise): no wide tiles.
///
/// Why: those sweeps are memory-bound, and how fast the memory streams them depends on how many
/// rows they read at once. The 2 GiB reference read in the first pass's order, nothing else
/// (`bandwidth/row_blocks` in the executor benchmark), drew 30-35 GB/s on Zen 4 in blocks of 4
/// rows of 4 KiB and 42-51 GB/s in blocks of 8 while the plain read drew 54
/// (docs/benchmarks/executor_zen4.md). Busier experts keep the kernel's usual tile, whose more
/// tokens per weight load compute faster.
template <class Kernel>
constexpr int wide_tile_tokens_of(Kernel) noexcept {
  return 0;
}

/// Whether a kernel reads a one-token sweep of a matrix's consecutive rows in address order,
/// each row to its end before the next (its `multiply_rows_in_order`), where the first pass
/// streams into L2. false (every kernel but those that say otherwise): blocks, as for more tokens.
template <class Kernel>
constexpr bool reads_one_token_rows_in_order(Kernel) noexcept {
  return false;
}

/// A block of weight rows for `multiply_tile`, with how far (in bytes) each row is from the
/// same row of the next block, where the prefetches go once they run past the row's end; how
/// many blocks on the passes that run ahead ask for the same rows (the rows the core works on
/// after the ones it has now: `sweep_blocks`); and which pass of the token groups over the block
/// this is, whether the first pass streams into L2 rather than L1, and whether the later passes
/// run ahead one row each rather than the second a whole block (`prefetch_step`).
template <class Weight, int Rows = block_rows>
struct row_block {
  static constexpr int row_count = Rows;
  const Weight* rows[Rows] = {};
  std::ptrdiff_t next_block_bytes = 0;
  int run_ahead_blocks = 1;
  int pass = 0;
  bool streams_to_l2 = false;
  bool one_row_per_pass = false;
};

/// Tells the CPU that the cache line holding `address` is wanted soon (`Locality` as
/// `__builtin_prefetch`'s). The addresses the sweep prefetches are integers, not pointers: past a
/// matrix's last block they lie beyond the matrix (or any object), where forming a pointer
/// would be undefined behaviour; a prefetch of any address is harmless (it never faults).
template <int Locality>
[[gnu::always_inline]] inline void prefetch_address(std::uintptr_t address) noexcept {
  __builtin_prefetch(reinterpret_cast<const void*>(address), 0, Locality);
}

/// The address `distance` bytes on from `element`.
template <class Weight>
[[gnu::always_inline]] inline std::uintptr_t address_on(const Weight* element, std::ptrdiff_t distance) noexcept {
  return reinterpret_cast<std::uintptr_t>(element) + static_cast<std::uintptr_t>(distance);
}

/// One tile's sums: [row of the block][token of the group].
template <int Rows = block_rows>
using block_sums = float[Rows][max_tile_tokens];
using tile_sums = block_sums<>;

/// Tuning data: how far ahead along a row a first pass into L1 prefetches, in bytes (into L2:
/// `l2_stream_block_bytes_ahead`).
inline constexpr int prefetch_bytes = 1024;

/// What a token group's pass over the sweep prefetches (`prefetch_step`).
enum class prefetch_mode { stream, stream_to_l2, run_ahead, run_ahead_row, none };

/// Whether `mode` is a first pass's (which streams the rows from memory).
constexpr bool streams(prefetch_mode mode) noexcept {
  return mode == prefetch_mode::stream || mode == prefetch_mode::stream_to_l2;
}

/// The `__builtin_prefetch` locality of a first pass's prefetches: 3 (prefetcht0, into L1) or 2
/// (prefetcht1, into L2).
constexpr int stream_locality(prefetch_mode mode) noexcept { return mode == prefetch_mode::stream_to_l2 ? 2 : 3; }

/// Tuning data: how many bytes of a block's rows, all of them together, a first pass that streams
/// into L2 asks for ahead of where it reads: `l2_stream_block_bytes_ahead / Rows` along each row,
/// 2 KiB for blocks of 4 rows and 1 KiB for the wide tiles' 8 (`stream_ahead_bytes`). A first
/// pass into L1 asks `prefetch_bytes` along each row whatever the block.
/// Why: one core streaming by itself is held back by how much it has asked for, and at n = 64 a
/// light expert's items stream on one core while the other computes a busy expert's. On Zen 4
/// (the one CPU that streams into L2 by default, `stream_cache.hpp`) XShare's layer at n = 64 took
/// a median 0.95 of the time over 54 interleaved rounds with 8 KiB rather than 4, vanilla's the
/// same (docs/benchmarks/executor_zen4.md, the sixth session). On Zen 5, streaming into L1,
/// 2 KiB along each row of 4-row blocks took 1.15 of the time at n = 64 (executor_zen5.md).
inline constexpr int l2_stream_block_bytes_ahead = 8192;

/// How far ahead along each row of a `Rows`-row block a first pass in `Mode` prefetches, in bytes.
template <prefetch_mode Mode, int Rows>
constexpr std::ptrdiff_t stream_ahead_bytes() noexcept {
  static_assert(l2_stream_block_bytes_ahead % (Rows * 64) == 0, "each row asks whole cache lines ahead");
  return Mode == prefetch_mode::stream_to_l2 ? l2_stream_block_bytes_ahead / Rows : prefetch_bytes;
}

/// Which of a block's rows its pass asks for ahead, [first, end): none in the first pass (which
/// streams); in the later ones every row in the second pass and none after it, or, with
/// `one_row_per_pass`, row `pass - 1` in passes 1 to `Rows` and none after them.
struct row_span {
  int first = 0;
  int end = 0;
};
template <class Weight, int Rows>
constexpr row_span run_ahead_rows(const row_block<Weight, Rows>& block) noexcept {
  if (block.pass == 0) return {};
  if (block.one_row_per_pass) return block.pass <= Rows ? row_span{block.pass - 1, block.pass} : row_span{};
  return block.pass == 1 ? row_span{0, Rows} : row_span{};
}

/// `prefetch_lines`'s default sink: asks the CPU for the line at `address`, into the cache that
/// `Locality` names (`prefetch_address`).
struct issue_prefetch {
  template <int Locality>
  [[gnu::always_inline]] void operator()(std::uintptr_t address, std::integral_constant<int, Locality>) const noexcept {
    prefetch_address<Locality>(address);
  }
};

/// The prefetches of a kernel at column `c` of its walk along the block (`c` a multiple of its
/// column step), for the pass `Mode` of the token groups over the sweep (`with_prefetch_mode`):
///   - the first pass streams the rows: `stream_ahead_bytes` ahead along each row, and from the
///     row's end on into the next block's row (into L1: with one token group, or the groups
///     first, the kernel reads it next; into L2 on the CPUs where that measured faster,
///     `stream_cache.hpp`);
///   - the second pass (an expert with more tokens than one tile) finds the rows in cache and
///     would leave memory idle while it computes, and one core alone cannot draw the machine's
///     bandwidth, so at each 64 bytes of columns it asks for the same row `run_ahead_blocks`
///     blocks on, into L2: the rows the core takes next (`sweep_blocks`), whose first pass then
///     finds them in L2 and only computes (`run_ahead`: every row of the block; later passes
///     compute only);
///   - or, on the CPUs where that measured faster (`run_ahead.hpp`), each later pass asks for
///     one of those rows, the second pass the first (`run_ahead_row`, `run_ahead_rows`).
/// Measured on Zen 5 against prefetching in the first pass only: 0.93 of the time at n = 64,
/// 0.96 at n = 16 (docs/benchmarks/executor_zen5.md; then with the blocks the outer loop and
/// the next two blocks prefetched).
///
/// Each prefetch is `distance` bytes on from the row's element `c` (`prefetch_distance`), the
/// same for every row: one addition to the address the kernel already has for the row. Always
/// inlined: compiled as a separate function, GCC 12 at -O1 and up left neither the call nor a
/// prefetch in the kernels.
///
/// Each address goes to `prefetch(address, locality)`, `locality` a
/// `std::integral_constant<int, L>`: by default `issue_prefetch`, which asks the CPU; a test
/// passes one that records which lines each pass asks for (which rows, at which columns, into
/// which cache), which no sum can show.
template <prefetch_mode Mode, class Weight, int Rows, class Prefetch = issue_prefetch>
[[gnu::always_inline]] inline void prefetch_lines(const row_block<Weight, Rows>& block, int c, std::ptrdiff_t distance,
                                                  Prefetch&& prefetch = {}) noexcept {
  constexpr int line_columns = 64 / static_cast<int>(sizeof(Weight));
  constexpr std::integral_constant<int, 2> into_l2{};
  if constexpr (streams(Mode)) {
    constexpr std::integral_constant<int, stream_locality(Mode)> locality{};
    for (int i = 0; i < Rows; ++i) prefetch(address_on(block.rows[i] + c, distance), locality);
  } else if constexpr (Mode == prefetch_mode::run_ahead) {
    if (c % line_columns != 0) return;
    for (int i = 0; i < Rows; ++i) prefetch(address_on(block.rows[i] + c, distance), into_l2);
  } else if constexpr (Mode == prefetch_mode::run_ahead_row) {
    if (c % line_columns != 0) return;
    prefetch(address_on(block.rows[run_ahead_rows(block).first] + c, distance), into_l2);
  }
}

/// How far (in bytes) from each row's element `c` of a `cols`-long row the pass `Mode`
/// prefetches (`prefetch_lines`): in the first pass `stream_ahead_bytes` along the row, or, within
/// that distance of the row's end, to as far past the end in the next block's row (on a row
/// shorter than the distance, such as the down projection's 1.5 KiB at h = 768 against 2 KiB,
/// that runs on into the rows after it: the block's rows lie one after another, so every line
/// is still asked for, some earlier); in the passes that run ahead to the same column
/// `run_ahead_blocks` blocks on. It depends on `c`, `cols` and the block's distances alone, not
/// on the row, so a kernel asks once per step of its column loop, and GCC splits that loop where the first
/// pass's distance changes (while the distance is a compile-time constant: computed at run
/// time, the 6-token tile's first pass in cache ran at 0.80 of its rate on Zen 4). Asked per
/// row and prefetch instead (until 2026-11-28), behind a branch, the prefetches took more
/// instructions than the multiply-adds: a one-token streaming tile in cache took about twice as
/// long as one that only computes, on Zen 3 (docs/benchmarks/executor_zen3.md).
template <prefetch_mode Mode, class Weight, int Rows>
[[gnu::always_inline]] inline std::ptrdiff_t prefetch_distance(const row_block<Weight, Rows>& block, int c,
                                                               int cols) noexcept {
  constexpr auto size = static_cast<std::ptrdiff_t>(sizeof(Weight));
  constexpr std::ptrdiff_t ahead = stream_ahead_bytes<Mode, Rows>() / size;
  if constexpr (streams(Mode)) {
    return c + ahead < cols ? ahead * size : block.next_block_bytes + (ahead - cols) * size;
  } else if constexpr (Mode == prefetch_mode::run_ahead || Mode == prefetch_mode::run_ahead_row) {
    return block.run_ahead_blocks * block.next_block_bytes;
  } else {
    return 0;
  }
}

/// The prefetches of a kernel whose column step asks once (`prefetch_lines` at the distance
/// for column `c`).
template <prefetch_mode Mode, class Weight, int Rows>
[[gnu::always_inline]] inline void prefetch_step(const row_block<Weight, Rows>& block, int c, int cols) noexcept {
  prefetch_lines<Mode>(block, c, prefetch_distance<Mode>(block, c, cols));
}

/// Calls `tile(mode)` with the prefetch mode of the block's pass as a compile-time constant
/// (`std::integral_constant`), so a kernel's column loop does not test the pass at each step.
/// Measured on Zen 5 (`tile/avx512_bf16` in the executor benchmark, in cache), together with
/// whole steps that no longer rebuild a mask and the four-at-a-time sums: the second pass of a
/// 2048-column tile took 1.2-1.5x as long before (docs/benchmarks/executor_zen5.md).
template <class Weight, int Rows, class Tile>
[[gnu::always_inline]] inline void with_prefetch_mode(const row_block<Weight, Rows>& block, Tile&& tile) {
  using enum prefetch_mode;
  if (block.pass == 0) {
    if (block.streams_to_l2) {
      tile(std::integral_constant<prefetch_mode, stream_to_l2>{});
    } else {
      tile(std::integral_constant<prefetch_mode, stream>{});
    }
  } else if (const row_span rows = run_ahead_rows(block); rows.end - rows.first == Rows) {
    tile(std::integral_constant<prefetch_mode, run_ahead>{});
  } else if (rows.end - rows.first == 1) {
    tile(std::integral_constant<prefetch_mode, run_ahead_row>{});
  } else {
    tile(std::integral_constant<prefetch_mode, none>{});
  }
}

/// Which of a sweep's rows one block holds: the first, and how many (the last block of a sweep
/// may be short).
struct block_extent {
  int first = 0;
  int count = 0;

  /// The row in the block's slot `i`: a short block repeats its last row in the slots it does
  /// not fill (the same work, its sums unused), so a kernel always multiplies whole blocks.
  int row(int i) const noexcept { return first + std::min(i, count - 1); }
};

/// Multiplies the sweep's rows [row_begin, row_end), in blocks of `Rows` rows (`Rows /
/// matrices` of each of `matrices` matrices), by `m` activation rows in token groups of at most
/// `Group`: each group over every block, or, where the kernel's sweeps take blocks first here
/// (`sweep_order_of`), every group over each block (see the file comment). `block_at(extent,
/// block)` points a `row_block<Weight, Rows>`'s rows at a block's; the sweep sets the fields
/// that follow from its shape and order (the next block's distance, how far on the passes that
/// run ahead prefetch, the pass, the process's stream cache and run-ahead). The groups are as
/// even as they come (7 tokens in tiles of 4 and 3, not 6 and 1: a tile of one token leaves the
/// multiply-add units mostly waiting). Each tile's sums (`block_sums<Rows>`) go to
/// `take(extent, first_token, tokens, sums, group)`, `group` the tile's most tokens as a
/// `std::integral_constant` (`Group`).
template <int Rows, int Group, class Weight, class Kernel, class Input, class BlockAt, class Take>
[[gnu::always_inline]] inline void sweep_blocks_of(Kernel kernel, int row_begin, int row_end, int matrices, int cols,
                                                   const Input* x, std::ptrdiff_t x_stride, int m, BlockAt&& block_at,
                                                   Take&& take) {
  static_assert(Group >= 1 && Group <= max_tile_tokens, "a kernel's tile of tokens must fit in block_sums");
  const int rows_per_block = Rows / matrices;
  const int blocks = (row_end - row_begin + rows_per_block - 1) / rows_per_block;
  const int passes = (m + Group - 1) / Group;
  const bool streams_to_l2 = weight_stream_cache() == stream_cache::l2;
  const bool one_row_per_pass = weight_run_ahead() == run_ahead_style::one_row_per_pass;
  const bool blocks_first = sweep_order_of(kernel) == sweep_order::blocks_first;
  // Pass p takes `tokens_of(p)` tokens from `first_token_of(p)` on: the first m % passes
  // passes one more than the rest.
  const auto tokens_of = [&](int pass) MOE_ROUTING_INLINE_LAMBDA { return m / passes + (pass < m % passes ? 1 : 0); };
  const auto first_token_of = [&](int pass) MOE_ROUTING_INLINE_LAMBDA {
    return pass * (m / passes) + std::min(pass, m % passes);
  };
  const auto tile = [&](int first, int pass) MOE_ROUTING_INLINE_LAMBDA {
    const block_extent rows{first, std::min(rows_per_block, row_end - first)};
    row_block<Weight, Rows> block;
    block_at(rows, block);
    block.next_block_bytes = std::ptrdiff_t{rows_per_block} * cols * std::ptrdiff_t{sizeof(Weight)};
    // Where the passes that run ahead ask: blocks first, the next block, which this core takes
    // next; token groups first, the same block of the next item (`blocks` blocks on), which the
    // parallel loop mostly hands the same core after this item's passes.
    block.run_ahead_blocks = blocks_first ? 1 : blocks;
    block.pass = pass;
    block.streams_to_l2 = streams_to_l2;
    block.one_row_per_pass = one_row_per_pass;
    const int t0 = first_token_of(pass), tokens = tokens_of(pass);
    block_sums<Rows> sums = {};  // a tile of fewer tokens leaves the other lanes as they are
    multiply_tile(kernel, block, cols, x + t0 * x_stride, x_stride, tokens, sums);
    take(rows, t0, tokens, sums, std::integral_constant<int, Group>{});
  };
  if (blocks_first) {
    for (int first = row_begin; first < row_end; first += rows_per_block) {
      for (int pass = 0; pass < passes; ++pass) tile(first, pass);
    }
  } else {
    for (int pass = 0; pass < passes; ++pass) {
      for (int first = row_begin; first < row_end; first += rows_per_block) tile(first, pass);
    }
  }
}

/// `sweep_blocks_of` with the kernel's wide tiles where it has them and the sweep has that few
/// tokens (`wide_tile_tokens_of`), else with its usual ones (`block_rows` by
/// `tile_tokens_of(kernel)`). Always inlined, so that it is compiled for the kernel's target
/// inside `compiled_for`.
template <class Weight, class Kernel, class Input, class BlockAt, class Take>
[[gnu::always_inline]] inline void sweep_blocks(Kernel kernel, int row_begin, int row_end, int matrices, int cols,
                                                const Input* x, std::ptrdiff_t x_stride, int m, BlockAt&& block_at,
                                                Take&& take) {
  constexpr int wide = wide_tile_tokens_of(Kernel{});
  if constexpr (wide > 0) {
    if (m <= wide) {
      return sweep_blocks_of<wide_block_rows, wide, Weight>(kernel, row_begin, row_end, matrices, cols, x, x_stride, m,
                                                            block_at, take);
    }
  }
  sweep_blocks_of<block_rows, tile_tokens_of(Kernel{}), Weight>(kernel, row_begin, row_end, matrices, cols, x, x_stride,
                                                                m, block_at, take);
}

/// Rows [row_begin, row_end) of `matrix` (`cols` wide, row-major) times `m` activation rows
/// (`x`, `x_stride` apart): `out[t * out_stride + r]`. One token, streaming into L2, on a kernel
/// that reads such sweeps in address order (`reads_one_token_rows_in_order`): its
/// `multiply_rows_in_order`; otherwise in blocks (`sweep_blocks`).
template <class Kernel, class Weight, class Input>
void sweep_rows(Kernel kernel, const Weight* matrix, int row_begin, int row_end, int cols, const Input* x,
                std::ptrdiff_t x_stride, int m, float* out, std::ptrdiff_t out_stride) {
  compiled_for(kernel, [&]() MOE_ROUTING_INLINE_LAMBDA {
    if constexpr (reads_one_token_rows_in_order(Kernel{})) {
      if (m == 1 && weight_stream_cache() == stream_cache::l2) {
        return multiply_rows_in_order(kernel, matrix + static_cast<std::ptrdiff_t>(row_begin) * cols,
                                      row_end - row_begin, cols, x, out + row_begin);
      }
    }
    const auto block_at = [&](block_extent rows, auto& block) MOE_ROUTING_INLINE_LAMBDA {
      for (int i = 0; i < block.row_count; ++i) {
        block.rows[i] = matrix + static_cast<std::ptrdiff_t>(rows.row(i)) * cols;
      }
    };
    const auto take = [&](block_extent rows, int t0, int tokens, const auto& sums, auto) MOE_ROUTING_INLINE_LAMBDA {
      for (int t = 0; t < tokens; ++t) {
        for (int i = 0; i < rows.count; ++i) out[(t0 + t) * out_stride + rows.first + i] = sums[i][t];
      }
    };
    sweep_blocks<Weight>(kernel, row_begin, row_end, 1, cols, x, x_stride, m, block_at, take);
  });
}

/// Gate and up rows [row_begin, row_end) (each matrix `cols` wide) times `m` activation rows:
/// `act[t * act_stride + r] = store(activation(gate_r . x_t, up_r . x_t))`; for a kernel that
/// takes pair order (`takes_paired_activations`), at row r's column in pair order of the
/// `act_cols`-wide activation rows (the down projection's input) instead. `activation` and
/// `store` should not branch on values known only at run time: the loop that applies them to a
/// tile's lanes is then left scalar (`project_gate_up`).
template <class Kernel, class Weight, class Input, class Output, class Activation, class Store>
void sweep_gate_up(Kernel kernel, const Weight* gate, const Weight* up, int row_begin, int row_end, int cols,
                   const Input* x, std::ptrdiff_t x_stride, int m, Output* act, std::ptrdiff_t act_stride, int act_cols,
                   Activation&& activation, Store&& store) {
  compiled_for(kernel, [&]() MOE_ROUTING_INLINE_LAMBDA {
    // A block's first half of rows are gate rows, its second half the same rows of up.
    const auto block_at = [&](block_extent rows, auto& block) MOE_ROUTING_INLINE_LAMBDA {
      constexpr int pair_rows = std::remove_cvref_t<decltype(block)>::row_count / 2;
      for (int i = 0; i < pair_rows; ++i) {
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(rows.row(i)) * cols;
        block.rows[i] = gate + at;
        block.rows[pair_rows + i] = up + at;
      }
    };
    const auto take = [&](block_extent rows, int t0, int tokens, const auto& sums,
                          auto tile_group) MOE_ROUTING_INLINE_LAMBDA {
      // Every (gate row, token) lane of the kernel's tile, used or not (the unused hold zeros),
      // activated and converted in one loop over flat arrays, which the compiler vectorizes.
      // Indexed as [row][token], the loop was not vectorized (a "complicated access pattern").
      // When each value was converted as it was stored, the conversion stayed scalar: with it in
      // the loop, a gate/up pass of 6 tokens takes 0.94 of the time on Zen 5 and one of 12 or 24
      // tokens 0.90 (`item/avx512_bf16/gate_up` in the executor benchmark). The arrays hold the
      // kernel's own tile (4 lanes for a 2-token tile, 12 padded to 16 for a 6-token one): with
      // 16 lanes for every kernel (12 unused by a 2-token tile), a profile of the compute at n = 64
      // on Zen 3 had 24% of its samples in the gate/up pass outside the tiles, 8.8% with the
      // tile's own lanes (docs/benchmarks/executor_zen3.md). Then only the tile's own
      // values are stored.
      constexpr int tile_rows = std::extent_v<std::remove_cvref_t<decltype(sums)>>, pair_rows = tile_rows / 2;
      static_assert(tile_rows == 2 * pair_rows, "a block holds as many gate rows as up rows");
      constexpr int group = decltype(tile_group)::value;
      constexpr int lanes = pair_rows * group, padded_lanes = lanes <= 8 ? (lanes + 3) / 4 * 4 : 16;
      static_assert(lanes <= padded_lanes);
      float gate_sums[padded_lanes] = {}, up_sums[padded_lanes] = {};
      Output values[padded_lanes];
      for (int i = 0; i < pair_rows; ++i) {
        for (int t = 0; t < group; ++t) {
          gate_sums[i * group + t] = sums[i][t];
          up_sums[i * group + t] = sums[pair_rows + i][t];
        }
      }
      for (int j = 0; j < padded_lanes; ++j) values[j] = store(activation(gate_sums[j], up_sums[j]));
      for (int t = 0; t < tokens; ++t) {
        Output* row = act + (t0 + t) * act_stride;
        for (int i = 0; i < rows.count; ++i) {
          int at = rows.first + i;
          if constexpr (takes_paired_activations<Kernel>)
            at = paired_column<pair_group_columns_of<Kernel>>(at, act_cols);
          row[at] = values[i * group + t];
        }
      }
    };
    sweep_blocks<Weight>(kernel, row_begin, row_end, 2, cols, x, x_stride, m, block_at, take);
  });
}

}  // namespace moe_routing::cpu
