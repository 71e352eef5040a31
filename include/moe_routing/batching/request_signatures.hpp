#pragma once
/// \file
/// Request signatures for batch forming: the experts each request activated, per layer, as
/// a bitset of E bits. All requests live in one array (request-major, then layer, then
/// 64-bit word), so the union of a batch and the experts a request would add to it are
/// word-wise ORs, AND-NOTs and popcounts, with no allocation per query.
///
/// A signature grows as decoding proceeds: `add_row` takes a routing plan's row (the experts
/// a token of the request was given at one layer), so an engine can keep signatures of its
/// running requests from the plans it already has.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/error.hpp"

namespace moe_routing::batching {

class request_signatures {
 public:
  /// Throws routing_error naming the size when one is out of range, before allocating.
  request_signatures(int requests, int layers, int experts)
      : requests_(checked("request_signatures.requests", requests, 0, max_requests, "must be in [0, max_requests]")),
        layers_(checked("request_signatures.layers", layers, 1, max_layers, "must be in [1, max_layers]")),
        experts_(checked("request_signatures.experts", experts, 2, max_experts, "must be in [2, max_experts]")),
        words_((experts + 63) / 64),
        bits_(static_cast<std::size_t>(requests) * layers * words_, 0) {}

  /// The most requests and layers one set of signatures holds.
  static constexpr int max_requests = 1 << 22;
  static constexpr int max_layers = 4096;

  int requests() const noexcept { return requests_; }
  int layers() const noexcept { return layers_; }
  int experts() const noexcept { return experts_; }
  /// 64-bit words per layer of one signature.
  int words() const noexcept { return words_; }

  /// Marks `expert` as used by `request` at `layer`.
  void add(int request, int layer, int expert) noexcept {
    layer_bits(request, layer)[static_cast<std::size_t>(expert >> 6)] |= std::uint64_t{1} << (expert & 63);
  }
  /// Marks the first `count` ids of a plan row (ids outside [0, E), such as padding, are skipped).
  void add_row(int request, int layer, const std::int32_t* ids, int count) noexcept {
    for (int j = 0; j < count; ++j) {
      if (ids[j] >= 0 && ids[j] < experts_) add(request, layer, ids[j]);
    }
  }
  bool contains(int request, int layer, int expert) const noexcept {
    return (bits(request)[static_cast<std::size_t>(layer * words_ + (expert >> 6))] >> (expert & 63)) & 1u;
  }
  /// Every word of one request's signature: layer after layer, `words()` each.
  std::span<const std::uint64_t> bits(int request) const noexcept {
    return {bits_.data() + offset(request), static_cast<std::size_t>(layers_) * words_};
  }
  /// Experts the request used, summed over layers.
  int size(int request) const noexcept {
    int total = 0;
    for (const std::uint64_t word : bits(request)) total += std::popcount(word);
    return total;
  }

 private:
  static int checked(const char* name, int value, int lo, int hi, const char* range) {
    throw_if_failed(check_range(errc::invalid_parameter, name, value, lo, hi, range, "whose upper end is"));
    return value;
  }
  std::size_t offset(int request) const noexcept {
    return static_cast<std::size_t>(request) * static_cast<std::size_t>(layers_) * words_;
  }
  std::uint64_t* layer_bits(int request, int layer) noexcept {
    return bits_.data() + offset(request) + static_cast<std::size_t>(layer) * words_;
  }

  int requests_, layers_, experts_, words_;
  std::vector<std::uint64_t> bits_;
};

/// The union of a batch's signatures per layer, grown one request at a time. Its loads are
/// what the batch makes the layers fetch: the distinct experts, summed over layers.
class batch_union {
 public:
  explicit batch_union(const request_signatures& signatures)
      : signatures_(&signatures), words_(static_cast<std::size_t>(signatures.layers()) * signatures.words(), 0) {}

  void add(int request) noexcept {
    const auto bits = signatures_->bits(request);
    for (std::size_t w = 0; w < words_.size(); ++w) words_[w] |= bits[w];
  }
  /// The experts `request` would add to the union, summed over layers.
  int new_experts(int request) const noexcept {
    const auto bits = signatures_->bits(request);
    int added = 0;
    for (std::size_t w = 0; w < words_.size(); ++w) added += std::popcount(bits[w] & ~words_[w]);
    return added;
  }
  /// Distinct experts of the union, summed over layers.
  long long loads() const noexcept {
    long long total = 0;
    for (const std::uint64_t word : words_) total += std::popcount(word);
    return total;
  }
  void clear() noexcept { std::fill(words_.begin(), words_.end(), 0); }

 private:
  const request_signatures* signatures_;
  std::vector<std::uint64_t> words_;
};

}  // namespace moe_routing::batching
