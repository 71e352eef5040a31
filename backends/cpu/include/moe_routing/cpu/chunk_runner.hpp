#pragma once
/// \file
/// How the CPU backend splits a routing call's work: into chunks of `tokens_per_chunk`
/// tokens, each with its own scratch, run under a standard execution policy. Work is split
/// by token count alone, never by thread count, so results do not depend on the threads.

#include <algorithm>
#include <vector>

#include "moe_routing/cpu/workspace.hpp"

namespace moe_routing::cpu {

template <class ExecutionPolicy>
class chunk_runner {
 public:
  /// `chunk_index` holds 0..chunks-1 (the workspace's), the range the parallel loops iterate.
  chunk_runner(ExecutionPolicy exec, const std::vector<int>& chunk_index, int tokens) noexcept
      : exec_(exec), chunk_index_(chunk_index), chunk_count_((tokens + tokens_per_chunk - 1) / tokens_per_chunk) {}

  /// Chunks of the call's tokens, and so the scratch rows available to parallel work.
  int chunk_count() const noexcept { return chunk_count_; }

  /// Runs `work(chunk)` for chunks 0..count-1 under the execution policy; a single chunk
  /// runs inline, as handing one item to the thread pool costs more than decode-sized work.
  template <class Work>
  void for_each_chunk(int count, Work work) const {
    if (count == 1) {
      work(0);
      return;
    }
    std::for_each(exec_, chunk_index_.begin(), chunk_index_.begin() + count, work);
  }

  /// Runs `work(item, chunk)` for items 0..count-1 split into at most chunk_count()
  /// contiguous blocks, block b on scratch `chunk` = b. Deterministic for any threads.
  template <class Work>
  void parallel_blocks(int count, Work work) const {
    const int blocks = std::min(count, chunk_count_);
    if (blocks <= 0) return;
    for_each_chunk(blocks, [&](int block) {
      const auto lo = static_cast<long long>(count) * block / blocks;
      const auto hi = static_cast<long long>(count) * (block + 1) / blocks;
      for (auto item = lo; item < hi; ++item) work(static_cast<int>(item), block);
    });
  }

 private:
  ExecutionPolicy exec_;
  const std::vector<int>& chunk_index_;
  int chunk_count_;
};

}  // namespace moe_routing::cpu
