#pragma once
/// \file
/// The state a CPU routing call works on, and what a set stage may read and change:
/// each token's top-k in rank order with p and sparse gates, the column masses and
/// votes, the selected set S and the guaranteed ranks. Written by `score_tokens`
/// (one pass over the score matrix), then handed to every stage in turn.
///
/// A user-written set stage receives this object in its `apply(auto& context)`.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cpu/value_top_k.hpp"
#include "moe_routing/cpu/workspace.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing::cpu {

template <score_element Element, class ExecutionPolicy>
class route_context {
 public:
  route_context(const routing_batch<Element>& batch, int top_k, workspace& ws,
                ExecutionPolicy exec) noexcept
      : batch_(batch), ws_(ws), exec_(exec), top_k_(top_k),
        chunk_count_((batch.tokens() + tokens_per_chunk - 1) / tokens_per_chunk) {}

  // ---- shape ----
  int tokens() const noexcept { return batch_.tokens(); }
  int experts() const noexcept { return batch_.experts(); }
  int top_k() const noexcept { return top_k_; }
  const routing_batch<Element>& batch() const noexcept { return batch_; }
  bool is_valid(int token) const noexcept { return batch_.is_valid(token); }

  // ---- per token (valid tokens only) ----
  /// topk_i in rank order, k = top_k() long.
  std::span<const std::int32_t> top_experts(int token) const noexcept {
    return {ws_.top_ids.data() + offset(token), static_cast<std::size_t>(top_k_)};
  }
  std::span<const float> top_probabilities(int token) const noexcept {
    return {ws_.top_p.data() + offset(token), static_cast<std::size_t>(top_k_)};
  }
  std::span<const float> top_gates(int token) const noexcept {
    return {ws_.top_gate.data() + offset(token), static_cast<std::size_t>(top_k_)};
  }
  const row_stats& stats(int token) const noexcept { return ws_.stats[static_cast<std::size_t>(token)]; }

  /// Marks token's best `ranks` experts as guaranteed and adds them to S.
  void guarantee(int token, int ranks) noexcept {
    auto& depth = ws_.depth[static_cast<std::size_t>(token)];
    if (ranks > depth) depth = ranks;
    for (int j = 0; j < ranks; ++j) {
      selected.insert(top_experts(token)[static_cast<std::size_t>(j)]);
      guaranteed.insert(top_experts(token)[static_cast<std::size_t>(j)]);
    }
  }
  int guaranteed_ranks(int token) const noexcept { return ws_.depth[static_cast<std::size_t>(token)]; }

  /// Scores the full row of a token: p and rank keys of every expert (group limit
  /// applied) into `scratch_p(chunk)` and `scratch_keys(chunk)`.
  row_stats score_full_row(int token, int chunk) const noexcept {
    return score_row(batch_.scores.row(token), experts(), batch_.mode, batch_.bias,
                     batch_.groups, scratch_p(chunk), scratch_keys(chunk), scratch_s(chunk));
  }
  /// Rank keys of every expert of a token's row into `scratch_keys(chunk)`, without
  /// its p where the scoring allows; p of any expert is then `probability(token, e)`.
  void rank_full_row(int token, int chunk) const noexcept {
    rank_row(batch_.scores.row(token), experts(), batch_.mode, batch_.bias, batch_.groups,
             scratch_p(chunk), scratch_keys(chunk), scratch_s(chunk));
  }
  /// The rank key of one expert of a row without a group limit, exactly as `rank_full_row`
  /// computes it (the limit needs the whole row).
  rank_key rank_key_of(int token, int expert) const noexcept {
    const float x = to_float(batch_.scores.row(token)[expert]);
    if (batch_.ranks_by_input()) return make_rank_key(x, expert);  // no p needed
    return make_rank_key(rank_score(x, probability_of(batch_.mode, x, stats(token)), batch_.bias, expert), expert);
  }
  /// p of one expert, recomputed exactly as the scoring pass computed it.
  float probability(int token, int expert) const noexcept {
    return probability_of(batch_.mode, to_float(batch_.scores.row(token)[expert]), stats(token));
  }
  float* scratch_p(int chunk) const noexcept { return ws_.chunk_p.data() + chunk_offset(chunk); }
  float* scratch_s(int chunk) const noexcept { return ws_.chunk_s.data() + chunk_offset(chunk); }
  rank_key* scratch_keys(int chunk) const noexcept { return ws_.chunk_keys.data() + chunk_offset(chunk); }
  rank_key* scratch_sorted_keys(int chunk) const noexcept { return ws_.chunk_sorted_keys.data() + chunk_offset(chunk); }
  std::int32_t* scratch_order(int chunk) const noexcept { return ws_.chunk_order.data() + chunk_offset(chunk); }
  std::int64_t* scratch_mass(int chunk) const noexcept { return ws_.chunk_sparse_mass.data() + chunk_offset(chunk); }

  // ---- batch-wide ----
  /// c[e] in fixed point (`fixed_mass.hpp`), summed over valid tokens. Like `votes()`,
  /// filled only for policies whose `scoring_needs` ask for it (every user stage does).
  std::span<const std::int64_t> mass(column_mass gate) const noexcept {
    const auto& values = gate == column_mass::dense ? ws_.dense_mass : ws_.sparse_mass;
    return {values.data(), static_cast<std::size_t>(experts())};
  }
  /// v[e]: valid tokens with e in their top-k.
  std::span<const std::int32_t> votes() const noexcept {
    return {ws_.votes.data(), static_cast<std::size_t>(experts())};
  }
  int requests() const noexcept { return batch_.requests(); }
  int request_begin(int r) const noexcept { return batch_.request_begin(r); }
  int request_end(int r) const noexcept { return batch_.request_end(r); }
  int devices() const noexcept { return batch_.placement == nullptr ? 0 : batch_.device_count; }
  int device_of(int expert) const noexcept { return batch_.placement[expert]; }

  /// Runs `work(item, chunk)` for items 0..count-1 split into at most chunk_count()
  /// contiguous blocks, block b on scratch `chunk` = b. Deterministic for any threads.
  template <class Work>
  void parallel_blocks(int count, Work work) const {
    const int blocks = std::min(count, chunk_count_);
    if (blocks <= 0) return;
    for_each_chunk(blocks, [&](int block) {
      const auto lo = static_cast<long long>(count) * block / blocks;
      const auto hi = static_cast<long long>(count) * (block + 1) / blocks;
      for (auto item = lo; item < hi; ++item) work(static_cast<int>(item), block);
    });
  }
  int chunk_count() const noexcept { return chunk_count_; }
  workspace& storage() const noexcept { return ws_; }

  expert_set selected;    ///< S
  expert_set guaranteed;  ///< union of every token's guaranteed experts

  /// Pass 1: scores every valid row once and keeps its top-k with p and sparse gates;
  /// accumulates the column masses and votes when `needs.column_mass` (dense ones too
  /// when `needs.dense_mass`). With `needs.top_k_only` a softmax row without a bias is
  /// ranked by its logits and only its top-k are exponentiated, relative to the top-1
  /// logit: its candidate total and confidence are then not set (see `scoring_needs`).
  void score_tokens(const scoring_needs& needs) {
    const int n = tokens();
    const int e_count = experts();
    const auto width = static_cast<std::size_t>(e_count);
    const bool cheap_softmax = needs.top_k_only && batch_.softmax_by_logits() && !batch_.groups.enabled();
    const bool sum_columns = needs.column_mass;
    const bool dense_mass = needs.column_mass && needs.dense_mass;
    // One chunk (decode batches) sums straight into the totals: no reduction pass.
    const bool single_chunk = chunk_count_ == 1;
    for_each_chunk(chunk_count_, [&, sum_columns, dense_mass](int chunk) {
      std::int64_t* sparse = single_chunk ? ws_.sparse_mass.data() : ws_.chunk_sparse_mass.data() + chunk_offset(chunk);
      std::int64_t* dense = single_chunk ? ws_.dense_mass.data() : ws_.chunk_dense_mass.data() + chunk_offset(chunk);
      if (sum_columns) std::fill(sparse, sparse + width, 0);
      if (dense_mass) std::fill(dense, dense + width, 0);
      const int end = std::min(n, (chunk + 1) * tokens_per_chunk);
      rank_key top_keys[max_top_k];
      for (int token = chunk * tokens_per_chunk; token < end; ++token) {
        ws_.depth[static_cast<std::size_t>(token)] = 0;
        if (!is_valid(token)) continue;
        std::int32_t* ids = ws_.top_ids.data() + offset(token);
        float* top_p = ws_.top_p.data() + offset(token);
        float* gates = ws_.top_gate.data() + offset(token);
        if (cheap_softmax && score_top_k_only(token, top_keys, ids, top_p)) {
          sparse_gates(top_p, top_k_, gates);  // top_p are exp(x_j - x_top1) here already
        } else {
          ws_.stats[static_cast<std::size_t>(token)] = score_full_row(token, chunk);
          const float* p = scratch_p(chunk);
          select_top(scratch_keys(chunk), e_count, top_k_, top_keys);
          for (int j = 0; j < top_k_; ++j) {
            ids[j] = expert_of(top_keys[j]);
            top_p[j] = p[ids[j]];
          }
          top_k_gates(token, ids, top_p, gates);
          if (dense_mass) {  // never with cheap_softmax: dense gates need the full softmax
            for (int e = 0; e < e_count; ++e) dense[e] += to_fixed_mass(p[e]);
          }
        }
        if (sum_columns) {
          for (int j = 0; j < top_k_; ++j) sparse[ids[j]] += to_fixed_mass(gates[j]);
        }
      }
    });
    if (!sum_columns) return;
    if (!single_chunk) {
      reduce_chunks(ws_.chunk_sparse_mass, ws_.sparse_mass);
      if (dense_mass) reduce_chunks(ws_.chunk_dense_mass, ws_.dense_mass);
    }
    std::fill(ws_.votes.begin(), ws_.votes.begin() + e_count, 0);
    for (int token = 0; token < n; ++token) {
      if (!is_valid(token)) continue;
      for (const std::int32_t e : top_experts(token)) ++ws_.votes[static_cast<std::size_t>(e)];
    }
  }

 private:
  /// Runs `work(chunk)` for chunks 0..count-1 under the execution policy; a single chunk
  /// runs inline, as handing one item to the thread pool costs more than decode-sized work.
  template <class Work>
  void for_each_chunk(int count, Work work) const {
    if (count == 1) {
      work(0);
      return;
    }
    std::for_each(exec_, ws_.chunk_index.begin(), ws_.chunk_index.begin() + count, work);
  }

  /// A token's sparse top-k gates. Softmax rows without a bias: exp(x_j - x_top1)
  /// renormalised over the top-k (p / sum of p with the softmax denominator cancelled, so the
  /// top-k-only path gets the same bits); other rows, or a non-finite top logit: p renormalised.
  void top_k_gates(int token, const std::int32_t* ids, const float* top_p, float* gates) const {
    const auto* row = batch_.scores.row(token);
    const float top = to_float(row[ids[0]]);
    // With a bias the top-ranked logit need not be the largest of the top-k: exp(x_j - top)
    // could overflow, so such rows take their stored p.
    if (batch_.softmax_by_logits() && std::isfinite(top)) {
      float relative[max_top_k];
      row_stats unit;
      unit.max_logit = top;
      unit.denominator = 1.0f;
      for (int j = 0; j < top_k_; ++j) relative[j] = probability_of(scoring::softmax, to_float(row[ids[j]]), unit);
      sparse_gates(relative, top_k_, gates);
    } else {
      sparse_gates(top_p, top_k_, gates);
    }
  }

  /// Softmax top-k without the denominator: keys from the logits, then p_j = exp(x_j - x_top1)
  /// for the k winners. Returns false (the caller scores the full row) when the top logit is
  /// not finite. The stats make `probability()` reproduce these p exactly for any expert.
  bool score_top_k_only(int token, rank_key* top_keys, std::int32_t* ids, float* top_p) {
    const auto* row = batch_.scores.row(token);
    top_of_values(row, experts(), top_k_, top_keys);
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

  std::size_t offset(int token) const noexcept {
    return static_cast<std::size_t>(token) * static_cast<std::size_t>(top_k_);
  }
  std::size_t chunk_offset(int chunk) const noexcept {
    return static_cast<std::size_t>(chunk) * static_cast<std::size_t>(experts());
  }
  void reduce_chunks(const std::vector<std::int64_t>& partial, std::vector<std::int64_t>& total) const {
    const int e_count = experts();
    std::fill(total.begin(), total.begin() + e_count, 0);
    for (int chunk = 0; chunk < chunk_count_; ++chunk) {
      const std::int64_t* values = partial.data() + chunk_offset(chunk);
      for (int e = 0; e < e_count; ++e) total[static_cast<std::size_t>(e)] += values[e];
    }
  }

  const routing_batch<Element>& batch_;
  workspace& ws_;
  ExecutionPolicy exec_;
  int top_k_;
  int chunk_count_;
};

}  // namespace moe_routing::cpu
