#pragma once
/// \file
/// The kernels of one routing call. Per token (one warp each): scoring and top-k, then
/// assignment and weighting. Per batch (one block): the set stages, then the summary and
/// the padding of invalid rows. `fused_route_kernel` runs all four in one block for
/// decode-sized batches; larger batches launch them as four kernels.

#include <cstdint>

#include "moe_routing/cuda/kernels/capacity_pass.cuh"
#include "moe_routing/cuda/kernels/replica_dispatch.cuh"
#include "moe_routing/cuda/kernels/warp_row.cuh"
#include "moe_routing/cuda/stages/set_stages.cuh"
#include "moe_routing/cuda/workspace.cuh"
#include "moe_routing/plan/routing_plan.hpp"
#include "moe_routing/policies/runtime_policy.hpp"
#include "moe_routing/policies/scoring_needs.hpp"

namespace moe_routing::cuda::detail {

/// Device-side input errors, in `device_workspace::error`. A bad replica map is recorded as
/// `bad_replicas + fault - 1` (`replica_fault`, replica_map.hpp), so the status names it.
enum input_error : std::int32_t { no_input_error = 0, bad_segments = 1, bad_placement = 2, bad_replicas = 3 };

/// Everything a kernel of the call reads, passed by value.
/// `Program` is the policy the set stages run: its runtime form, or a compiled pipeline
/// that holds a user stage (which has no runtime form).
template <score_element Element, class Program = runtime_policy>
struct route_call {
  using element = Element;
  routing_batch<Element> batch;
  plan_view plan;
  device_workspace ws;
  Program program;          ///< the set stages
  refine assignment;        ///< the assignment stage (vanilla's in prefill for a decode-only policy)
  bool as_vanilla = false;  ///< prefill of a decode-only policy: topk_union instead of the set stages
  scoring_needs needs;
};

inline constexpr int block_threads = stage_block_threads;
inline constexpr int token_block_threads = 256;
/// Tuning data: shared memory for row slices. The fused kernel gets what its 48 KiB of
/// static shared memory leaves beside `block_sets` (all 32 warps hold rows up to E = 248,
/// 31 at E = 256, 16 at E = 512, 8 at E = 1024); the per-token kernels one slice of
/// E = 1024 per warp.
inline constexpr int fused_row_words = 8960;
inline constexpr int token_row_words = token_block_threads / warp_lanes * (max_experts + group_words);

/// Writes a token's topk_i (ids in rank order, their p and input values) with its sparse
/// gates, and adds its share of the sparse column mass and votes. Every lane calls it.
template <class Call>
__device__ void record_top_k(const Call& c, int token, const std::int32_t* ids, const float* top_p,
                             const float* top_x) {
  const int lane = lane_id();
  const int k = c.plan.top_k;
  const device_workspace& ws = c.ws;
  float gates[max_top_k];
  top_k_gates(c.batch.softmax_by_logits(), top_x, top_p, k, gates);
  if (lane == 0) {
    for (int j = 0; j < k; ++j) {
      ws.top_ids[token * k + j] = ids[j];
      ws.top_p[token * k + j] = top_p[j];
      ws.top_gate[token * k + j] = gates[j];
    }
  }
  if (!c.needs.column_mass) return;
  for (int j = lane; j < k; j += warp_lanes) {
    atomicAdd(reinterpret_cast<unsigned long long*>(ws.sparse_mass + ids[j]),
              static_cast<unsigned long long>(to_fixed_mass(gates[j])));  // integers: any order
    atomicAdd(ws.votes + ids[j], 1);
  }
}

/// Scores a valid token's row into `row`, stores its statistics, and adds its dense mass
/// when the policy reads it. Every lane calls it.
template <class Call>
__device__ row_stats score_valid_row(const Call& c, int token, const warp_row& row) {
  const bool top_k_only = c.needs.top_k_only && c.batch.softmax_by_logits();
  const bool dense = c.needs.column_mass && c.needs.dense_mass;
  const row_stats stats = score_row_on_warp(c.batch, token, top_k_only, row, dense ? c.ws.dense_mass : nullptr);
  if (lane_id() == 0) c.ws.stats[token] = stats;
  return stats;
}

/// Scoring pass of one token (SPEC sections 1-2): topk_i with p and sparse gates by warp
/// selection, the row statistics, and the token's share of the column masses and votes.
/// p of the winners is recomputed from their input by `probability_of`, the function that
/// scored them: the same bits.
template <class Call>
__device__ void score_token(const Call& c, int token, const warp_row& row) {
  if (lane_id() == 0) c.ws.depth[token] = 0;
  if (!c.batch.is_valid(token)) return;
  const row_stats stats = score_valid_row(c, token, row);
  const auto* input = c.batch.scores.row(token);
  std::int32_t ids[max_top_k];
  float top_p[max_top_k], top_x[max_top_k];
  rank_key below = ~rank_key{0};
  for (int j = 0; j < c.plan.top_k; ++j) {
    below = next_key_below(row, c.batch.experts(), below, [](int) { return true; });
    ids[j] = expert_of(below);
    top_x[j] = to_float(input[ids[j]]);
    top_p[j] = probability_of(c.batch.mode, top_x[j], stats);
  }
  record_top_k(c, token, ids, top_p, top_x);
}

/// The key of rank `rank - 1` among the row's keys (they are distinct): the largest v
/// with at least `rank` keys >= v, found bit by bit.
__device__ inline rank_key kth_largest_key(const warp_row& row, int experts, int rank) {
  rank_key result = 0;
  for (int bit = 63; bit >= 0; --bit) {
    const rank_key candidate = result | (rank_key{1} << bit);
    int count = 0;
    for (int e = lane_id(); e < experts; e += warp_lanes) count += row.key(e) >= candidate ? 1 : 0;
    for (int offset = warp_lanes / 2; offset > 0; offset /= 2) count += __shfl_xor_sync(full_warp, count, offset);
    if (count >= rank) result = candidate;
  }
  return result;
}

/// The empty row of an invalid token. Every lane calls it.
template <class Call>
__device__ void write_invalid_row(const Call& c, int token) {
  const int width = c.plan.top_k;
  for (int j = lane_id(); j < width; j += warp_lanes) {
    c.plan.ids[static_cast<std::size_t>(token) * width + j] = c.plan.pad.sentinel_value;
    c.plan.weights[static_cast<std::size_t>(token) * width + j] = 0.0f;
  }
  if (lane_id() == 0) {
    c.plan.counts[token] = 0;
    if (c.plan.guaranteed != nullptr) c.plan.guaranteed[token] = 0;
  }
}

/// refine's search of S past a token's stored top-k: the row ranked again, then its best
/// `k` members of S below `max_rank`, else S's best member alone; ids and p. Returns the count.
template <class Call>
__device__ int search_past_top_k(const Call& c, const std::uint32_t* selected, int token, const warp_row& row,
                                 std::int32_t* ids, float* p) {
  const int experts = c.batch.experts();
  const int k = c.assignment.effective_k(c.plan.top_k);
  const int max_rank = c.assignment.rank_limit(experts);
  const auto* input = c.batch.scores.row(token);
  rank_row_on_warp(c.batch, token, row);
  const rank_key threshold = max_rank < experts ? kth_largest_key(row, experts, max_rank) : 0;
  const auto in_s = [&](int e) { return has(selected, e); };
  int count = 0;
  rank_key below = ~rank_key{0};
  for (int j = 0; j < k; ++j) {
    below = next_key_below(row, experts, below, [&](int e) { return in_s(e) && row.key(e) >= threshold; });
    if (below == 0) break;
    ids[count++] = expert_of(below);
  }
  if (count == 0) {
    const rank_key best = next_key_below(row, experts, ~rank_key{0}, in_s);
    if (best != 0) ids[count++] = expert_of(best);
  }
  for (int j = 0; j < count; ++j) p[j] = probability_of(c.batch.mode, to_float(input[ids[j]]), c.ws.stats[token]);
  return count;
}

/// `refine` for one token (SPEC section 3): A_i, its weights and its padding. Every lane
/// calls it; every lane computes the same A_i, so the branches are uniform.
template <class Call>
__device__ void assign_token(const Call& c, const std::uint32_t* selected, int token, const warp_row& row) {
  if (!c.batch.is_valid(token)) {
    write_invalid_row(c, token);
    return;
  }
  const int width = c.plan.top_k;
  const refine& stage = c.assignment;
  const device_workspace& ws = c.ws;
  std::int32_t ids[max_top_k];
  float p[max_top_k];
  int count = stage.take_from_top_k(
      ws.top_ids + token * width, ws.top_p + token * width, width, c.batch.experts(),
      [&](int e) { return has(selected, e); }, ids, p);
  if (stage.searches_past_top_k(count, width, c.batch.experts()))
    count = search_past_top_k(c, selected, token, row, ids, p);
  float weights[max_top_k];
  stage.weigh(p, count, weights);
  std::int32_t* ids_out = c.plan.ids + static_cast<std::size_t>(token) * width;
  float* weights_out = c.plan.weights + static_cast<std::size_t>(token) * width;
  for (int j = lane_id(); j < width; j += warp_lanes) {
    const bool assigned = j < count;
    ids_out[j] = assigned ? ids[j] : padding_id(c.plan.pad, count, ids[0]);
    weights_out[j] = assigned ? weights[j] : 0.0f;
    if (assigned) {
      atomicOr(ws.active + (ids[j] >> 5), 1u << (ids[j] & 31));
      if (c.plan.expert_tokens != nullptr) atomicAdd(c.plan.expert_tokens + ids[j], 1);
    }
  }
  if (lane_id() == 0) {
    c.plan.counts[token] = count;
    if (c.plan.guaranteed != nullptr) c.plan.guaranteed[token] = ws.depth[token];
  }
}

/// Clears the per-call accumulators (the memset of the multi-kernel path) and the plan's
/// per-expert counts. One block.
template <class Call>
__device__ void clear_accumulators(const Call& c, bool workspace_too) {
  if (workspace_too) {
    auto* words = static_cast<std::uint32_t*>(c.ws.zeroed_begin);
    for (std::size_t i = threadIdx.x; i < c.ws.zeroed_bytes / 4; i += blockDim.x) words[i] = 0;
  }
  if (c.plan.expert_tokens != nullptr) {
    for (int e = static_cast<int>(threadIdx.x); e < c.batch.experts(); e += blockDim.x) c.plan.expert_tokens[e] = 0;
  }
}

/// Whether entry r of the segments (0 <= r <= R) breaks `check_segments`'s rules: offsets
/// start at 0, never decrease, and end at n. Each entry is checked on its own, so a block
/// checks them all in parallel.
__device__ inline bool bad_segment_entry(const std::int32_t* segments, int requests, int tokens, int r) {
  if (r == 0 && segments[0] != 0) return true;
  if (r < requests && segments[r + 1] < segments[r]) return true;
  return r == requests && segments[requests] != tokens;
}

/// The first `replica_fault` of a map's arrays and of the placement against it (0: none),
/// in the order `validate_batch` finds them on the host: a slot holding no expert, then
/// the rows in expert order (the first fault of the lowest expert, reduced on
/// e * replica_fault_count + fault), then the counts' sum, then `placed_on_first_replica`
/// (`slot_holds_expert`, `check_replica_row`), every thread of the block a share. Every
/// thread calls it and gets the same answer. One block.
__device__ inline int replica_map_fault(const replica_map& map, const std::int32_t* placement) {
  constexpr int none = 0x7fffffff;
  __shared__ int first, total;
  if (threadIdx.x == 0) first = none, total = 0;
  __syncthreads();
  // A slot fault keys below every row's (no row returns slot_expert, so e = 0 with that
  // fault is free), as the host checks every slot before the first row.
  int key = none, counted = 0;
  for (int p = static_cast<int>(threadIdx.x); p < map.physical_count; p += blockDim.x) {
    if (!slot_holds_expert(map, p)) key = static_cast<int>(replica_fault::slot_expert);
  }
  for (int e = static_cast<int>(threadIdx.x); e < map.experts; e += blockDim.x) {
    const replica_row_check check = check_replica_row(map, e);
    if (check.fault == replica_fault::none) {
      counted += map.replica_counts[e];
    } else {
      key = min(key, e * replica_fault_count + static_cast<int>(check.fault));
    }
  }
  atomicMin(&first, key);
  atomicAdd(&total, counted);
  __syncthreads();
  int fault = first == none ? 0 : first % replica_fault_count;
  if (fault == 0 && total != map.physical_count) fault = static_cast<int>(replica_fault::counts_sum);
  bool misplaced = false;
  if (fault == 0) {  // the map is valid: its rows may be read
    for (int e = static_cast<int>(threadIdx.x); e < map.experts; e += blockDim.x) {
      misplaced = misplaced || !placed_on_first_replica(map, placement, e);
    }
  }
  // Also orders every thread's read of `first` and `total` before a later call resets them.
  if (__syncthreads_or(misplaced) != 0) fault = static_cast<int>(replica_fault::first_device);
  return fault;
}

/// Checks the optional arrays the host could not read, every thread of the block a share;
/// on failure records which and returns false (the stages then leave S empty and every row
/// empty). One block.
template <class Call>
__device__ bool inputs_valid(const Call& c) {
  const auto& batch = c.batch;
  bool segments_bad = false, placement_bad = false;
  if (batch.segments != nullptr) {
    for (int r = static_cast<int>(threadIdx.x); r <= batch.request_count; r += blockDim.x) {
      segments_bad = segments_bad || bad_segment_entry(batch.segments, batch.request_count, batch.tokens(), r);
    }
  }
  if (batch.placement != nullptr) {
    for (int e = static_cast<int>(threadIdx.x); e < batch.experts(); e += blockDim.x) {
      placement_bad = placement_bad || !is_device_of_placement(batch.placement[e], batch.device_count);
    }
  }
  const int replicas_fault = batch.has_replicas() ? replica_map_fault(batch.replicas, batch.placement) : 0;
  segments_bad = __syncthreads_or(segments_bad) != 0;
  placement_bad = __syncthreads_or(placement_bad) != 0;
  int error = replicas_fault != 0 ? bad_replicas + replicas_fault - 1 : no_input_error;
  if (placement_bad) error = bad_placement;
  if (segments_bad) error = bad_segments;
  if (threadIdx.x == 0 && error != no_input_error) *c.ws.error = error;
  return error == no_input_error;
}

/// Writes the plan summary (SPEC section 4) and pads the rows of invalid tokens. One block.
template <class Call>
__device__ void finish_plan(const Call& c, const std::uint32_t* selected, block_sets& sh) {
  if (c.assignment.caps_experts()) reroute_over_capacity_on_block(c, selected, sh.cursor);  // capacity_pass.cuh
  plan_summary& summary = *c.plan.summary;
  const std::uint32_t* active = c.ws.active;
  for (int w = static_cast<int>(threadIdx.x); w < expert_set::word_count; w += blockDim.x) {
    summary.active.set_word(w, set_word64(active, w));
    summary.selected.set_word(w, set_word64(selected, w));
  }
  const bool inputs_usable = *c.ws.error == no_input_error;
  const bool placement_usable = c.batch.placement != nullptr && *c.ws.error != bad_placement;
  const int devices = placement_usable ? c.batch.device_count : 0;
  for (int g = static_cast<int>(threadIdx.x); g < devices; g += blockDim.x) sh.scratch[g] = 0;
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < c.batch.experts() && devices > 0; e += blockDim.x) {
    if (has(active, e)) atomicAdd(sh.scratch + c.batch.placement[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    summary.active_count = set_size(active);
    summary.selected_count = set_size(selected);
    int max_load = 0;
    for (int g = 0; g < devices; ++g) max_load = sh.scratch[g] > max_load ? sh.scratch[g] : max_load;
    summary.max_device_load = max_load;
    int lowest = -1;
    for (int w = 0; w < set_words && lowest < 0; ++w) {
      if (active[w] != 0) lowest = w * 32 + __ffs(static_cast<int>(active[w])) - 1;
    }
    sh.count = lowest;
  }
  for (int g = static_cast<int>(threadIdx.x); g < devices; g += blockDim.x) {
    if (c.plan.device_loads != nullptr) c.plan.device_loads[g] = sh.scratch[g];
  }
  __syncthreads();
  if (c.plan.pad.kind != padding_kind::repeat) return dispatch_to_replicas_on_block(c, sh, inputs_usable);
  // Rows of invalid tokens repeat the batch's lowest active expert (no extra load).
  const int fill = empty_row_id(c.plan.pad, sh.count);
  const int width = c.plan.top_k;
  for (int token = static_cast<int>(threadIdx.x); token < c.batch.tokens(); token += blockDim.x) {
    if (c.plan.counts[token] != 0) continue;
    for (int j = 0; j < width; ++j) c.plan.ids[static_cast<std::size_t>(token) * width + j] = fill;
  }
  dispatch_to_replicas_on_block(c, sh, inputs_usable);  // replica_dispatch.cuh
}

__device__ inline int warp_index() { return static_cast<int>(threadIdx.x) / warp_lanes; }

/// S in `sh.selected`: the set stages in order, or empty when an input array is bad.
template <class Call>
__device__ void select_experts(const Call& c, block_sets& sh) {
  if (inputs_valid(c)) {
    block_stage_context<typename Call::element> context(c.batch, c.ws, c.plan.top_k, sh);
    run_set_stages(c.program, c.as_vanilla, context);
    return;
  }
  for (int w = static_cast<int>(threadIdx.x); w < set_words; w += blockDim.x) sh.selected[w] = 0;
  __syncthreads();
}

/// Decode path: the whole call in one block of `block_threads`, one launch, no memset.
/// Decode path: the whole call in one block of `block_threads`, one launch, no memset.
/// Rows are scored and assigned by the warps that get a row slice (`fused_row_words`).
template <class Call>
__global__ void __launch_bounds__(block_threads) fused_route_kernel(const Call c) {
  __shared__ block_sets sh;
  __shared__ row_slices<fused_row_words> rows;
  const int experts = c.batch.experts();
  const int warps = row_slices<fused_row_words>::warps_with_rows(static_cast<int>(blockDim.x) / warp_lanes, experts);
  const warp_row row = rows.row_of(warp_index() < warps ? warp_index() : 0, experts);
  clear_accumulators(c, true);
  __syncthreads();
  if (warp_index() < warps) {
    for (int token = warp_index(); token < c.batch.tokens(); token += warps) score_token(c, token, row);
  }
  __threadfence_block();
  __syncthreads();
  select_experts(c, sh);
  if (warp_index() < warps) {
    for (int token = warp_index(); token < c.batch.tokens(); token += warps) assign_token(c, sh.selected, token, row);
  }
  __syncthreads();
  finish_plan(c, sh.selected, sh);
}

/// The row slice of this warp in a per-token kernel (every warp gets one).
__device__ inline warp_row token_row(row_slices<token_row_words>& rows, int experts) {
  return rows.row_of(warp_index(), experts);
}

/// Large-batch path, step 1: one warp per token.
template <class Call>
__global__ void __launch_bounds__(token_block_threads) score_kernel(const Call c) {
  __shared__ row_slices<token_row_words> rows;
  const int token = static_cast<int>(blockIdx.x) * (token_block_threads / warp_lanes) + warp_index();
  if (token < c.batch.tokens()) score_token(c, token, token_row(rows, c.batch.experts()));
}

/// Segmented-sort path, step 1a: one warp per token scores its row and writes all E rank
/// keys (a segment of `keys`) for the segmented radix sort. A masked row's segment is
/// sorted but never read; it gets keys all the same (order 0), so the sort reads no
/// uninitialised memory.
template <class Call>
__global__ void __launch_bounds__(token_block_threads) row_keys_kernel(const Call c, rank_key* keys) {
  __shared__ row_slices<token_row_words> rows;
  const int token = static_cast<int>(blockIdx.x) * (token_block_threads / warp_lanes) + warp_index();
  if (token >= c.batch.tokens()) return;
  const int experts = c.batch.experts();
  rank_key* out = keys + static_cast<std::size_t>(token) * experts;
  if (lane_id() == 0) c.ws.depth[token] = 0;
  if (!c.batch.is_valid(token)) {
    for (int e = lane_id(); e < experts; e += warp_lanes) out[e] = order_rank_key(0, e);
    return;
  }
  const warp_row row = token_row(rows, experts);
  (void)score_valid_row(c, token, row);
  for (int e = lane_id(); e < experts; e += warp_lanes) out[e] = row.key(e);
}

/// Step 1b (after the sort): topk_i is the first k keys of each sorted segment.
template <class Call>
__global__ void __launch_bounds__(token_block_threads) top_from_sorted_kernel(const Call c, const rank_key* sorted) {
  const int token = static_cast<int>(blockIdx.x) * (token_block_threads / warp_lanes) + warp_index();
  if (token >= c.batch.tokens() || !c.batch.is_valid(token)) return;
  const rank_key* first = sorted + static_cast<std::size_t>(token) * c.batch.experts();
  const auto* input = c.batch.scores.row(token);
  std::int32_t ids[max_top_k];
  float top_p[max_top_k], top_x[max_top_k];
  for (int j = 0; j < c.plan.top_k; ++j) {
    ids[j] = expert_of(first[j]);
    top_x[j] = to_float(input[ids[j]]);
    top_p[j] = probability_of(c.batch.mode, top_x[j], c.ws.stats[token]);  // the p the warp path keeps
  }
  record_top_k(c, token, ids, top_p, top_x);
}

/// Step 2: the set stages on one block; S goes to the workspace.
template <class Call>
__global__ void __launch_bounds__(block_threads) select_kernel(const Call c) {
  __shared__ block_sets sh;
  clear_accumulators(c, false);
  select_experts(c, sh);
  for (int w = static_cast<int>(threadIdx.x); w < set_words; w += blockDim.x) c.ws.selected[w] = sh.selected[w];
}

/// Step 3: one warp per token.
template <class Call>
__global__ void __launch_bounds__(token_block_threads) assign_kernel(const Call c) {
  __shared__ row_slices<token_row_words> rows;
  const int token = static_cast<int>(blockIdx.x) * (token_block_threads / warp_lanes) + warp_index();
  if (token < c.batch.tokens()) assign_token(c, c.ws.selected, token, token_row(rows, c.batch.experts()));
}

/// Step 4: the summary, on one block.
template <class Call>
__global__ void __launch_bounds__(block_threads) finish_kernel(const Call c) {
  __shared__ block_sets sh;
  finish_plan(c, c.ws.selected, sh);
}

}  // namespace moe_routing::cuda::detail
