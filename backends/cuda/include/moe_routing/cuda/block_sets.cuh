#pragma once
/// \file
/// The set stages of SPEC section 3 on one thread block (up to 1024 threads), with S,
/// the guaranteed set and the sort scratch in shared memory. E <= 1024, so an expert
/// order is found by counting: each thread ranks its experts against all others, in
/// the same total orders (mass or votes, then index) the CPU backend sorts by.

#include <cstdint>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/cuda/warp_row.cuh"
#include "moe_routing/cuda/workspace.cuh"
#include "moe_routing/policies/runtime_policy.hpp"

namespace moe_routing::cuda::detail {

/// Shared state of the set stages.
struct block_sets {
  std::uint32_t selected[set_words];
  std::uint32_t guaranteed[set_words];
  std::int32_t order[max_experts];
  std::int32_t scratch[max_experts];
  std::int32_t cursor[max_experts];
  unsigned long long sums[2];
  int count;
  int flag;
};

__device__ inline bool has(const std::uint32_t* set, int e) { return (set[e >> 5] >> (e & 31)) & 1u; }
__device__ inline void add(std::uint32_t* set, int e) { atomicOr(set + (e >> 5), 1u << (e & 31)); }
__device__ inline int set_size(const std::uint32_t* set) {
  int total = 0;
  for (int w = 0; w < set_words; ++w) total += __popc(set[w]);
  return total;
}

/// What every stage reads: the call's inputs and the scoring pass's outputs.
template <score_element Element>
struct stage_inputs {
  const routing_batch<Element>& batch;
  const device_workspace& ws;
  int top_k;
};

/// Writes `order[0..count)` = the experts with `candidate(e)`, sorted by `before`
/// (a strict total order), and returns count. Every thread of the block calls it.
template <class Candidate, class Before>
__device__ int rank_experts(block_sets& sh, int experts, Candidate candidate, Before before) {
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < experts; e += blockDim.x) {
    if (!candidate(e)) continue;
    int rank = 0;
    for (int f = 0; f < experts; ++f) rank += (f != e && candidate(f) && before(f, e)) ? 1 : 0;
    sh.order[rank] = e;
    atomicAdd(&sh.count, 1);
  }
  __syncthreads();
  const int count = sh.count;
  __syncthreads();
  return count;
}

/// Experts outside S with positive mass, by mass descending, ties to the lower index.
__device__ inline int rank_unselected_by_mass(block_sets& sh, int experts, const std::int64_t* mass) {
  return rank_experts(
      sh, experts, [&](int e) { return mass[e] > 0 && !has(sh.selected, e); },
      [&](int a, int b) { return mass[a] != mass[b] ? mass[a] > mass[b] : a < b; });
}

__device__ inline const std::int64_t* mass_of(const device_workspace& ws, column_mass gate) {
  return gate == column_mass::dense ? ws.dense_mass : ws.sparse_mass;
}

template <score_element Element>
__device__ void run_stage(const topk_union& stage, block_sets& sh, const stage_inputs<Element>& in) {
  const int k = stage.effective_k(in.top_k);
  for (int token = static_cast<int>(threadIdx.x); token < in.batch.tokens(); token += blockDim.x) {
    if (!in.batch.is_valid(token)) continue;
    for (int j = 0; j < k; ++j) add(sh.selected, in.ws.top_ids[token * in.top_k + j]);
  }
}

/// Marks token's best `ranks` experts guaranteed and adds them to S.
template <score_element Element>
__device__ void guarantee(block_sets& sh, const stage_inputs<Element>& in, int token, int ranks) {
  if (ranks > in.ws.depth[token]) in.ws.depth[token] = ranks;
  for (int j = 0; j < ranks; ++j) {
    add(sh.selected, in.ws.top_ids[token * in.top_k + j]);
    add(sh.guaranteed, in.ws.top_ids[token * in.top_k + j]);
  }
}

template <score_element Element>
__device__ void run_stage(const prune& stage, block_sets& sh, const stage_inputs<Element>& in) {
  for (int token = static_cast<int>(threadIdx.x); token < in.batch.tokens(); token += blockDim.x) {
    if (!in.batch.is_valid(token)) continue;
    guarantee(sh, in, token, stage.baseline_size(in.ws.top_p + token * in.top_k, in.ws.stats[token].candidate_total));
  }
}

template <score_element Element>
__device__ void run_stage(const greedy_mass& stage, block_sets& sh, const stage_inputs<Element>& in) {
  const int experts = in.batch.experts();
  const std::int64_t* mass = mass_of(in.ws, stage.gate);
  const int available = rank_unselected_by_mass(sh, experts, mass);
  if (stage.add >= 0 || stage.size >= 0) {
    const int take = stage.add >= 0 ? stage.add : stage.size - set_size(sh.selected);
    __syncthreads();  // every thread has counted S before it grows
    for (int i = static_cast<int>(threadIdx.x); i < available && i < take; i += blockDim.x) add(sh.selected, sh.order[i]);
    return;
  }
  if (threadIdx.x < 2) sh.sums[threadIdx.x] = 0;
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < experts; e += blockDim.x) {
    atomicAdd(&sh.sums[0], static_cast<unsigned long long>(mass[e]));  // integers: exact in any order
    if (has(sh.selected, e)) atomicAdd(&sh.sums[1], static_cast<unsigned long long>(mass[e]));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const double target = static_cast<double>(stage.mass) * static_cast<double>(static_cast<std::int64_t>(sh.sums[0]));
    auto held = static_cast<std::int64_t>(sh.sums[1]);
    for (int i = 0; i < available && static_cast<double>(held) < target; ++i) {
      add(sh.selected, sh.order[i]);
      held += mass[sh.order[i]];
    }
  }
}

/// XShare alg. 3, one warp per request at a time: S0_r as a bitset (lane l holds word l),
/// the request's own column mass in a scratch row, then its m_r best outside S0_r.
template <score_element Element>
__device__ void run_stage(const per_request& stage, block_sets& sh, const stage_inputs<Element>& in) {
  for (int token = static_cast<int>(threadIdx.x); token < in.batch.tokens(); token += blockDim.x) {
    if (in.batch.is_valid(token)) guarantee(sh, in, token, stage.k0);
  }
  if (stage.m_r == 0) return;
  const int experts = in.batch.experts();
  const int lane = lane_id();
  const int warp = static_cast<int>(threadIdx.x) / warp_lanes;
  const int warps = static_cast<int>(blockDim.x) / warp_lanes;
  std::int64_t* mass = in.ws.request_mass + static_cast<std::size_t>(warp % request_warps) * experts;
  for (int request = warp; request < in.batch.requests(); request += warps) {
    for (int e = lane; e < experts; e += warp_lanes) mass[e] = 0;
    __syncwarp();
    std::uint32_t base_word = 0;  // S0_r, experts 32 lane .. 32 lane + 31
    const int begin = in.batch.request_begin(request), end = in.batch.request_end(request);
    for (int token = begin; token < end; ++token) {
      if (!in.batch.is_valid(token)) continue;
      const std::int32_t* top = in.ws.top_ids + token * in.top_k;
      for (int j = 0; j < stage.k0; ++j) {
        if ((top[j] >> 5) == lane) base_word |= 1u << (top[j] & 31);
      }
      if (stage.gate == column_mass::sparse) {
        if (lane < in.top_k) atomicAdd(reinterpret_cast<unsigned long long*>(mass + top[lane]),
                                       static_cast<unsigned long long>(to_fixed_mass(in.ws.top_gate[token * in.top_k + lane])));
      } else {
        const auto* row = in.batch.scores.row(token);
        for (int e = lane; e < experts; e += warp_lanes) {
          mass[e] += to_fixed_mass(probability_of(in.batch.mode, to_float(row[e]), in.ws.stats[token]));
        }
      }
      __syncwarp();
    }
    // m_r rounds of a warp argmax over (mass desc, index asc), each below the last pick.
    std::int64_t last_mass = -1;
    int last_expert = -1;
    for (int round = 0; round < stage.m_r; ++round) {
      std::int64_t best_mass = 0;
      int best_expert = -1;
      for (int slot = 0; slot * warp_lanes < experts; ++slot) {  // uniform trip count: shuffles
        const bool in_base = (__shfl_sync(full_warp, base_word, slot) >> lane) & 1u;
        const int e = lane + slot * warp_lanes;
        if (e >= experts) continue;
        const std::int64_t m = mass[e];
        const bool below_last = last_expert < 0 || m < last_mass || (m == last_mass && e > last_expert);
        if (m > 0 && !in_base && below_last && (best_expert < 0 || m > best_mass)) {
          best_mass = m;
          best_expert = e;
        }
      }
      for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
        const std::int64_t other_mass = __shfl_xor_sync(full_warp, best_mass, offset);
        const int other_expert = __shfl_xor_sync(full_warp, best_expert, offset);
        const bool other_wins = other_expert >= 0 &&
            (best_expert < 0 || other_mass > best_mass || (other_mass == best_mass && other_expert < best_expert));
        best_mass = other_wins ? other_mass : best_mass;
        best_expert = other_wins ? other_expert : best_expert;
      }
      if (best_expert < 0) break;
      if (lane == 0) add(sh.selected, best_expert);
      last_mass = best_mass;
      last_expert = best_expert;
    }
    __syncwarp();
  }
}

template <score_element Element>
__device__ void run_stage(const ep_fill& stage, block_sets& sh, const stage_inputs<Element>& in) {
  const int experts = in.batch.experts();
  const int devices = in.batch.device_count;
  const std::int32_t* placement = in.batch.placement;
  const int available = rank_unselected_by_mass(sh, experts, mass_of(in.ws, stage.gate));
  if (threadIdx.x != 0) return;
  // Serial, as the CPU backend: the rounds depend on each other. O(E + G * rounds).
  std::int32_t* load = sh.scratch;
  std::int32_t* cursor = sh.cursor;
  for (int g = 0; g < devices; ++g) load[g] = cursor[g] = 0;
  for (int e = 0; e < experts; ++e) {
    if (has(sh.selected, e)) ++load[placement[e]];
  }
  for (bool added = true; added;) {
    added = false;
    for (int g = 0; g < devices; ++g) {
      if (load[g] >= stage.m_g) continue;
      int& i = cursor[g];
      while (i < available && placement[sh.order[i]] != g) ++i;
      if (i == available) continue;
      add(sh.selected, sh.order[i++]);
      ++load[g];
      added = true;
    }
  }
}

template <score_element Element>
__device__ void run_stage(const vote_drop& stage, block_sets& sh, const stage_inputs<Element>& in) {
  const int experts = in.batch.experts();
  const std::int32_t* votes = in.ws.votes;
  const std::int64_t* mass = mass_of(in.ws, stage.gate);
  const int size = set_size(sh.selected);
  const int count = rank_experts(
      sh, experts, [&](int e) { return has(sh.selected, e) && !has(sh.guaranteed, e); },
      [&](int a, int b) {
        if (votes[a] != votes[b]) return votes[a] < votes[b];
        if (mass[a] != mass[b]) return mass[a] < mass[b];
        return a > b;
      });
  int drop = stage.d < count ? stage.d : count;
  if (drop > size - 1) drop = size - 1;  // always leave one expert
  for (int i = static_cast<int>(threadIdx.x); i < drop; i += blockDim.x) {
    const int e = sh.order[i];
    atomicAnd(sh.selected + (e >> 5), ~(1u << (e & 31)));
  }
}

template <score_element Element>
__device__ void run_stage(const confidence_keep& stage, block_sets& sh, const stage_inputs<Element>& in) {
  const int experts = in.batch.experts();
  const auto important = [&](int token) {
    const row_stats& stats = in.ws.stats[token];
    return stats.max_candidate_p / stats.candidate_total >= stage.min_confidence;
  };
  if (threadIdx.x == 0) sh.flag = 0;
  __syncthreads();
  for (int token = static_cast<int>(threadIdx.x); token < in.batch.tokens(); token += blockDim.x) {
    if (in.batch.is_valid(token) && important(token)) sh.flag = 1;
  }
  for (int e = static_cast<int>(threadIdx.x); e < experts; e += blockDim.x) sh.scratch[e] = 0;
  for (int w = static_cast<int>(threadIdx.x); w < set_words; w += blockDim.x) sh.cursor[w] = 0;  // kept
  __syncthreads();
  const bool any_important = sh.flag != 0;
  auto* kept = reinterpret_cast<std::uint32_t*>(sh.cursor);
  std::int32_t* votes = sh.scratch;  // votes of the important tokens only
  for (int token = static_cast<int>(threadIdx.x); token < in.batch.tokens(); token += blockDim.x) {
    if (!in.batch.is_valid(token) || (any_important && !important(token))) continue;
    const std::int32_t* top = in.ws.top_ids + token * in.top_k;
    add(kept, top[0]);
    for (int j = 0; j < in.top_k; ++j) atomicAdd(votes + top[j], 1);
  }
  __syncthreads();
  const std::int64_t* mass = mass_of(in.ws, stage.gate);
  const int count = rank_experts(
      sh, experts, [&](int e) { return votes[e] > 0 && !has(kept, e); },
      [&](int a, int b) {
        if (votes[a] != votes[b]) return votes[a] > votes[b];
        if (mass[a] != mass[b]) return mass[a] > mass[b];
        return a < b;
      });
  const int room = stage.budget - set_size(kept);
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < count && i < room; i += blockDim.x) add(kept, sh.order[i]);
  __syncthreads();
  for (int w = static_cast<int>(threadIdx.x); w < set_words; w += blockDim.x) sh.selected[w] = kept[w];
}

/// Runs every set stage of `program` in order. S starts empty. Every thread calls it.
template <score_element Element>
__device__ void run_set_stages(const runtime_policy& program, block_sets& sh, const stage_inputs<Element>& in) {
  for (int w = static_cast<int>(threadIdx.x); w < set_words; w += blockDim.x) sh.selected[w] = sh.guaranteed[w] = 0;
  __syncthreads();
  for (int i = 0; i < program.set_stage_count; ++i) {
    program.set_stages[i].visit([&](const auto& stage) { run_stage(stage, sh, in); });
    __syncthreads();
  }
}

}  // namespace moe_routing::cuda::detail
