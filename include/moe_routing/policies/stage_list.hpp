#pragma once
/// \file
/// A trivially copyable heterogeneous list of stages (std::tuple is not trivially
/// copyable, and a policy must be passable to a kernel by value).

#include <type_traits>
#include <utility>

namespace moe_routing {

template <class... Stages>
struct stage_list;

template <>
struct stage_list<> {
  template <class Visitor>
  constexpr void for_each(Visitor&&) const {}
};

template <class Head, class... Tail>
struct stage_list<Head, Tail...> {
  Head head;
  stage_list<Tail...> tail;

  template <class Visitor>
  constexpr void for_each(Visitor&& visit) const {
    visit(head);
    tail.for_each(visit);
  }
};

constexpr stage_list<> concat(const stage_list<>&, const stage_list<>&) { return {}; }

template <class... Right>
constexpr stage_list<Right...> concat(const stage_list<>&, const stage_list<Right...>& right) {
  return right;
}

template <class Head, class... Tail, class... Right>
constexpr stage_list<Head, Tail..., Right...> concat(const stage_list<Head, Tail...>& left,
                                                     const stage_list<Right...>& right) {
  return {left.head, concat(left.tail, right)};
}

}  // namespace moe_routing
