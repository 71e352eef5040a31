#pragma once
/// \file
/// What the CUDA backend's set stages work on: one thread block (up to 1024 threads) with
/// S, the guaranteed set and the sort scratch in shared memory. `block_stage_context`
/// satisfies `set_stage_context`; every thread of the block calls a built-in stage's
/// executor with it, and the executor splits the work among them. E <= 1024, so an expert
/// order is found by counting: each thread ranks its experts against all others, in the
/// same total orders (the stages' own predicates) the CPU backend sorts by.

#include <cstdint>
#include <span>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/expert_order.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cuda/workspace.cuh"

namespace moe_routing::cuda::detail {

/// Threads of every block that runs the set stages (one thread per expert at E = 1024).
inline constexpr int stage_block_threads = 1024;
/// Experts each thread of such a block ranks in `rank_experts`.
inline constexpr int rank_items = (max_experts + stage_block_threads - 1) / stage_block_threads;

/// Shared state of the set stages.
struct block_sets {
  std::uint32_t selected[set_words];
  std::uint32_t guaranteed[set_words];
  std::int32_t order[max_experts];
  std::int32_t scratch[max_experts];
  std::int32_t cursor[max_experts];
  unsigned long long sums[2];
  int count;
};

__device__ inline bool has(const std::uint32_t* set, int e) { return (set[e >> 5] >> (e & 31)) & 1u; }
__device__ inline void add(std::uint32_t* set, int e) { atomicOr(set + (e >> 5), 1u << (e & 31)); }
__device__ inline void remove(std::uint32_t* set, int e) { atomicAnd(set + (e >> 5), ~(1u << (e & 31))); }
/// Word `w` of an `expert_set` (64 experts) from a shared bitset of 32-bit words.
__device__ inline std::uint64_t set_word64(const std::uint32_t* set, int w) {
  return set[2 * w] | static_cast<std::uint64_t>(set[2 * w + 1]) << 32;
}
/// Stores word `w` of an `expert_set` into a shared bitset of 32-bit words.
__device__ inline void store_word64(std::uint32_t* set, int w, std::uint64_t word) {
  set[2 * w] = static_cast<std::uint32_t>(word);
  set[2 * w + 1] = static_cast<std::uint32_t>(word >> 32);
}
__device__ inline int set_size(const std::uint32_t* set) {
  int total = 0;
  for (int w = 0; w < set_words; ++w) total += __popc(set[w]);
  return total;
}

/// An expert set in shared memory, changed atomically by any thread of the block.
struct shared_expert_set {
  std::uint32_t* words;
  __device__ void insert(int expert) const { add(words, expert); }
  __device__ void erase(int expert) const { remove(words, expert); }
  __device__ bool contains(int expert) const { return has(words, expert); }
  __device__ int size() const { return set_size(words); }
};

/// The stage context of one block: the call's inputs, the scoring pass's outputs and the
/// shared sets. Every thread holds one and calls the stage with it.
template <score_element Element>
class block_stage_context {
 public:
  __device__ block_stage_context(const routing_batch<Element>& batch, const device_workspace& ws, int top_k,
                                 block_sets& shared)
      : batch_(batch),
        ws_(ws),
        top_k_(top_k),
        shared_(shared),
        selected{shared.selected},
        guaranteed{shared.guaranteed} {}

  // ---- shape ----
  __device__ int tokens() const { return batch_.tokens(); }
  __device__ int experts() const { return batch_.experts(); }
  __device__ int top_k() const { return top_k_; }
  __device__ bool is_valid(int token) const { return batch_.is_valid(token); }
  __device__ const routing_batch<Element>& batch() const { return batch_; }

  // ---- per token (valid tokens only) ----
  __device__ std::span<const std::int32_t> top_experts(int token) const {
    return {ws_.top_ids + offset(token), width()};
  }
  __device__ std::span<const float> top_probabilities(int token) const { return {ws_.top_p + offset(token), width()}; }
  __device__ std::span<const float> top_gates(int token) const { return {ws_.top_gate + offset(token), width()}; }
  __device__ const row_stats& stats(int token) const { return ws_.stats[token]; }
  /// Marks token's best `ranks` experts guaranteed and adds them to S (this thread only).
  __device__ void guarantee(int token, int ranks) const {
    if (ranks > ws_.depth[token]) ws_.depth[token] = ranks;
    for (int j = 0; j < ranks; ++j) {
      selected.insert(ws_.top_ids[offset(token) + j]);
      guaranteed.insert(ws_.top_ids[offset(token) + j]);
    }
  }

  // ---- batch-wide ----
  __device__ std::span<const std::int64_t> mass(column_mass gate) const {
    return {gate == column_mass::dense ? ws_.dense_mass : ws_.sparse_mass, static_cast<std::size_t>(experts())};
  }
  __device__ std::span<const std::int32_t> votes() const { return {ws_.votes, static_cast<std::size_t>(experts())}; }
  __device__ int requests() const { return batch_.requests(); }
  __device__ int request_begin(int r) const { return batch_.request_begin(r); }
  __device__ int request_end(int r) const { return batch_.request_end(r); }
  __device__ int devices() const { return batch_.placement == nullptr ? 0 : batch_.device_count; }
  __device__ int device_of(int expert) const { return batch_.placement[expert]; }

  // ---- scratch (shared memory, max_experts each) ----
  __device__ std::int32_t* scratch_experts() const { return shared_.order; }
  __device__ std::int32_t* scratch_counts() const { return shared_.scratch; }
  __device__ std::int32_t* scratch_cursors() const { return shared_.cursor; }
  /// Per-warp rows of E masses (request_warps of them) for per-request sums.
  __device__ std::int64_t* scratch_request_mass(int warp) const {
    return ws_.request_mass + static_cast<std::size_t>(warp % request_warps) * experts();
  }
  __device__ block_sets& shared() const { return shared_; }

  // ---- block-wide helpers: every thread of the block calls them ----
  /// Writes `scratch_experts()[0..count)` = the experts with `candidate(e)`, sorted by
  /// `before` (a strict total order), and returns count. The candidates are gathered
  /// first, then each is ranked against the candidates only: O(count) per thread, O(count^2)
  /// in all (decode's greedy stages rank a few experts, not E). Needs a block of
  /// `stage_block_threads`.
  template <class Candidate, class Before>
  __device__ int rank_experts(Candidate candidate, Before before) const {
    if (threadIdx.x == 0) shared_.count = 0;
    __syncthreads();
    for (int e = static_cast<int>(threadIdx.x); e < experts(); e += blockDim.x) {
      if (candidate(e)) shared_.order[atomicAdd(&shared_.count, 1)] = e;
    }
    __syncthreads();
    const int count = shared_.count;
    int mine[rank_items], rank[rank_items];
#pragma unroll
    for (int i = 0; i < rank_items; ++i) {
      const int at = static_cast<int>(threadIdx.x) + i * stage_block_threads;
      mine[i] = at < count ? shared_.order[at] : -1;
      rank[i] = 0;
      for (int f = 0; f < count && mine[i] >= 0; ++f) rank[i] += before(shared_.order[f], mine[i]) ? 1 : 0;
    }
    __syncthreads();  // every candidate is ranked before the list is overwritten in order
#pragma unroll
    for (int i = 0; i < rank_items; ++i) {
      if (mine[i] >= 0) shared_.order[rank[i]] = mine[i];
    }
    __syncthreads();
    return count;
  }
  /// Experts outside S with positive mass, heaviest first (`heavier_expert`).
  __device__ int rank_unselected_by_mass(const std::int64_t* mass) const {
    return rank_experts([&](int e) { return mass[e] > 0 && !selected.contains(e); },
                        [&](int a, int b) { return heavier_expert(mass[a], a, mass[b], b); });
  }

  shared_expert_set selected;    ///< S
  shared_expert_set guaranteed;  ///< union of every token's guaranteed experts

 private:
  __device__ std::size_t width() const { return static_cast<std::size_t>(top_k_); }
  __device__ std::size_t offset(int token) const { return static_cast<std::size_t>(token) * width(); }

  const routing_batch<Element>& batch_;
  const device_workspace& ws_;
  int top_k_;
  block_sets& shared_;
};

/// Runs `work(i)` for i = threadIdx.x, threadIdx.x + blockDim.x, ... < count.
template <class Work>
__device__ void for_each_thread_item(int count, Work work) {
  for (int i = static_cast<int>(threadIdx.x); i < count; i += blockDim.x) work(i);
}

}  // namespace moe_routing::cuda::detail
