#pragma once
/// \file
/// The CPU backend's reusable workspace: every buffer a routing call needs, sized once
/// for a largest batch, so that `route` itself never allocates.

#include <cstdint>
#include <numeric>
#include <vector>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/error.hpp"
#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/core/workspace_shape.hpp"

namespace moe_routing::cpu {

/// Tuning data: tokens per parallel work item. Work is split by token count alone, so
/// the plan never depends on the number of threads.
inline constexpr int tokens_per_chunk = 64;

/// The largest problem a workspace serves: any batch with at most these tokens, experts
/// and plan width can reuse it.
using moe_routing::workspace_shape;

class workspace {
 public:
  workspace() = default;
  explicit workspace(workspace_shape shape) { reserve(shape); }

  /// Sizes every buffer; a no-op when the workspace is already large enough. Throws
  /// routing_error naming the size when one is out of range, before allocating. Should an
  /// allocation throw (std::bad_alloc), the workspace is left sized for nothing: a later call
  /// is refused as `workspace_too_small` until a `reserve` succeeds.
  void reserve(workspace_shape shape) {
    throw_if_failed(validate_workspace_shape(shape));
    if (shape.max_tokens <= shape_.max_tokens && shape.experts <= shape_.experts && shape.top_k <= shape_.top_k &&
        !top_ids.empty()) {
      return;
    }
    shape_ = workspace_shape{};  // claims no room until every buffer below has its new size
    chunk_capacity_ = 0;
    const auto n = static_cast<std::size_t>(shape.max_tokens > 0 ? shape.max_tokens : 1);
    const auto e = static_cast<std::size_t>(shape.experts);
    const auto k = static_cast<std::size_t>(shape.top_k);
    const int chunk_capacity = static_cast<int>((n + tokens_per_chunk - 1) / tokens_per_chunk);
    const auto chunks = static_cast<std::size_t>(chunk_capacity);
    top_ids.assign(n * k, 0);
    top_p.assign(n * k, 0);
    top_gate.assign(n * k, 0);
    stats.assign(n, {});
    depth.assign(n, 0);
    token_order.assign(n, 0);
    chunk_p.assign(chunks * e, 0);
    chunk_s.assign(chunks * e, 0);
    chunk_keys.assign(chunks * e, 0);
    chunk_sorted_keys.assign(chunks * e, 0);
    chunk_order.assign(chunks * e, 0);
    chunk_sparse_mass.assign(chunks * e, 0);
    chunk_dense_mass.assign(chunks * e, 0);
    chunk_selected.assign(chunks, {});
    sparse_mass.assign(e, 0);
    dense_mass.assign(e, 0);
    votes.assign(e, 0);
    order.assign(e, 0);
    expert_scratch.assign(static_cast<std::size_t>(max_experts), 0);
    device_cursor.assign(static_cast<std::size_t>(max_experts), 0);
    chunk_index.resize(chunks);
    std::iota(chunk_index.begin(), chunk_index.end(), 0);
    chunk_capacity_ = chunk_capacity;
    shape_ = shape;
  }

  const workspace_shape& shape() const noexcept { return shape_; }
  int chunk_capacity() const noexcept { return chunk_capacity_; }

  // Per token, k wide: the top-k of each row in rank order, its p and sparse gate.
  std::vector<std::int32_t> top_ids;
  std::vector<float> top_p;
  std::vector<float> top_gate;
  std::vector<row_stats> stats;
  std::vector<std::int32_t> depth;        ///< guaranteed leading ranks
  std::vector<std::int32_t> token_order;  ///< n: capacity's seat order of one slot round
  // Per chunk, E wide: scratch rows and partial column masses.
  std::vector<float> chunk_p;
  std::vector<float> chunk_s;
  std::vector<rank_key> chunk_keys;
  std::vector<rank_key> chunk_sorted_keys;  ///< refine's rank threshold (nth_element copy)
  std::vector<std::int32_t> chunk_order;
  std::vector<std::int64_t> chunk_sparse_mass;
  std::vector<std::int64_t> chunk_dense_mass;
  std::vector<expert_set> chunk_selected;
  // Batch-wide, E wide.
  std::vector<std::int64_t> sparse_mass;
  std::vector<std::int64_t> dense_mass;
  std::vector<std::int32_t> votes;
  std::vector<std::int32_t> order;
  std::vector<std::int32_t> expert_scratch;  ///< max_experts: device loads (G <= max_experts) or per-expert votes
  std::vector<std::int32_t> device_cursor;
  std::vector<int> chunk_index;  ///< 0..chunks-1, the range parallel loops iterate

 private:
  workspace_shape shape_{};
  int chunk_capacity_ = 0;
};

}  // namespace moe_routing::cpu
