#pragma once
/// \file
/// One expert's share of an executor call, worked out once per call (`gather.hpp`) and read by
/// every later step: which rows of the per-pair buffers are its tokens', how wide it is, and
/// the form its activations take for its kernel. Also where those rows live (`pair_buffers`),
/// which matrices are its own (`matrices_of`), and the parallel work item over its rows.
/// Groups are numbered experts first: group g < E is routed expert g, E + s shared expert s.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/amx_projection.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/pair_order.hpp"
#include "moe_routing/executor/expert_weights.hpp"

namespace moe_routing::cpu {

/// How a group's activations (its inputs and SwiGLU values) are laid out for its kernel.
enum class activation_form : std::uint8_t {
  float_rows,            ///< float rows (`gathered`, `activations`): the float kernels
  float_pair_rows,       ///< the same rows in pair order (`pair_order.hpp`): the AVX2 kernel for bfloat16 weights
  float_wide_pair_rows,  ///< the same in AVX-512's pair order (groups of 32): `avx512_pairs_kernel`
  bf16_rows,             ///< bfloat16 rows in the packed buffers: the AVX512_BF16 kernel
  bf16_tiles,            ///< the AMX tiles' packed copies (`amx::packed_index`)
};

/// The form a group `width` wide takes its activations in for `Kernel`: on AMX, tiles when h is
/// a whole number of tiles and bfloat16 rows (the AVX512_BF16 kernel's) otherwise.
template <class Kernel>
constexpr activation_form form_for(Kernel, int width) noexcept {
  if constexpr (std::is_same_v<Kernel, amx_kernel>) {
    return width % amx::tile_columns == 0 ? activation_form::bf16_tiles : activation_form::bf16_rows;
  } else if constexpr (takes_bf16_activations<Kernel>) {
    return activation_form::bf16_rows;
  } else if constexpr (takes_paired_activations<Kernel>) {
    return pair_group_columns_of<Kernel> == wide_pair_group_columns ? activation_form::float_wide_pair_rows
                                                                    : activation_form::float_pair_rows;
  } else {
    return activation_form::float_rows;
  }
}

/// One group (routed or shared expert) as the gather, projection and combine steps see it.
struct expert_job {
  int width = 0;         ///< its intermediate size h
  int first_pair = 0;    ///< its first row in the per-pair buffers; its rows are contiguous
  int pairs = 0;         ///< its tokens (0: inactive, never touched)
  int packed_first = 0;  ///< its first row in the packed bfloat16 buffers (bfloat16 forms only)
  activation_form form = activation_form::float_rows;
};

/// A parallel work item: one block of `rows_per_item` output rows of one group's projection.
struct work_item {
  std::int32_t group = 0;
  std::int32_t block = 0;
};

static_assert(std::is_trivially_copyable_v<expert_job> && std::is_trivially_copyable_v<work_item>);

/// A group's three matrices, each `[rows x columns]` row-major: gate and up `[h x d]`,
/// down `[d x h]`.
template <class Weight>
struct expert_matrices {
  const Weight* gate = nullptr;
  const Weight* up = nullptr;
  const Weight* down = nullptr;
};

/// Group `group`'s intermediate size h: shared experts have their own when it is set.
template <class Weight>
int width_of(const expert_weights<Weight>& w, int group) noexcept {
  return group >= w.experts && w.shared_intermediate > 0 ? w.shared_intermediate : w.intermediate;
}

/// Group `group`'s matrices. A fused gate_up matrix is the gate rows followed by the up
/// rows, so both layouts reach the kernels as two `[h x d]` matrices (each output row is one
/// weight row's dot products, so splitting the fused matrix changes no sum).
template <class Weight>
expert_matrices<Weight> matrices_of(const expert_weights<Weight>& w, int group) noexcept {
  const bool fused = w.layout == projection_layout::fused_gate_up;
  const bool routed = group < w.experts;
  const int s = group - w.experts;
  const int width = width_of(w, group);
  const Weight* down = routed ? w.down[group] : w.shared_down[s];
  if (fused) {
    const Weight* gate_up = routed ? w.gate_up[group] : w.shared_gate_up[s];
    return {gate_up, gate_up + static_cast<std::ptrdiff_t>(width) * w.hidden, down};
  }
  return {routed ? w.gate[group] : w.shared_gate[s], routed ? w.up[group] : w.shared_up[s], down};
}

/// Where a call's per-pair rows live: float inputs, SwiGLU activations and expert outputs, one row per (token, group)
/// pair; and the bfloat16 copies of the inputs and activations (rows or tiles, the bfloat16 kernels). Strides are in
/// elements.
struct pair_buffers {
  float* gathered = nullptr;     ///< [pairs x hidden]
  float* activations = nullptr;  ///< [pairs x activation_stride]
  float* expert_out = nullptr;   ///< [pairs x hidden]
  bfloat16* packed_in = nullptr;
  bfloat16* packed_act = nullptr;
  int hidden = 0;                        ///< d
  std::ptrdiff_t activation_stride = 0;  ///< the widest group's h

  float* gathered_rows(const expert_job& job) const noexcept { return gathered + row_offset(job.first_pair, hidden); }
  float* activation_rows(const expert_job& job) const noexcept {
    return activations + job.first_pair * activation_stride;
  }
  float* output_rows(const expert_job& job) const noexcept { return expert_out + row_offset(job.first_pair, hidden); }
  bfloat16* packed_inputs(const expert_job& job) const noexcept {
    return packed_in + row_offset(job.packed_first, hidden);
  }
  bfloat16* packed_activations(const expert_job& job) const noexcept {
    return packed_act + job.packed_first * activation_stride;
  }

 private:
  static std::ptrdiff_t row_offset(int row, int stride) noexcept { return static_cast<std::ptrdiff_t>(row) * stride; }
};

static_assert(std::is_trivially_copyable_v<pair_buffers>);

}  // namespace moe_routing::cpu
