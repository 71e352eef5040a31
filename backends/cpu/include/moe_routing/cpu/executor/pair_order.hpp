#pragma once
/// \file
/// Pair order: how the AVX2 kernel for bfloat16 weights (`avx2_bf16_kernel`) takes its float
/// activation rows. In every whole 16 columns of a row, the 8 even columns come first and the 8
/// odd ones after them; the columns past the last whole 16 stay where they are.
///
/// Why: 16 bfloat16 weights are one 32-byte load, and a shift left by 16 makes floats of the
/// even columns, a mask of the top halves floats of the odd ones, lane j holding columns 2j and
/// 2j + 1 (`avx2_bf16_projection.hpp`). Activations in pair order meet them lane for lane with
/// plain loads. The executor writes its activation rows in this order once per call (the
/// gathered inputs, and each SwiGLU value at its column of the down projection's input), so
/// no kernel step rearranges them.

namespace moe_routing::cpu {

/// Columns per group of pair order: one 32-byte load of bfloat16 weights.
inline constexpr int pair_group_columns = 16;

/// Where column `c` of a `cols`-wide row lies in pair order.
constexpr int paired_column(int c, int cols) noexcept {
  if (c >= cols - cols % pair_group_columns) return c;
  const int in_group = c % pair_group_columns;
  return c - in_group + (in_group % 2) * (pair_group_columns / 2) + in_group / 2;
}

/// Writes `cols` values `value(c)` of a row in pair order into `out`.
template <class Out, class Value>
void write_in_pair_order(Out* out, int cols, Value&& value) {
  const int whole = cols - cols % pair_group_columns;
  constexpr int half = pair_group_columns / 2;
  for (int group = 0; group < whole; group += pair_group_columns) {
    for (int j = 0; j < half; ++j) {
      out[group + j] = value(group + 2 * j);
      out[group + half + j] = value(group + 2 * j + 1);
    }
  }
  for (int c = whole; c < cols; ++c) out[c] = value(c);
}

}  // namespace moe_routing::cpu
