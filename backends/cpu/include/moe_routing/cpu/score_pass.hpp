#pragma once
/// \file
/// The CPU's scoring pass: every valid row is read once; its top-k is kept in rank order
/// with p and sparse gates, and, when the policy reads them, the column masses and votes
/// are summed (per chunk in fixed point, then reduced). It fills what `stage_context`
/// hands to the stages.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cpu/score_row_path.hpp"
#include "moe_routing/cpu/simd/key_top_k.hpp"
#include "moe_routing/cpu/simd/value_top_k.hpp"
#include "moe_routing/cpu/workspace.hpp"
#include "moe_routing/policies/scoring_needs.hpp"

namespace moe_routing::cpu {

/// Pass 1 of a routing call over `context`'s batch, writing into `ws`.
template <class Context>
class score_pass {
 public:
  score_pass(const Context& context, workspace& ws, const scoring_needs& needs) noexcept
      : context_(context),
        ws_(ws),
        top_k_(context.top_k()),
        experts_(context.experts()),
        top_k_only_(needs.top_k_only && context.batch().softmax_by_logits() && !context.batch().groups.enabled()),
        sum_columns_(needs.column_mass),
        dense_mass_(needs.column_mass && needs.dense_mass),
        single_chunk_(context.chunk_count() == 1) {}

  /// Scores every valid row once and keeps its top-k with p and sparse gates; accumulates
  /// the column masses and votes when `needs.column_mass` (dense ones too when
  /// `needs.dense_mass`). With `needs.top_k_only` a softmax row without a bias is ranked by
  /// its logits and only its top-k are exponentiated, relative to the top-1 logit: its
  /// candidate total and confidence are then not set (see `scoring_needs`).
  void run() {
    context_.chunks().for_each_chunk(context_.chunk_count(), [this](int chunk) { score_chunk(chunk); });
    if (!sum_columns_) return;
    if (!single_chunk_) {
      reduce_chunks(ws_.chunk_sparse_mass, ws_.sparse_mass);
      if (dense_mass_) reduce_chunks(ws_.chunk_dense_mass, ws_.dense_mass);
    }
    count_votes();
  }

 private:
  /// One chunk's tokens. One chunk (decode batches) sums straight into the totals: no
  /// reduction pass.
  void score_chunk(int chunk) {
    const auto width = static_cast<std::size_t>(experts_);
    std::int64_t* sparse = single_chunk_ ? ws_.sparse_mass.data() : ws_.chunk_sparse_mass.data() + chunk_offset(chunk);
    std::int64_t* dense = single_chunk_ ? ws_.dense_mass.data() : ws_.chunk_dense_mass.data() + chunk_offset(chunk);
    if (sum_columns_) std::fill(sparse, sparse + width, 0);
    if (dense_mass_) std::fill(dense, dense + width, 0);
    const int end = std::min(context_.tokens(), (chunk + 1) * tokens_per_chunk);
    detail::score_row_path_once path;
    for (int token = chunk * tokens_per_chunk; token < end; ++token) {
      ws_.depth[static_cast<std::size_t>(token)] = 0;
      if (!context_.is_valid(token)) continue;
      const float* gates = score_token(token, chunk, dense, path);
      if (sum_columns_) {
        const std::int32_t* ids = ws_.top_ids.data() + offset(token);
        for (int j = 0; j < top_k_; ++j) sparse[ids[j]] += to_fixed_mass(gates[j]);
      }
    }
  }

  /// A valid token's top-k ids, p and gates; adds its dense gates to `dense` when asked.
  /// Returns its gates.
  const float* score_token(int token, int chunk, std::int64_t* dense, detail::score_row_path_once& path) {
    std::int32_t* ids = ws_.top_ids.data() + offset(token);
    float* top_p = ws_.top_p.data() + offset(token);
    float* gates = ws_.top_gate.data() + offset(token);
    rank_key top_keys[max_top_k];
    if (top_k_only_ && score_top_k_only(token, top_keys, ids, top_p)) {
      sparse_gates(top_p, top_k_, gates);  // top_p are exp(x_j - x_top1) here already
      return gates;
    }
    ws_.stats[static_cast<std::size_t>(token)] = context_.score_full_row(token, chunk, path.get());
    const float* p = context_.scratch_p(chunk);
    top_k_of_keys_dispatched(context_.scratch_keys(chunk), experts_, top_k_, top_keys);
    for (int j = 0; j < top_k_; ++j) {
      ids[j] = expert_of(top_keys[j]);
      top_p[j] = p[ids[j]];
    }
    top_k_gates_of(token, ids, top_p, gates);
    if (dense_mass_) {  // never on the top-k-only path: dense gates need the full softmax
      for (int e = 0; e < experts_; ++e) dense[e] += to_fixed_mass(p[e]);
    }
    return gates;
  }

  /// A token's sparse top-k gates (`top_k_gates`, shared with the CUDA backend).
  void top_k_gates_of(int token, const std::int32_t* ids, const float* top_p, float* gates) const {
    const auto* row = context_.batch().scores.row(token);
    float top_x[max_top_k] = {};  // zeros past top_k_, which GCC cannot prove unread
    for (int j = 0; j < top_k_; ++j) top_x[j] = to_float(row[ids[j]]);
    top_k_gates(context_.batch().softmax_by_logits(), top_x, top_p, top_k_, gates);
  }

  /// Softmax top-k without the denominator: keys from the logits, then p_j = exp(x_j - x_top1)
  /// for the k winners. Returns false (the caller scores the full row) when the top logit is
  /// not finite. The stats make `probability()` reproduce these p exactly for any expert.
  bool score_top_k_only(int token, rank_key* top_keys, std::int32_t* ids, float* top_p) {
    const auto* row = context_.batch().scores.row(token);
    top_k_of_values(row, experts_, top_k_, top_keys);
    const float top = to_float(row[expert_of(top_keys[0])]);
    if (!std::isfinite(top)) return false;  // NaN or infinite: full row
    row_stats stats;
    stats.max_logit = top;
    stats.denominator = 1.0f;
    ws_.stats[static_cast<std::size_t>(token)] = stats;
    for (int j = 0; j < top_k_; ++j) {
      ids[j] = expert_of(top_keys[j]);
      top_p[j] = probability_of(scoring::softmax, to_float(row[ids[j]]), stats);
    }
    return true;
  }

  void reduce_chunks(const std::vector<std::int64_t>& partial, std::vector<std::int64_t>& total) const {
    std::fill(total.begin(), total.begin() + experts_, 0);
    for (int chunk = 0; chunk < context_.chunk_count(); ++chunk) {
      const std::int64_t* values = partial.data() + chunk_offset(chunk);
      for (int e = 0; e < experts_; ++e) total[static_cast<std::size_t>(e)] += values[e];
    }
  }

  /// v[e]: valid tokens with e in their top-k.
  void count_votes() {
    std::fill(ws_.votes.begin(), ws_.votes.begin() + experts_, 0);
    for (int token = 0; token < context_.tokens(); ++token) {
      if (!context_.is_valid(token)) continue;
      for (const std::int32_t e : context_.top_experts(token)) ++ws_.votes[static_cast<std::size_t>(e)];
    }
  }

  std::size_t offset(int token) const noexcept {
    return static_cast<std::size_t>(token) * static_cast<std::size_t>(top_k_);
  }
  std::size_t chunk_offset(int chunk) const noexcept {
    return static_cast<std::size_t>(chunk) * static_cast<std::size_t>(experts_);
  }

  const Context& context_;
  workspace& ws_;
  int top_k_;
  int experts_;
  bool top_k_only_;   ///< softmax rows take the top-k-only path
  bool sum_columns_;  ///< column masses and votes
  bool dense_mass_;
  bool single_chunk_;
};

/// Runs the scoring pass of one routing call.
template <class Context>
void score_tokens(const Context& context, workspace& ws, const scoring_needs& needs) {
  score_pass<Context>(context, ws, needs).run();
}

}  // namespace moe_routing::cpu
