#pragma once
/// \file
/// A fixed-capacity set of expert indices: `max_experts` bits in 64-bit words, a
/// trivially copyable value that fits in shared memory or registers.

#include <bit>
#include <cstdint>
#include <type_traits>

#include "moe_routing/core/bit_count.hpp"
#include "moe_routing/core/config.hpp"

namespace moe_routing {

class expert_set {
 public:
  static constexpr int word_count = max_experts / 64;

  /// The empty set.
  MOE_ROUTING_HOST_DEVICE constexpr expert_set() noexcept { clear(); }

  MOE_ROUTING_HOST_DEVICE constexpr void insert(int expert) noexcept {
    words_[expert >> 6] |= std::uint64_t{1} << (expert & 63);
  }
  MOE_ROUTING_HOST_DEVICE constexpr void erase(int expert) noexcept {
    words_[expert >> 6] &= ~(std::uint64_t{1} << (expert & 63));
  }
  MOE_ROUTING_HOST_DEVICE constexpr bool contains(int expert) const noexcept {
    return (words_[expert >> 6] >> (expert & 63)) & 1u;
  }
  MOE_ROUTING_HOST_DEVICE constexpr void clear() noexcept {
    // Stores the compiler sees one by one, not a 128-byte memset: built for the x86-64
    // baseline (a consumer's build without -march), GCC 12 expands such a memset to
    // `rep stosq`, whose start-up cost was about a tenth of routing one token (two sets
    // cleared per call, ~25 ns of ~290 ns); these become eight 16-byte SSE2 stores, or
    // wider ones with -march.
    MOE_ROUTING_UNROLL
    for (auto& word : words_) word = 0;
  }
  MOE_ROUTING_HOST_DEVICE constexpr int size() const noexcept {
    int total = 0;
    for (const auto word : words_) total += count_bits(word);
    return total;
  }
  MOE_ROUTING_HOST_DEVICE constexpr bool empty() const noexcept {
    for (const auto word : words_) {
      if (word != 0) return false;
    }
    return true;
  }
  /// Lowest member, or -1 when empty.
  MOE_ROUTING_HOST_DEVICE constexpr int first() const noexcept {
    for (int w = 0; w < word_count; ++w) {
      if (words_[w] != 0) return w * 64 + std::countr_zero(words_[w]);
    }
    return -1;
  }
  MOE_ROUTING_HOST_DEVICE constexpr expert_set& operator|=(const expert_set& other) noexcept {
    for (int w = 0; w < word_count; ++w) words_[w] |= other.words_[w];
    return *this;
  }
  /// Calls `visit(expert)` for every member in increasing order.
  template <class Visitor>
  MOE_ROUTING_HOST_DEVICE constexpr void for_each(Visitor&& visit) const {
    for (int w = 0; w < word_count; ++w) {
      for (std::uint64_t bits = words_[w]; bits != 0; bits &= bits - 1) {
        visit(w * 64 + std::countr_zero(bits));
      }
    }
  }
  MOE_ROUTING_HOST_DEVICE constexpr std::uint64_t word(int index) const noexcept { return words_[index]; }
  /// Experts 64 * index .. 64 * index + 63 at once (a GPU block fills a set word by word).
  MOE_ROUTING_HOST_DEVICE constexpr void set_word(int index, std::uint64_t bits) noexcept { words_[index] = bits; }
  friend constexpr bool operator==(const expert_set&, const expert_set&) = default;

 private:
  // No default member initializer: it would be the 128-byte memset `clear` avoids. The
  // constructor clears the words.
  std::uint64_t words_[word_count];
};

static_assert(std::is_trivially_copyable_v<expert_set>);

}  // namespace moe_routing
