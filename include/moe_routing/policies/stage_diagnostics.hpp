#pragma once
/// \file
/// One sentence for each common mistake in writing a stage, said where `|` meets it: no
/// `role` (or one that is not a `static constexpr stage_role`), the assignment role on a
/// stage other than refine, and a member that is not trivially copyable (a `std::vector`).
/// Without them the compiler lists every `operator|` it tried and ends with "no operand of
/// the disjunction is satisfied". Writing `static_assert(moe_routing::set_stage<my_stage>);`
/// after a stage checks the same where the stage is defined (docs/custom_stages.md).

#include <concepts>
#include <type_traits>

#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

/// What `|` returns once it has reported a mistake: it composes with anything and no
/// backend routes it, so the one sentence is the whole diagnostic.
struct rejected_policy {};

namespace detail {
template <class>
inline constexpr bool reported = false;  // a static_assert condition that depends on the type
}  // namespace detail

/// Does not compile, with the sentence that says why `Stage` is not a stage.
template <class Stage>
constexpr void explain_not_a_stage() {
  if constexpr (!declares_stage_role<Stage>) {
    static_assert(detail::reported<Stage>,
                  "A stage must declare static constexpr moe_routing::stage_role role = "
                  "moe_routing::stage_role::set; (a stage written outside the library builds the selected set S).");
  } else if constexpr (Stage::role == stage_role::assignment) {
    static_assert(detail::reported<Stage>,
                  "Only the library's refine can be a policy's assignment stage (role = stage_role::assignment, "
                  "always last); a stage written outside the library builds the selected set S, so it declares "
                  "static constexpr moe_routing::stage_role role = moe_routing::stage_role::set;.");
  } else if constexpr (!std::is_trivially_copyable_v<Stage>) {
    static_assert(detail::reported<Stage>,
                  "A stage must be trivially copyable (it is passed by value, also as a GPU kernel parameter): "
                  "hold numbers, std::array or moe_routing::expert_set, not std::vector, std::string or another "
                  "member that owns memory.");
  } else {
    static_assert(detail::reported<Stage>, "This type is not a stage (docs/custom_stages.md says what one is).");
  }
}

}  // namespace moe_routing
