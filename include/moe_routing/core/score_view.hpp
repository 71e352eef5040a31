#pragma once
/// \file
/// A non-owning `n x E` view of router output with a row stride, read as float32
/// through `to_float` so that float16 and bfloat16 matrices are never copied.

#include <cstddef>
#include <type_traits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/half.hpp"

namespace moe_routing {

template <score_element Element>
struct score_view {
  using element_type = Element;

  const Element* data = nullptr;
  int rows = 0;                   ///< n, tokens
  int cols = 0;                   ///< E, experts
  std::ptrdiff_t row_stride = 0;  ///< elements between row starts; >= cols

  MOE_ROUTING_HOST_DEVICE constexpr const Element* row(int token) const noexcept {
    return data + static_cast<std::ptrdiff_t>(token) * row_stride;
  }
  MOE_ROUTING_HOST_DEVICE constexpr float operator()(int token, int expert) const noexcept {
    return to_float(row(token)[expert]);
  }
};

/// A dense row-major view (stride = E).
template <score_element Element>
constexpr score_view<Element> make_score_view(const Element* data, int rows, int cols,
                                              std::ptrdiff_t row_stride = 0) noexcept {
  return {data, rows, cols, row_stride == 0 ? cols : row_stride};
}

static_assert(std::is_trivially_copyable_v<score_view<float>>);
static_assert(std::is_trivially_copyable_v<score_view<bfloat16>>);

}  // namespace moe_routing
