#pragma once
/// \file
/// The total order of SPEC section 2 as one unsigned integer per (score, expert):
/// a larger key ranks first. Scores descending, ties to the lower expert index, NaN
/// below every number, +inf above. One integer comparison per step keeps top-k
/// selection branch-light, and every backend that builds the same keys ranks alike.

#include <bit>
#include <cstdint>

#include "moe_routing/core/config.hpp"

namespace moe_routing {

using rank_key = std::uint64_t;

/// Monotone map of a float to 32 bits; NaN maps to 0, below -inf; -0 equals +0.
MOE_ROUTING_HOST_DEVICE constexpr std::uint32_t score_order(float score) noexcept {
  // Branch-free (the top-k scan calls this per expert on unpredictable data): flip the
  // sign bit of positives and every bit of negatives, then lift -0 onto +0 and zero NaN.
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(score);
  std::uint32_t order = bits ^ (static_cast<std::uint32_t>(static_cast<std::int32_t>(bits) >> 31) | 0x80000000u);
  order += bits == 0x80000000u ? 1u : 0u;
  return (bits & 0x7fffffffu) > 0x7f800000u ? 0u : order;
}

/// The score whose `score_order` is `order`: NaN for 0, +0 for the order -0 and +0 share. Sums
/// and maxima of scores taken back from their orders rank as those of the scores themselves.
MOE_ROUTING_HOST_DEVICE constexpr float score_of_order(std::uint32_t order) noexcept {
  const std::uint32_t bits = (order & 0x80000000u) != 0 ? order ^ 0x80000000u : ~order;
  return std::bit_cast<float>(order == 0 ? 0x7fc00000u : bits);
}

/// `score_order` without its NaN and -0 branches, so a loop of it vectorises: equal to it
/// except for NaN (any value) and -0 (one below +0's order, a value no score maps to).
/// Used only to skip scores that cannot enter a top-k: `skip_order(x) <= t` implies
/// `score_order(x) <= t` for every order t that a score has.
MOE_ROUTING_HOST_DEVICE constexpr std::uint32_t skip_order(float score) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(score);
  return bits ^ (static_cast<std::uint32_t>(static_cast<std::int32_t>(bits) >> 31) | 0x80000000u);
}

/// The key of an expert whose score's `score_order` is already known.
MOE_ROUTING_HOST_DEVICE constexpr rank_key order_rank_key(std::uint32_t order, int expert) noexcept {
  return (static_cast<rank_key>(order) << 32) | (0xffffffffu - static_cast<std::uint32_t>(expert));
}

MOE_ROUTING_HOST_DEVICE constexpr rank_key make_rank_key(float score, int expert) noexcept {
  return order_rank_key(score_order(score), expert);
}

MOE_ROUTING_HOST_DEVICE constexpr int expert_of(rank_key key) noexcept {
  return static_cast<int>(0xffffffffu - static_cast<std::uint32_t>(key & 0xffffffffu));
}

/// The key of a non-candidate (group-limited routing): treated as a score of -inf.
MOE_ROUTING_HOST_DEVICE constexpr rank_key excluded_rank_key(int expert) noexcept {
  return make_rank_key(-__builtin_huge_valf(), expert);
}

static_assert(score_order(1.0f) > score_order(0.5f));
static_assert(score_order(-0.0f) == score_order(0.0f));
static_assert(score_order(-__builtin_huge_valf()) > score_order(__builtin_nanf("")));
static_assert(score_order(__builtin_nanf("")) == 0 && score_order(-__builtin_nanf("")) == 0);
static_assert(score_order(-1e-45f) < score_order(0.0f) && score_order(1e-45f) > score_order(0.0f));
static_assert(score_of_order(score_order(-2.5f)) == -2.5f && score_of_order(score_order(0x1p-149f)) == 0x1p-149f);
static_assert(std::bit_cast<std::uint32_t>(score_of_order(score_order(-0.0f))) == 0);
static_assert(score_of_order(0) != score_of_order(0));  // NaN
static_assert(skip_order(1.5f) == score_order(1.5f) && skip_order(-2.0f) == score_order(-2.0f));
static_assert(skip_order(-0.0f) + 1 == score_order(0.0f));
static_assert(make_rank_key(1.0f, 3) > make_rank_key(1.0f, 4));
static_assert(expert_of(make_rank_key(2.0f, 1023)) == 1023);

}  // namespace moe_routing
