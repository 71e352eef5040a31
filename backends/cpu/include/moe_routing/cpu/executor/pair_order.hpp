#pragma once
/// \file
/// Pair order: how the kernels for bfloat16 weights on CPUs without bfloat16 instructions
/// (`avx2_bf16_kernel`, `avx512_pairs_kernel`) take their float activation rows. In every whole
/// group of a row (16 columns for AVX2, 32 for AVX-512: one load of bfloat16 weights), the even
/// columns come first and the odd ones after them; the columns past the last whole group stay
/// where they are.
///
/// Why: a load of bfloat16 weights holds (even, odd) column pairs in its 32-bit lanes, and a
/// shift left by 16 makes floats of the even columns, a mask of the top halves floats of the odd
/// ones, lane j holding columns 2j and 2j + 1 (`avx2_bf16_projection.hpp`,
/// `avx512_pairs_projection.hpp`). Activations in pair order meet them lane for lane with plain
/// loads. The executor writes its activation rows in this order once per call (the gathered
/// inputs, and each SwiGLU value at its column of the down projection's input), so no kernel
/// step rearranges them.

#include <concepts>

#include "moe_routing/cpu/executor/kernel_tags.hpp"

namespace moe_routing::cpu {

/// Columns per group of pair order for AVX2: one 32-byte load of bfloat16 weights.
inline constexpr int pair_group_columns = 16;

/// Columns per group of pair order for AVX-512: one 64-byte load, a cache line of each row.
inline constexpr int wide_pair_group_columns = 32;

/// The group of the pair order `Kernel` takes; 0 for a kernel that takes none
/// (`takes_paired_activations`).
template <class Kernel>
inline constexpr int pair_group_columns_of = std::same_as<Kernel, avx512_pairs_kernel> ? wide_pair_group_columns
                                             : std::same_as<Kernel, avx2_bf16_kernel>  ? pair_group_columns
                                                                                       : 0;

/// Where column `c` of a `cols`-wide row lies in pair order of groups of `Group` columns.
template <int Group>
constexpr int paired_column(int c, int cols) noexcept {
  if (c >= cols - cols % Group) return c;
  const int in_group = c % Group;
  return c - in_group + (in_group % 2) * (Group / 2) + in_group / 2;
}

/// Writes `cols` values `value(c)` of a row in pair order of groups of `Group` columns into `out`.
template <int Group, class Out, class Value>
void write_in_pair_order(Out* out, int cols, Value&& value) {
  const int whole = cols - cols % Group;
  constexpr int half = Group / 2;
  for (int group = 0; group < whole; group += Group) {
    for (int j = 0; j < half; ++j) {
      out[group + j] = value(group + 2 * j);
      out[group + half + j] = value(group + 2 * j + 1);
    }
  }
  for (int c = whole; c < cols; ++c) out[c] = value(c);
}

}  // namespace moe_routing::cpu
