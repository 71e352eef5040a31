#pragma once
/// \file
/// S as a set stage changes it: an `expert_set` that always keeps the guaranteed experts.
///
/// A stage's context hands every stage, built in or written outside the library, S as a
/// `selected_set`. `erase`, `clear` and assignment leave every member of the guaranteed
/// set in place, so no stage can take away an expert that an earlier stage guaranteed
/// (`prune`'s top-k0 of every token): the plan's `guaranteed` column and
/// `measure_plan().guarantees_held` stay true whatever a user stage does. The context's
/// `guarantee(token, ranks)` is the only way to add to the guaranteed set.
///
/// \code
///   context.selected.erase(e);   // removes e unless a token has it guaranteed
///   context.selected.clear();    // S becomes the guaranteed set
/// \endcode

#include <cstdint>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/expert_set.hpp"

namespace moe_routing {

class selected_set {
 public:
  /// S starts empty; `guaranteed` must outlive this set (both are members of one context).
  MOE_ROUTING_HOST_DEVICE constexpr explicit selected_set(const expert_set& guaranteed) noexcept
      : guaranteed_(&guaranteed) {}
  // A copy would point at the other context's guaranteed set.
  selected_set(const selected_set&) = delete;
  selected_set& operator=(const selected_set&) = delete;

  MOE_ROUTING_HOST_DEVICE constexpr void insert(int expert) noexcept { set_.insert(expert); }
  /// Removes `expert` unless it is guaranteed; returns whether it was removed.
  MOE_ROUTING_HOST_DEVICE constexpr bool erase(int expert) noexcept {
    if (guaranteed_->contains(expert)) return false;
    const bool held = set_.contains(expert);
    set_.erase(expert);
    return held;
  }
  /// Leaves exactly the guaranteed experts.
  MOE_ROUTING_HOST_DEVICE constexpr void clear() noexcept { set_ = *guaranteed_; }
  /// S becomes `experts` plus the guaranteed experts (a stage that builds S anew).
  MOE_ROUTING_HOST_DEVICE constexpr selected_set& operator=(const expert_set& experts) noexcept {
    set_ = experts;
    set_ |= *guaranteed_;
    return *this;
  }
  MOE_ROUTING_HOST_DEVICE constexpr selected_set& operator|=(const expert_set& experts) noexcept {
    set_ |= experts;
    return *this;
  }

  MOE_ROUTING_HOST_DEVICE constexpr bool contains(int expert) const noexcept { return set_.contains(expert); }
  MOE_ROUTING_HOST_DEVICE constexpr int size() const noexcept { return set_.size(); }
  MOE_ROUTING_HOST_DEVICE constexpr bool empty() const noexcept { return set_.empty(); }
  /// Lowest member, or -1 when empty.
  MOE_ROUTING_HOST_DEVICE constexpr int first() const noexcept { return set_.first(); }
  /// Calls `visit(expert)` for every member in increasing order.
  template <class Visitor>
  MOE_ROUTING_HOST_DEVICE constexpr void for_each(Visitor&& visit) const {
    set_.for_each(visit);
  }
  MOE_ROUTING_HOST_DEVICE constexpr std::uint64_t word(int index) const noexcept { return set_.word(index); }
  /// S as a plain set, to read (a copy, a comparison, a summary).
  MOE_ROUTING_HOST_DEVICE constexpr const expert_set& experts() const noexcept { return set_; }
  MOE_ROUTING_HOST_DEVICE constexpr operator const expert_set&() const noexcept { return set_; }

 private:
  expert_set set_;
  const expert_set* guaranteed_;
};

}  // namespace moe_routing
