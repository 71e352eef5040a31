#pragma once
/// \file
/// What a set stage may read and change on the CPU (it satisfies `set_stage_context`):
/// each token's top-k in rank order with p and sparse gates, the column masses and
/// votes, the selected set S and the guaranteed ranks, and typed scratch. The scoring
/// pass (`score_pass.hpp`) fills it, then every stage runs on it in turn.
///
/// A user-written set stage receives this object in its `apply(auto& context)`. S is a
/// `selected_set`: no stage can remove a guaranteed expert, and the guaranteed set is
/// read-only except through `guarantee(token, ranks)` (docs/custom_stages.md).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/core/selected_set.hpp"
#include "moe_routing/core/stage_context.hpp"
#include "moe_routing/cpu/chunk_runner.hpp"
#include "moe_routing/cpu/score_row_path.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"
#include "moe_routing/cpu/simd/value_top_k.hpp"
#include "moe_routing/cpu/workspace.hpp"
#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing::cpu {

template <score_element Element, class ExecutionPolicy>
class stage_context {
 public:
  stage_context(const routing_batch<Element>& batch, int top_k, workspace& ws, ExecutionPolicy exec) noexcept
      : batch_(batch), ws_(ws), chunks_(exec, ws.chunk_index, batch.tokens()), top_k_(top_k) {}
  // `selected` points at this context's guaranteed set.
  stage_context(const stage_context&) = delete;
  stage_context& operator=(const stage_context&) = delete;

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
      guaranteed_experts_.insert(top_experts(token)[static_cast<std::size_t>(j)]);
      selected.insert(top_experts(token)[static_cast<std::size_t>(j)]);
    }
  }
  int guaranteed_ranks(int token) const noexcept { return ws_.depth[static_cast<std::size_t>(token)]; }

  /// Scores the full row of a token: p and rank keys of every expert (group limit
  /// applied) into `scratch_p(chunk)` and `scratch_keys(chunk)`, on `path`: a loop over rows
  /// asks `detail::choose_score_row_path()` once, before it.
  row_stats score_full_row(int token, int chunk, detail::score_row_path path) const noexcept {
    return detail::score_row_on(path, batch_.scores.row(token), experts(), batch_.mode, batch_.bias, batch_.groups,
                                scratch_p(chunk), scratch_keys(chunk), scratch_s(chunk));
  }
  /// `score_full_row` with the path chosen for this row alone.
  row_stats score_full_row(int token, int chunk) const noexcept {
    return score_full_row(token, chunk, detail::choose_score_row_path());
  }
  /// Rank keys of every expert of a token's row into `scratch_keys(chunk)`, without
  /// its p where the scoring allows (`rank_row`); p of any expert is then
  /// `probability(token, e)`. A row whose keys need p is scored on the CPU's path, chosen here
  /// for the row since its callers take one token at a time: about 20 cycles against a
  /// DeepSeek-V3 row's 3000. Before, such rows took the portable loops and one library exp
  /// per expert: 43% of an XShare call on DeepSeek-V3 rows (docs/benchmarks/routing_avx2.md).
  void rank_full_row(int token, int chunk) const noexcept {
    if (batch_.keys_from_input_alone()) {
      rank_row(batch_.scores.row(token), experts(), batch_.mode, batch_.bias, batch_.groups, scratch_p(chunk),
               scratch_keys(chunk), scratch_s(chunk));
      return;
    }
    (void)score_full_row(token, chunk);
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

  /// Runs `work(item, chunk)` for items 0..count-1 in parallel blocks (`chunk_runner`).
  template <class Work>
  void parallel_blocks(int count, Work work) const {
    chunks_.parallel_blocks(count, work);
  }
  int chunk_count() const noexcept { return chunks_.chunk_count(); }
  const chunk_runner<ExecutionPolicy>& chunks() const noexcept { return chunks_; }

  // ---- scratch a stage may use; nothing is kept after the stage ----
  /// Room for experts() ids (an expert order).
  std::int32_t* scratch_experts() const noexcept { return ws_.order.data(); }
  /// Room for max_experts counts (votes, device loads).
  std::int32_t* scratch_counts() const noexcept { return ws_.expert_scratch.data(); }
  /// Room for tokens() ids (a token order).
  std::int32_t* scratch_tokens() const noexcept { return ws_.token_order.data(); }
  /// Room for max_experts device cursors.
  std::int32_t* scratch_device_cursors() const noexcept { return ws_.device_cursor.data(); }
  /// One expert set per parallel block (chunk_count() of them).
  expert_set* scratch_chunk_sets() const noexcept { return ws_.chunk_selected.data(); }

  selected_set selected{guaranteed_experts_};  ///< S; it keeps every guaranteed expert
  /// Union of every token's guaranteed experts; grows only through `guarantee`.
  const expert_set& guaranteed = guaranteed_experts_;

 private:
  expert_set guaranteed_experts_;
  std::size_t offset(int token) const noexcept {
    return static_cast<std::size_t>(token) * static_cast<std::size_t>(top_k_);
  }
  std::size_t chunk_offset(int chunk) const noexcept {
    return static_cast<std::size_t>(chunk) * static_cast<std::size_t>(experts());
  }
  const routing_batch<Element>& batch_;
  workspace& ws_;
  chunk_runner<ExecutionPolicy> chunks_;
  int top_k_;
};

}  // namespace moe_routing::cpu
