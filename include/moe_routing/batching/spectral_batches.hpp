#pragma once
/// \file
/// A fast batch former that finds weak, spread-out structure: requests whose experts lean
/// the same way at every layer (a topic) share only a few more (layer, expert) pairs than
/// strangers do, so MinHash buckets, which need whole sets to be alike, rarely collect them;
/// over thousands of pairs the leanings add up. The pool is split in two along the leading
/// principal direction of its requests' (layer, expert) bits (power iteration on the
/// centred, sparse bit matrix), each half again along its own, until a group holds at most
/// `leaf_batches` batches; the oracle's greedy then forms that group's batches.
/// O(bits x iterations x log(N / B)) plus the greedy within groups.
///
/// Integer arithmetic throughout (the direction is kept as int64 below 2^20), so the batches
/// are the same for a seed on every platform and build.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "moe_routing/batching/form_batches.hpp"
#include "moe_routing/batching/request_signatures.hpp"
#include "moe_routing/core/error.hpp"
#include "moe_routing/synthetic/random_bits.hpp"

namespace moe_routing::batching {

/// The spectral method's knobs: group size at which splitting stops (in batches), power
/// iterations per split, and the seed of the starting directions.
struct spectral_options {
  int leaf_batches = 4;
  int iterations = 8;
  std::uint64_t seed = 1;
  /// A group finds its direction from at most this many of its members (evenly spaced in the
  /// order its parent's split left them; in a large pool, as few as a quarter of a small
  /// group), then orders all of them along it.
  int sample = 1024;
};

namespace detail {

/// Calls `visit(d)` for every (layer, expert) pair d = layer * 64 * words + expert that the
/// request used: its set bits.
template <class Visit>
void for_each_pair(const request_signatures& signatures, int request, Visit visit) {
  const auto bits = signatures.bits(request);
  for (std::size_t w = 0; w < bits.size(); ++w) {
    for (std::uint64_t word = bits[w]; word != 0; word &= word - 1) {
      visit(w * 64 + static_cast<std::size_t>(std::countr_zero(word)));
    }
  }
}

/// A group of requests as the rows of its centred signature matrix, scaled by the group
/// size n so that it stays integer: X = n B - 1 s^T, with B the 0/1 (layer, expert) bits and
/// s their column sums over the group. B is sparse, so X v and X^T X v cost O(bits set).
class centred_group {
 public:
  centred_group(const request_signatures& signatures, const std::vector<int>& members)
      : signatures_(signatures), members_(members), sums_(signatures.bits(0).size() * 64, 0) {
    for (const int r : members) for_each_pair(signatures, r, [&](std::size_t d) { ++sums_[d]; });
  }
  std::size_t dimensions() const noexcept { return sums_.size(); }

  /// (X v)[r] for a member r. |v| < 2^20, at most 2^22 bits per request and 2^17
  /// requests keep it below 2^60.
  std::int64_t project(int r, const std::vector<std::int64_t>& v, std::int64_t centre) const noexcept {
    std::int64_t bits_dot = 0;
    for_each_pair(signatures_, r, [&](std::size_t d) { bits_dot += v[d]; });
    return static_cast<std::int64_t>(members_.size()) * bits_dot - centre;
  }
  /// s . v, the centring term of every projection.
  std::int64_t centre(const std::vector<std::int64_t>& v) const noexcept {
    std::int64_t sum = 0;
    for (std::size_t d = 0; d < sums_.size(); ++d) sum += sums_[d] * v[d];
    return sum;
  }
  /// One power-iteration step, v <- X^T X v, rescaled so its largest entry is below 2^20.
  void multiply(std::vector<std::int64_t>& v) const {
    const auto n = static_cast<std::int64_t>(members_.size());
    const std::int64_t c = centre(v);
    std::vector<std::int64_t> w(v.size(), 0);
    std::int64_t total = 0;  // 1^T X v, scaled like the rest
    for (const int r : members_) {
      const std::int64_t q = project(r, v, c) >> 38;  // below 2^22: the sums below stay under 2^58
      total += q;
      for_each_pair(signatures_, r, [&](std::size_t d) { w[d] += q * n; });
    }
    std::int64_t largest = 0;
    for (std::size_t d = 0; d < w.size(); ++d) {
      w[d] -= sums_[d] * total;
      largest = std::max(largest, w[d] < 0 ? -w[d] : w[d]);
    }
    int shift = 0;
    while ((largest >> shift) >= (std::int64_t{1} << 20)) ++shift;
    for (std::size_t d = 0; d < w.size(); ++d) v[d] = w[d] >> shift;
  }

 private:
  const request_signatures& signatures_;
  const std::vector<int>& members_;
  std::vector<std::int64_t> sums_;
};

/// At most `count` members, evenly spaced.
inline std::vector<int> evenly_spaced(const std::vector<int>& members, int count) {
  if (static_cast<int>(members.size()) <= count) return members;
  std::vector<int> picked;
  picked.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const long long at = static_cast<long long>(i) * static_cast<long long>(members.size()) / count;
    picked.push_back(members[static_cast<std::size_t>(at)]);
  }
  return picked;
}

/// The group ordered along its leading direction, found from a sample of it (ties by
/// request id). Centring shifts every projection alike, so the order is that of B v.
inline std::vector<int> along_leading_direction(const request_signatures& signatures, const std::vector<int>& members,
                                                int pool_size, const spectral_options& options,
                                                synthetic::random_bits& rng) {
  // Deep in a large pool, a quarter of a group shows its direction about as well as all of it,
  // at a quarter of the cost; a group that is a large share of its pool is sampled in full.
  const auto size = static_cast<long long>(members.size());
  const auto share = static_cast<long long>(options.sample) * size / std::max(pool_size, 1);
  const auto wanted = std::min<long long>(options.sample, std::max({size / 4, share, 64LL}));
  const std::vector<int> sample = evenly_spaced(members, static_cast<int>(wanted));
  const centred_group group(signatures, sample);
  std::vector<std::int64_t> v(group.dimensions());
  for (auto& x : v) x = static_cast<std::int64_t>(rng.below(std::uint64_t{1} << 21)) - (std::int64_t{1} << 20);
  for (int i = 0; i < options.iterations; ++i) group.multiply(v);
  std::vector<std::pair<std::int64_t, int>> keyed;
  keyed.reserve(members.size());
  for (const int r : members) {
    std::int64_t bits_dot = 0;
    for_each_pair(signatures, r, [&](std::size_t d) { bits_dot += v[d]; });
    keyed.emplace_back(bits_dot, r);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<int> ordered;
  ordered.reserve(members.size());
  for (const auto& [key, r] : keyed) ordered.push_back(r);
  return ordered;
}

}  // namespace detail

/// The spectral method (see the file comment).
inline batch_list spectral_batches(const request_signatures& signatures, int batch_size,
                                   spectral_options options = {}) {
  detail::check_batch_size(batch_size);
  if (options.leaf_batches < 1 || options.iterations < 0 || options.sample < 2) {
    throw routing_error(fail(errc::invalid_parameter, "spectral_options.leaf_batches", options.leaf_batches,
                             "must be at least 1, with iterations at least 0 and sample at least 2"));
  }
  if (signatures.requests() > (1 << 17)) {
    throw routing_error(fail(errc::invalid_parameter, "requests", signatures.requests(),
                             "must be at most 2^17 for the spectral method (its integer sums)"));
  }
  synthetic::random_bits rng(options.seed);
  batch_union batch(signatures);
  batch_list batches;
  const std::size_t leaf = static_cast<std::size_t>(options.leaf_batches) * static_cast<std::size_t>(batch_size);
  std::vector<std::vector<int>> groups = {detail::all_requests(signatures.requests())};
  while (!groups.empty()) {  // depth first, the first half before the second
    std::vector<int> group = std::move(groups.back());
    groups.pop_back();
    if (group.size() <= leaf) {
      std::sort(group.begin(), group.end());  // the oracle's oldest-first order within the group
      for (auto& formed : detail::greedy_by_cost(std::move(group), batch_size, batch,
                                                 [](const batch_union&b, int r) { return b.new_experts(r); })) {
        batches.push_back(std::move(formed));
      }
      continue;
    }
    std::vector<int> ordered = detail::along_leading_direction(signatures, group, signatures.requests(), options, rng);
    // Halves of whole batches, so that only the last group formed holds a partial batch.
    const std::size_t b = static_cast<std::size_t>(batch_size);
    const std::size_t half = std::max(b, (ordered.size() / 2 + b / 2) / b * b);
    groups.emplace_back(ordered.begin() + static_cast<std::ptrdiff_t>(half), ordered.end());
    groups.emplace_back(ordered.begin(), ordered.begin() + static_cast<std::ptrdiff_t>(half));
  }
  return batches;
}

}  // namespace moe_routing::batching
