#pragma once
/// \file
/// Offline batch forming: split a pool of requests into batches of at most B so that each
/// batch's layers fetch few distinct experts (the co-activation study in
/// `shared/papers/co-activation-input-reordering.txt`). Every method returns a partition:
/// each request in exactly one batch, batches in the order they were formed.
///
/// - `fifo_batches`: arrival order, the baseline an engine gets for free.
/// - `random_batches`: a seeded shuffle (the study's "random batches").
/// - `greedy_batches`: the study's oracle. Each batch starts from the oldest request left
///   and repeatedly takes the request that adds the fewest new experts to its union,
///   summed over layers (the oldest on ties). O(N^2 / B) signature comparisons.
/// - `minhash_batches`: the fast method. Each request is filed under H MinHash buckets of
///   its set of (layer, expert) pairs (locality-sensitive hashing: two requests share a
///   bucket with probability equal to their Jaccard similarity); each batch is filled
///   greedily, as the oracle does, but only from the requests that share a bucket with its
///   first one. For pools of 100,000 requests and more.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "moe_routing/batching/request_signatures.hpp"
#include "moe_routing/core/error.hpp"
#include "moe_routing/synthetic/random_bits.hpp"

namespace moe_routing::batching {

/// Request ids of each batch.
using batch_list = std::vector<std::vector<int>>;

namespace detail {

inline void check_batch_size(int batch_size) {
  if (batch_size < 1) {
    throw routing_error(fail(errc::invalid_parameter, "batch_size", batch_size, "must be at least 1"));
  }
}

/// Consecutive runs of `batch_size` from `order`.
inline batch_list chunk(const std::vector<int>& order, int batch_size) {
  batch_list batches;
  for (std::size_t at = 0; at < order.size(); at += static_cast<std::size_t>(batch_size)) {
    const auto end = std::min(order.size(), at + static_cast<std::size_t>(batch_size));
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(at),
                         order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return batches;
}

/// A 64-bit mix of a value with a seed (splitmix64's finaliser): the j-th MinHash function.
constexpr std::uint64_t mix(std::uint64_t value, std::uint64_t seed) noexcept {
  std::uint64_t z = value + seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Position in `candidates` of the request that adds the fewest new experts to `batch`,
/// the first on ties (candidates are in arrival order). `candidates` is not empty.
inline std::size_t cheapest(const batch_union& batch, const std::vector<int>& candidates) {
  std::size_t best = 0;
  int best_cost = batch.new_experts(candidates[0]);
  for (std::size_t i = 1; i < candidates.size() && best_cost > 0; ++i) {
    const int cost = batch.new_experts(candidates[i]);
    if (cost < best_cost) best = i, best_cost = cost;
  }
  return best;
}

}  // namespace detail

inline batch_list fifo_batches(int requests, int batch_size) {
  detail::check_batch_size(batch_size);
  std::vector<int> order(static_cast<std::size_t>(std::max(requests, 0)));
  std::iota(order.begin(), order.end(), 0);
  return detail::chunk(order, batch_size);
}

/// A seeded Fisher-Yates shuffle cut into batches: the same batches for a seed everywhere.
inline batch_list random_batches(int requests, int batch_size, std::uint64_t seed) {
  detail::check_batch_size(batch_size);
  std::vector<int> order(static_cast<std::size_t>(std::max(requests, 0)));
  std::iota(order.begin(), order.end(), 0);
  synthetic::random_bits rng(seed);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return detail::chunk(order, batch_size);
}

namespace detail {

/// The requests 0..count-1, oldest first.
inline std::vector<int> all_requests(int count) {
  std::vector<int> requests(static_cast<std::size_t>(std::max(count, 0)));
  std::iota(requests.begin(), requests.end(), 0);
  return requests;
}

/// The greedy skeleton of the oracles over `left` (request ids, oldest first): each batch
/// starts from the oldest request left and
/// takes, while it has room, the request of least `added_cost(batch, request)` (the oldest on
/// ties; a cost of 0 is taken at once). `batch` is the union the cost reads: cleared per batch.
template <class Union, class AddedCost>
batch_list greedy_by_cost(std::vector<int> left, int batch_size, Union& batch, AddedCost added_cost) {
  check_batch_size(batch_size);
  batch_list batches;
  while (!left.empty()) {
    batch.clear();
    std::vector<int> members = {left.front()};
    batch.add(left.front());
    left.erase(left.begin());
    while (static_cast<int>(members.size()) < batch_size && !left.empty()) {
      std::size_t best = 0;
      auto best_cost = added_cost(batch, left[0]);
      for (std::size_t i = 1; i < left.size() && best_cost > 0; ++i) {
        const auto cost = added_cost(batch, left[i]);
        if (cost < best_cost) best = i, best_cost = cost;
      }
      members.push_back(left[best]);
      batch.add(left[best]);
      left.erase(left.begin() + static_cast<std::ptrdiff_t>(best));
    }
    batches.push_back(std::move(members));
  }
  return batches;
}

}  // namespace detail

/// The study's greedy oracle (see the file comment).
inline batch_list greedy_batches(const request_signatures& signatures, int batch_size) {
  batch_union batch(signatures);
  return detail::greedy_by_cost(detail::all_requests(signatures.requests()), batch_size, batch,
                                [](const batch_union& b, int request) { return b.new_experts(request); });
}

/// The fast method's knobs: MinHash functions per request (each one a bucket a request is
/// filed under), how many candidates per batch slot the greedy choice looks at, and the
/// hash family's seed.
struct minhash_options {
  int hashes = 8;
  int candidates_per_slot = 4;
  std::uint64_t seed = 1;
};

namespace detail {

/// For each request and hash function j, the bucket it is filed under: j with the
/// (layer, expert) pair of its signature whose hash is smallest (two requests share it
/// with probability equal to their Jaccard similarity). An empty signature gets no bucket.
inline std::vector<std::uint64_t> minhash_buckets(const request_signatures& signatures,
                                                  const minhash_options& options) {
  const auto hashes = static_cast<std::size_t>(options.hashes);
  std::vector<std::uint64_t> buckets(static_cast<std::size_t>(signatures.requests()) * hashes, ~std::uint64_t{0});
  std::vector<std::uint64_t> smallest(hashes);
  for (int r = 0; r < signatures.requests(); ++r) {
    std::fill(smallest.begin(), smallest.end(), ~std::uint64_t{0});
    const auto bits = signatures.bits(r);
    for (std::size_t w = 0; w < bits.size(); ++w) {
      for (std::uint64_t word = bits[w]; word != 0; word &= word - 1) {
        const std::uint64_t element = w * 64 + static_cast<std::uint64_t>(std::countr_zero(word));
        for (std::size_t j = 0; j < hashes; ++j) {
          const std::uint64_t h = mix(element, options.seed + j);
          if (h < smallest[j]) smallest[j] = h, buckets[static_cast<std::size_t>(r) * hashes + j] = j << 40 | element;
        }
      }
    }
  }
  return buckets;
}

}  // namespace detail

/// The fast method: each batch starts from the oldest request left, looks for candidates
/// among the requests that share one of its MinHash buckets (up to `candidates_per_slot`
/// x B of them, then the oldest left), and fills itself greedily from those as the oracle
/// does from everyone. O(N x B x candidates_per_slot) signature comparisons, not O(N^2 / B).
inline batch_list minhash_batches(const request_signatures& signatures, int batch_size, minhash_options options = {}) {
  detail::check_batch_size(batch_size);
  if (options.hashes < 1 || options.hashes > 64 || options.candidates_per_slot < 1) {
    throw routing_error(fail(errc::invalid_parameter, "minhash_options.hashes", options.hashes,
                             "must be in [1, 64], with candidates_per_slot at least 1"));
  }
  const auto hashes = static_cast<std::size_t>(options.hashes);
  const std::vector<std::uint64_t> buckets = detail::minhash_buckets(signatures, options);
  std::unordered_map<std::uint64_t, std::vector<int>> members_of;
  for (int r = 0; r < signatures.requests(); ++r) {
    for (std::size_t j = 0; j < hashes; ++j) {
      const std::uint64_t bucket = buckets[static_cast<std::size_t>(r) * hashes + j];
      if (bucket != ~std::uint64_t{0}) members_of[bucket].push_back(r);
    }
  }
  const std::size_t wanted =
      static_cast<std::size_t>(batch_size) * static_cast<std::size_t>(options.candidates_per_slot);
  std::vector<char> taken(static_cast<std::size_t>(signatures.requests()), 0), listed(taken.size(), 0);
  batch_union batch(signatures);
  batch_list batches;
  int oldest = 0;  // every request before it is taken
  for (;;) {
    while (oldest < signatures.requests() && taken[static_cast<std::size_t>(oldest)]) ++oldest;
    if (oldest == signatures.requests()) break;
    const int seed = oldest;
    std::vector<int> candidates;
    for (std::size_t j = 0; j < hashes && candidates.size() < wanted; ++j) {
      const std::uint64_t bucket = buckets[static_cast<std::size_t>(seed) * hashes + j];
      if (bucket == ~std::uint64_t{0}) continue;
      for (const int r : members_of[bucket]) {
        if (candidates.size() >= wanted) break;
        if (r != seed && !taken[static_cast<std::size_t>(r)] && !listed[static_cast<std::size_t>(r)]) {
          listed[static_cast<std::size_t>(r)] = 1;
          candidates.push_back(r);
        }
      }
    }
    for (int r = seed + 1; r < signatures.requests() && candidates.size() < static_cast<std::size_t>(batch_size); ++r) {
      if (!taken[static_cast<std::size_t>(r)] && !listed[static_cast<std::size_t>(r)])
        listed[static_cast<std::size_t>(r)] = 1, candidates.push_back(r);
    }
    std::sort(candidates.begin(), candidates.end());  // ties go to the oldest, as in the oracle
    batch.clear();
    batch.add(seed);
    taken[static_cast<std::size_t>(seed)] = 1;
    std::vector<int> members = {seed};
    while (static_cast<int>(members.size()) < batch_size && !candidates.empty()) {
      const std::size_t best = detail::cheapest(batch, candidates);
      members.push_back(candidates[best]);
      batch.add(candidates[best]);
      taken[static_cast<std::size_t>(candidates[best])] = 1;
      candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(best));
    }
    for (const int r : candidates) listed[static_cast<std::size_t>(r)] = 0;
    batches.push_back(std::move(members));
  }
  return batches;
}

/// What the batches make the layers fetch: each batch's distinct experts, summed over
/// layers and batches.
inline long long expert_loads(const request_signatures& signatures, const batch_list& batches) {
  batch_union batch(signatures);
  long long total = 0;
  for (const auto& members : batches) {
    batch.clear();
    for (const int r : members) batch.add(r);
    total += batch.loads();
  }
  return total;
}

}  // namespace moe_routing::batching
