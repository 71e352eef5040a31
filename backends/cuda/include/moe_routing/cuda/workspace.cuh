#pragma once
/// \file
/// The CUDA backend's workspace: one caller-owned device buffer, sized once by
/// `workspace_bytes(shape)`, carved into the arrays a routing call needs. A routing call
/// allocates nothing and never synchronises with the host, so it can be captured in a
/// CUDA graph.
///
/// \code
///   const std::size_t bytes = moe_routing::cuda::workspace_bytes({.max_tokens = 256, .experts = 128, .top_k = 8});
///   void* buffer;  cudaMalloc(&buffer, bytes);   // once
///   moe_routing::cuda::workspace ws(buffer, bytes, {256, 128, 8});
/// \endcode

#include <cstddef>
#include <cstdint>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/core/workspace_shape.hpp"

namespace moe_routing::cuda {

/// Warps that each scan one request's column mass in `per_request` (its scratch rows).
inline constexpr int request_warps = 32;
/// 32-bit words of a device expert bitset (atomicOr works on 32-bit words).
inline constexpr int set_words = max_experts / 32;

/// Device arrays of one routing call. The `zeroed` block is cleared by one memset at
/// the start of every call; everything else is written before it is read.
struct device_workspace {
  // per token
  std::int32_t* top_ids = nullptr;       ///< [n, k] topk_i in rank order
  float* top_p = nullptr;                ///< [n, k] their p
  float* top_gate = nullptr;             ///< [n, k] their sparse top-k gates
  row_stats* stats = nullptr;            ///< [n]
  std::int32_t* depth = nullptr;         ///< [n] guaranteed ranks
  std::int32_t* token_order = nullptr;   ///< [n] capacity's seat order of one slot round
  std::int64_t* request_mass = nullptr;  ///< [request_warps, E] per_request scratch
  // zeroed per call
  std::int64_t* sparse_mass = nullptr;    ///< [E]
  std::int64_t* dense_mass = nullptr;     ///< [E]
  std::int32_t* votes = nullptr;          ///< [E]
  std::int32_t* expert_tokens = nullptr;  ///< [E] used when the plan has none
  std::uint32_t* selected = nullptr;      ///< [set_words] S
  std::uint32_t* guaranteed = nullptr;    ///< [set_words]
  std::uint32_t* active = nullptr;        ///< [set_words]
  std::int32_t* error = nullptr;          ///< [1] first device-side input error (errc), 0 = none
  void* zeroed_begin = nullptr;
  std::size_t zeroed_bytes = 0;
};

namespace detail {

/// Offsets of every array for a shape, 256-byte aligned; `total` is the buffer size.
struct workspace_layout {
  std::size_t top_ids, top_p, top_gate, stats, depth, token_order, request_mass;
  std::size_t zeroed, sparse_mass, dense_mass, votes, expert_tokens, selected, guaranteed, active, error;
  std::size_t total;

  explicit constexpr workspace_layout(const workspace_shape& shape) noexcept {
    const auto n = static_cast<std::size_t>(shape.max_tokens > 0 ? shape.max_tokens : 1);
    const auto e = static_cast<std::size_t>(shape.experts);
    const auto k = static_cast<std::size_t>(shape.top_k);
    std::size_t at = 0;
    const auto take = [&at](std::size_t bytes) {
      const std::size_t offset = at;
      at = (at + bytes + 255) / 256 * 256;
      return offset;
    };
    top_ids = take(n * k * sizeof(std::int32_t));
    top_p = take(n * k * sizeof(float));
    top_gate = take(n * k * sizeof(float));
    stats = take(n * sizeof(row_stats));
    depth = take(n * sizeof(std::int32_t));
    token_order = take(n * sizeof(std::int32_t));
    request_mass = take(request_warps * e * sizeof(std::int64_t));
    zeroed = at;
    sparse_mass = take(e * sizeof(std::int64_t));
    dense_mass = take(e * sizeof(std::int64_t));
    votes = take(e * sizeof(std::int32_t));
    expert_tokens = take(e * sizeof(std::int32_t));
    selected = take(set_words * sizeof(std::uint32_t));
    guaranteed = take(set_words * sizeof(std::uint32_t));
    active = take(set_words * sizeof(std::uint32_t));
    error = take(sizeof(std::int32_t));
    total = at;
  }
};

}  // namespace detail

/// Bytes of device memory a workspace for `shape` needs.
constexpr std::size_t workspace_bytes(const workspace_shape& shape) noexcept {
  return detail::workspace_layout(shape).total;
}

/// The segmented-sort path's arrays: every row's E rank keys before and after the sort,
/// and CUB's scratch.
struct sort_arrays {
  rank_key* keys_in = nullptr;
  rank_key* keys_out = nullptr;
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;
};

/// Bytes of one n x E key array of the segmented-sort path, 256-byte aligned.
constexpr std::size_t sort_key_bytes(const workspace_shape& shape) noexcept {
  const auto n = static_cast<std::size_t>(shape.max_tokens > 0 ? shape.max_tokens : 1);
  return (n * static_cast<std::size_t>(shape.experts) * sizeof(rank_key) + 255) / 256 * 256;
}

/// A view of a caller-owned device buffer as the arrays of `device_workspace`. Holds
/// no memory of its own; the buffer must outlive it and be at least
/// `workspace_bytes(shape)` long (checked by `route`).
class workspace {
 public:
  workspace() = default;
  workspace(void* buffer, std::size_t bytes, const workspace_shape& shape) noexcept
      : shape_(shape), bytes_(bytes), buffer_(static_cast<unsigned char*>(buffer)) {
    const detail::workspace_layout layout(shape);
    const auto at = [this](std::size_t offset) { return buffer_ + offset; };
    arrays_.top_ids = reinterpret_cast<std::int32_t*>(at(layout.top_ids));
    arrays_.top_p = reinterpret_cast<float*>(at(layout.top_p));
    arrays_.top_gate = reinterpret_cast<float*>(at(layout.top_gate));
    arrays_.stats = reinterpret_cast<row_stats*>(at(layout.stats));
    arrays_.depth = reinterpret_cast<std::int32_t*>(at(layout.depth));
    arrays_.token_order = reinterpret_cast<std::int32_t*>(at(layout.token_order));
    arrays_.request_mass = reinterpret_cast<std::int64_t*>(at(layout.request_mass));
    arrays_.sparse_mass = reinterpret_cast<std::int64_t*>(at(layout.sparse_mass));
    arrays_.dense_mass = reinterpret_cast<std::int64_t*>(at(layout.dense_mass));
    arrays_.votes = reinterpret_cast<std::int32_t*>(at(layout.votes));
    arrays_.expert_tokens = reinterpret_cast<std::int32_t*>(at(layout.expert_tokens));
    arrays_.selected = reinterpret_cast<std::uint32_t*>(at(layout.selected));
    arrays_.guaranteed = reinterpret_cast<std::uint32_t*>(at(layout.guaranteed));
    arrays_.active = reinterpret_cast<std::uint32_t*>(at(layout.active));
    arrays_.error = reinterpret_cast<std::int32_t*>(at(layout.error));
    arrays_.zeroed_begin = at(layout.zeroed);
    arrays_.zeroed_bytes = layout.total - layout.zeroed;
  }

  /// Gives the segmented-sort path (`route_path::segmented_sort`) its own buffer of
  /// `segmented_sort_bytes(shape)` bytes; the other paths never need it.
  void set_sort_buffer(void* buffer, std::size_t bytes) noexcept {
    auto* base = static_cast<unsigned char*>(buffer);
    const std::size_t keys = sort_key_bytes(shape_);
    sort_bytes_ = bytes;
    if (buffer == nullptr || bytes < 2 * keys) {
      sort_ = {};
      return;
    }
    sort_ = {reinterpret_cast<rank_key*>(base), reinterpret_cast<rank_key*>(base + keys), base + 2 * keys,
             bytes - 2 * keys};
  }

  const workspace_shape& shape() const noexcept { return shape_; }
  std::size_t bytes() const noexcept { return bytes_; }
  const sort_arrays& sort() const noexcept { return sort_; }
  std::size_t sort_bytes() const noexcept { return sort_bytes_; }
  bool has_buffer() const noexcept { return buffer_ != nullptr; }
  const device_workspace& arrays() const noexcept { return arrays_; }

 private:
  workspace_shape shape_{};
  std::size_t bytes_ = 0;
  unsigned char* buffer_ = nullptr;
  device_workspace arrays_{};
  sort_arrays sort_{};
  std::size_t sort_bytes_ = 0;
};

}  // namespace moe_routing::cuda
