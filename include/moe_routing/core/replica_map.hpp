#pragma once
/// \file
/// Redundant experts (EPLB): a map from the model's E logical experts to P >= E physical
/// expert slots, laid out as DeepSeek's EPLB, vLLM and SGLang lay it out:
///
///   physical_to_logical  [P]                 the logical expert each slot holds
///   logical_to_physical  [E, max_replicas]   each logical expert's slots, padded with -1
///   replica_counts       [E]                 how many slots each logical expert has
///
/// Slots are spread evenly and contiguously over the G devices (expert-parallel ranks):
/// device g holds slots [g P/G, (g+1) P/G), as vLLM's "local physical experts" are.
///
/// A plan keeps logical ids (what engines capture and what every policy reasons about);
/// `dispatch_to_replicas` then picks, for each assignment, one physical slot of its logical
/// expert, by one of two deterministic rules (`replica_choice`), and counts each device's
/// load as the physical slots some token is dispatched to.

#include <cstdint>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/status.hpp"

namespace moe_routing {

/// How an assignment to a replicated logical expert picks its physical slot.
enum class replica_choice : std::uint8_t {
  /// Replica `row mod replica_count`, the row being the token's position in the batch:
  /// stateless and the same on every backend, but positional (as vLLM's and SGLang's static
  /// dispatch), so inserting rows or permuting requests moves other tokens' replicas.
  token_modulo,
  /// The replica whose device has received the fewest assignments so far in the batch,
  /// assignments taken in row order (token, then slot); ties to the earlier replica in
  /// `logical_to_physical`. Spreads a hot expert's tokens over its devices.
  least_loaded,
};

/// A non-owning view of a logical-to-physical map (see the file comment). Every member is
/// a value or a pointer, so it can be a kernel argument.
struct replica_map {
  const std::int32_t* physical_to_logical = nullptr;  ///< [P]
  const std::int32_t* logical_to_physical = nullptr;  ///< [E, max_replicas], -1 padded
  const std::int32_t* replica_counts = nullptr;       ///< [E]
  int experts = 0;                                    ///< E: logical experts
  int physical_count = 0;                             ///< P: physical slots, E <= P <= max_experts
  int max_replicas = 0;                               ///< the row width of logical_to_physical
  int device_count = 0;                               ///< G: divides P
  replica_choice choice = replica_choice::token_modulo;

  MOE_ROUTING_HOST_DEVICE constexpr int slots_per_device() const noexcept { return physical_count / device_count; }
  MOE_ROUTING_HOST_DEVICE constexpr int device_of_physical(int physical) const noexcept {
    return physical / slots_per_device();
  }
  MOE_ROUTING_HOST_DEVICE constexpr int replicas_of(int logical) const noexcept { return replica_counts[logical]; }
  MOE_ROUTING_HOST_DEVICE constexpr std::int32_t replica(int logical, int r) const noexcept {
    return logical_to_physical[logical * max_replicas + r];
  }
};

/// The checks of a map that read no array: pointers, sizes and the device count. A GPU
/// backend runs these on the host, where the map's arrays are not readable.
constexpr status validate_replica_map_shape(const replica_map& map, int experts) noexcept {
  if (map.physical_to_logical == nullptr)
    return fail(errc::null_pointer, "replicas.physical_to_logical", 0, "must not be null");
  if (map.logical_to_physical == nullptr)
    return fail(errc::null_pointer, "replicas.logical_to_physical", 0, "must not be null");
  if (map.replica_counts == nullptr) return fail(errc::null_pointer, "replicas.replica_counts", 0, "must not be null");
  if (map.experts != experts) {
    return fail(errc::shape_mismatch, "replicas.experts", map.experts, "must equal", "batch.E", experts);
  }
  if (map.physical_count < experts || map.physical_count > max_experts) {
    return fail(errc::shape_mismatch, "replicas.physical_count", map.physical_count,
                "must be at least batch.E and at most max_experts", "max_experts", max_experts);
  }
  if (map.max_replicas < 1 || map.max_replicas > map.physical_count - experts + 1) {
    return fail(errc::shape_mismatch, "replicas.max_replicas", map.max_replicas,
                "must be in [1, physical_count - E + 1]", "replicas.physical_count", map.physical_count);
  }
  if (map.device_count < 1 || map.physical_count % map.device_count != 0) {
    return fail(errc::invalid_input, "replicas.device_count", map.device_count,
                "must be positive and divide the physical slots evenly", "replicas.physical_count", map.physical_count);
  }
  return {};
}

/// What is wrong with one entry of a map's arrays, if anything: the rules
/// `validate_replica_map` runs on the host and the CUDA backend runs on the device (where
/// the host cannot read the arrays), so both refuse the same maps.
enum class replica_fault : std::uint8_t {
  none,
  slot_expert,   ///< physical_to_logical[p] outside [0, E)
  count,         ///< replica_counts[e] outside [1, max_replicas]
  padding,       ///< logical_to_physical[e][r] not -1 past the count
  row_slot,      ///< logical_to_physical[e][r] outside [0, P) within the count
  other_expert,  ///< logical_to_physical[e][r] names a slot physical_to_logical gives another expert
  listed_twice,  ///< logical_to_physical[e][r] repeats an earlier slot of its row
  counts_sum,    ///< the counts do not sum to P (some slot serves no replica)
  first_device,  ///< placement[e] not the device of e's first replica (checked once the map is valid)
};
inline constexpr int replica_fault_count = 9;

/// The parameter a fault names and the rule it breaks, the same words on every backend.
struct replica_fault_text {
  const char* parameter = "";
  const char* requirement = "";
};
MOE_ROUTING_HOST_DEVICE constexpr replica_fault_text describe(replica_fault fault) noexcept {
  switch (fault) {
    case replica_fault::slot_expert:
      return {"replicas.physical_to_logical[p]", "must be in [0, E)"};
    case replica_fault::count:
      return {"replicas.replica_counts[e]", "must be in [1, max_replicas]"};
    case replica_fault::padding:
      return {"replicas.logical_to_physical[e][r]", "must be -1 past the expert's replica count"};
    case replica_fault::row_slot:
      return {"replicas.logical_to_physical[e][r]",
              "must be a physical slot in [0, P) within the expert's replica count"};
    case replica_fault::other_expert:
      return {"replicas.logical_to_physical[e][r]",
              "names a slot holding another expert: physical_to_logical of it is"};
    case replica_fault::listed_twice:
      return {"replicas.logical_to_physical[e][r]", "lists a slot twice for one expert"};
    case replica_fault::counts_sum:
      return {"replicas.replica_counts", "(their sum) must equal the physical slots, each slot serving one replica"};
    case replica_fault::first_device:
      return {"placement[e]", "must be the device of the expert's first replica, with a replica map:"};
    case replica_fault::none:
      break;
  }
  return {};
}

/// Whether slot `p` holds a logical expert: physical_to_logical[p] in [0, E).
MOE_ROUTING_HOST_DEVICE constexpr bool slot_holds_expert(const replica_map& map, int p) noexcept {
  return map.physical_to_logical[p] >= 0 && map.physical_to_logical[p] < map.experts;
}

/// The first fault of logical expert `e`'s count and row (`r`: the row entry at fault),
/// reading only inside the arrays whatever they hold: 1..max_replicas slots, listed first
/// in the row and then -1, each slot in [0, P) holding `e`, none listed twice.
struct replica_row_check {
  replica_fault fault = replica_fault::none;
  int r = 0;
};
MOE_ROUTING_HOST_DEVICE constexpr replica_row_check check_replica_row(const replica_map& map, int e) noexcept {
  const int count = map.replica_counts[e];
  if (count < 1 || count > map.max_replicas) return {replica_fault::count, 0};
  for (int r = 0; r < map.max_replicas; ++r) {
    const std::int32_t physical = map.replica(e, r);
    if (r >= count) {
      if (physical != -1) return {replica_fault::padding, r};
      continue;
    }
    if (physical < 0 || physical >= map.physical_count) return {replica_fault::row_slot, r};
    if (map.physical_to_logical[physical] != e) return {replica_fault::other_expert, r};
    for (int earlier = 0; earlier < r; ++earlier) {
      if (map.replica(e, earlier) == physical) return {replica_fault::listed_twice, r};
    }
  }
  return {};
}

/// Checks a map's shape and its three arrays against each other (`slot_holds_expert`,
/// `check_replica_row`, and the counts summing to P, so every slot is used).
/// O(E max_replicas^2 + P); reads every array.
constexpr status validate_replica_map(const replica_map& map, int experts) noexcept {
  MOE_ROUTING_TRY(validate_replica_map_shape(map, experts));
  for (int p = 0; p < map.physical_count; ++p) {
    if (!slot_holds_expert(map, p)) {
      const replica_fault_text text = describe(replica_fault::slot_expert);
      return fail(errc::invalid_input, text.parameter, map.physical_to_logical[p], text.requirement, "batch.E", experts)
          .at(p);
    }
  }
  int total = 0;
  for (int e = 0; e < experts; ++e) {
    const int count = map.replica_counts[e];
    const replica_row_check check = check_replica_row(map, e);
    const replica_fault_text text = describe(check.fault);
    const std::int32_t physical = map.replica(e, check.r);
    switch (check.fault) {
      case replica_fault::count:
        return fail(errc::invalid_input, text.parameter, count, text.requirement, "replicas.max_replicas",
                    map.max_replicas)
            .at(e);
      case replica_fault::padding:
        return fail(errc::invalid_input, text.parameter, physical, text.requirement, "replicas.replica_counts[e]",
                    count)
            .at(e, check.r);
      case replica_fault::row_slot:
        return fail(errc::invalid_input, text.parameter, physical, text.requirement, "replicas.physical_count",
                    map.physical_count)
            .at(e, check.r);
      case replica_fault::other_expert:
        return fail(errc::invalid_input, text.parameter, physical, text.requirement, "replicas.physical_to_logical[p]",
                    map.physical_to_logical[physical])
            .at(e, check.r);
      case replica_fault::listed_twice:
        return fail(errc::invalid_input, text.parameter, physical, text.requirement).at(e, check.r);
      default:
        break;
    }
    total += count;
  }
  if (total != map.physical_count) {
    const replica_fault_text text = describe(replica_fault::counts_sum);
    return fail(errc::invalid_input, text.parameter, total, text.requirement, "replicas.physical_count",
                map.physical_count);
  }
  return {};
}

/// Whether `placement[e]` is the device of logical expert `e`'s first replica, as a batch
/// with a replica map must place it (`replica_fault::first_device`). Reads the map: call it
/// on a valid map only.
MOE_ROUTING_HOST_DEVICE constexpr bool placed_on_first_replica(const replica_map& map, const std::int32_t* placement,
                                                               int e) noexcept {
  return placement[e] == map.device_of_physical(map.replica(e, 0));
}

/// The physical slot of one assignment by the stateless rule (`token_modulo`).
MOE_ROUTING_HOST_DEVICE constexpr std::int32_t modulo_replica(const replica_map& map, int logical, int token) noexcept {
  return map.replica(logical, token % map.replicas_of(logical));
}

/// The replica of `logical` whose device has the fewest assignments in `device_tokens`
/// (ties to the earlier replica), shared by every backend (`least_loaded`).
MOE_ROUTING_HOST_DEVICE constexpr std::int32_t least_loaded_replica(const replica_map& map, int logical,
                                                                    const std::int32_t* device_tokens) noexcept {
  std::int32_t best = map.replica(logical, 0);
  for (int r = 1; r < map.replicas_of(logical); ++r) {
    const std::int32_t candidate = map.replica(logical, r);
    if (device_tokens[map.device_of_physical(candidate)] < device_tokens[map.device_of_physical(best)]) {
      best = candidate;
    }
  }
  return best;
}

/// Dispatches every assignment of a plan's logical `ids` [n, k] (`counts` [n] of each row
/// used) to a physical slot of `map`, into `physical_ids` [n, k] (null to count loads
/// only; padding as the comment inside says: a sentinel is copied, so pick one that names
/// no physical slot, such as P for vLLM's convention), and counts each device's load: the physical slots at least one
/// assignment goes to, into `device_loads` [G]. `device_tokens` [G] is scratch (the
/// assignments per device, used by `least_loaded`); `used` is scratch too. Returns the
/// largest device load. No allocation; O(n k max_replicas + P).
MOE_ROUTING_HOST_DEVICE constexpr int dispatch_to_replicas(const replica_map& map, const std::int32_t* ids,
                                                           const std::int32_t* counts, int tokens, int top_k,
                                                           std::int32_t* physical_ids, std::int32_t* device_loads,
                                                           std::int32_t* device_tokens, expert_set& used) noexcept {
  for (int g = 0; g < map.device_count; ++g) device_loads[g] = device_tokens[g] = 0;
  used = expert_set{};
  for (int i = 0; i < tokens; ++i) {
    for (int j = 0; j < top_k; ++j) {
      const int at = i * top_k + j;
      if (j >= counts[i]) {
        // Padding adds no load: a repeated expert (repeat padding) goes where the row's
        // first assignment went, or to its first replica in an empty row; a sentinel stays.
        if (physical_ids == nullptr) continue;
        const std::int32_t id = ids[at];
        const bool expert = id >= 0 && id < map.experts;
        physical_ids[at] = !expert ? id : counts[i] > 0 ? physical_ids[i * top_k] : map.replica(id, 0);
        continue;
      }
      const int logical = ids[at];
      const std::int32_t physical = map.choice == replica_choice::token_modulo
                                        ? modulo_replica(map, logical, i)
                                        : least_loaded_replica(map, logical, device_tokens);
      if (physical_ids != nullptr) physical_ids[at] = physical;
      const int device = map.device_of_physical(physical);
      ++device_tokens[device];
      if (!used.contains(physical)) {
        used.insert(physical);
        ++device_loads[device];
      }
    }
  }
  int most = 0;
  for (int g = 0; g < map.device_count; ++g) most = device_loads[g] > most ? device_loads[g] : most;
  return most;
}

/// Calls `visit(device)` once per physical slot of `expert`: each replica's device with a
/// replica map, else the batch's placement entry. How ep_fill and ep_level count a selected
/// expert's load: every replica of it is loaded (its assignments may go to any of them).
template <class Batch, class Visit>
MOE_ROUTING_HOST_DEVICE constexpr void for_each_device_of(const Batch& batch, int expert, Visit&& visit) {
  if (batch.replicas.physical_to_logical == nullptr) {
    visit(static_cast<int>(batch.placement[expert]));
    return;
  }
  for (int r = 0; r < batch.replicas.replicas_of(expert); ++r) {
    visit(batch.replicas.device_of_physical(batch.replicas.replica(expert, r)));
  }
}

}  // namespace moe_routing
