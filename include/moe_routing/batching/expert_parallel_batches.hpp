#pragma once
/// \file
/// Batch forming for expert parallelism: with experts placed on devices, a layer takes as
/// long as its busiest device, so a batch costs the sum over layers of its busiest device's
/// distinct experts, not its total. `ep_batch_union` keeps that cost as a batch grows;
/// `greedy_ep_batches` is the oracle's greedy with it (each batch starts from the oldest
/// request left and takes the request that raises the cost least, the oldest on ties).

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "moe_routing/batching/form_batches.hpp"
#include "moe_routing/batching/request_signatures.hpp"
#include "moe_routing/core/error.hpp"

namespace moe_routing::batching {

/// Which device holds each expert, as one E-bit mask per device.
class device_masks {
 public:
  /// `placement[e]` in [0, devices) for every expert of `signatures`; throws naming the entry otherwise.
  device_masks(const request_signatures& signatures, const std::vector<std::int32_t>& placement, int devices)
      : devices_(devices),
        words_(signatures.words()),
        masks_(static_cast<std::size_t>(std::max(devices, 0)) * static_cast<std::size_t>(words_), 0) {
    throw_if_failed(
        check_range(errc::invalid_parameter, "devices", devices, 1, signatures.experts(), "must be in [1, E]", "E"));
    if (static_cast<int>(placement.size()) != signatures.experts()) {
      throw routing_error(fail(errc::shape_mismatch, "placement size", static_cast<double>(placement.size()),
                               "must equal", "E", signatures.experts()));
    }
    for (int e = 0; e < signatures.experts(); ++e) {
      const int device = placement[static_cast<std::size_t>(e)];
      if (device < 0 || device >= devices) {
        throw routing_error(
            fail(errc::invalid_input, "placement[e]", device, "must be in [0, devices)", "devices", devices).at(e));
      }
      masks_[static_cast<std::size_t>(device) * words_ + static_cast<std::size_t>(e >> 6)] |= std::uint64_t{1}
                                                                                              << (e & 63);
    }
  }
  int devices() const noexcept { return devices_; }
  int words() const noexcept { return words_; }
  /// Word `w` of device `device`'s mask.
  std::uint64_t word(int device, int w) const noexcept {
    return masks_[static_cast<std::size_t>(device) * words_ + static_cast<std::size_t>(w)];
  }

 private:
  int devices_, words_;
  std::vector<std::uint64_t> masks_;
};

/// A batch's union per layer with its busiest-device cost: the sum over layers of the
/// largest count of distinct experts on one device.
class ep_batch_union {
 public:
  ep_batch_union(const request_signatures& signatures, const device_masks& masks)
      : signatures_(&signatures),
        masks_(&masks),
        words_(static_cast<std::size_t>(signatures.layers()) * masks.words()),
        loads_(static_cast<std::size_t>(signatures.layers()) * masks.devices(), 0) {}

  void add(int request) noexcept {
    const auto bits = signatures_->bits(request);
    for (int layer = 0; layer < signatures_->layers(); ++layer) {
      for (int device = 0; device < masks_->devices(); ++device) load(layer, device) += new_on(bits, layer, device);
      for (int w = 0; w < masks_->words(); ++w) words_[index(layer, w)] |= bits[index(layer, w)];
    }
  }
  /// How much adding `request` raises the cost.
  int added_cost(int request) const noexcept {
    const auto bits = signatures_->bits(request);
    int added = 0;
    for (int layer = 0; layer < signatures_->layers(); ++layer) {
      int before = 0, after = 0;
      for (int device = 0; device < masks_->devices(); ++device) {
        const int current = loads_[static_cast<std::size_t>(layer) * masks_->devices() + device];
        before = std::max(before, current);
        after = std::max(after, current + new_on(bits, layer, device));
      }
      added += after - before;
    }
    return added;
  }
  /// The sum over layers of the busiest device's distinct experts.
  long long cost() const noexcept {
    long long total = 0;
    for (int layer = 0; layer < signatures_->layers(); ++layer) {
      int busiest = 0;
      for (int device = 0; device < masks_->devices(); ++device) {
        busiest = std::max(busiest, loads_[static_cast<std::size_t>(layer) * masks_->devices() + device]);
      }
      total += busiest;
    }
    return total;
  }
  void clear() noexcept {
    std::fill(words_.begin(), words_.end(), 0);
    std::fill(loads_.begin(), loads_.end(), 0);
  }

 private:
  std::size_t index(int layer, int w) const noexcept {
    return static_cast<std::size_t>(layer) * masks_->words() + static_cast<std::size_t>(w);
  }
  int& load(int layer, int device) noexcept {
    return loads_[static_cast<std::size_t>(layer) * masks_->devices() + device];
  }
  /// The request's experts at `layer` on `device` that the union lacks.
  int new_on(std::span<const std::uint64_t> bits, int layer, int device) const noexcept {
    int added = 0;
    for (int w = 0; w < masks_->words(); ++w) {
      added += std::popcount(bits[index(layer, w)] & ~words_[index(layer, w)] & masks_->word(device, w));
    }
    return added;
  }

  const request_signatures* signatures_;
  const device_masks* masks_;
  std::vector<std::uint64_t> words_;
  std::vector<int> loads_;  ///< [layer, device] distinct experts of the union
};

/// Each batch's busiest-device cost, summed over batches.
inline long long busiest_device_loads(const request_signatures& signatures, const device_masks& masks,
                                      const batch_list& batches) {
  ep_batch_union batch(signatures, masks);
  long long total = 0;
  for (const auto& members : batches) {
    batch.clear();
    for (const int request : members) batch.add(request);
    total += batch.cost();
  }
  return total;
}

/// The greedy oracle for expert parallelism (see the file comment). O(N^2 / B x L x G x E / 64).
inline batch_list greedy_ep_batches(const request_signatures& signatures, const device_masks& masks, int batch_size) {
  ep_batch_union batch(signatures, masks);
  return detail::greedy_by_cost(detail::all_requests(signatures.requests()), batch_size, batch,
                                [](const ep_batch_union& b, int request) { return b.added_cost(request); });
}

}  // namespace moe_routing::batching
