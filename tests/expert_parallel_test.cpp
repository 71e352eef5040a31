// Expert parallelism at scale on the CPU backend: the ep_level bodies
// (tests/bodies/expert_parallel.hpp, also run on CUDA by tests/cuda/backend_bodies_test.cu)
// and its text form.

#include <algorithm>
#include <numeric>
#include <string>

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "backends/cpu_backend_runner.hpp"
#include "bodies/expert_parallel.hpp"

MOE_ROUTING_EXPERT_PARALLEL_TESTS(test::cpu_backend_runner)

namespace {

namespace mr = moe_routing;

std::string error_of(const std::string& text) { return mr::to_string(mr::parse_policy(text).outcome); }

TEST_CASE("ep_level parses with no parameter or a gate, and needs a placement") {
  const mr::runtime_policy plain = mr::parse_policy_or_throw("prune(k0=1) | ep_level() | refine(k=8)");
  REQUIRE(plain.set_stage_count == 2);
  CHECK(plain.set_stages[1].get<mr::ep_level>().gate == mr::column_mass::sparse);
  const mr::runtime_policy dense =
      mr::parse_policy_or_throw("prune(k0=1)|ep_fill(m_g=2)|ep_level(gate=dense)|refine(k=8)");
  REQUIRE(dense.set_stage_count == 3);
  CHECK(dense.set_stages[2].get<mr::ep_level>().gate == mr::column_mass::dense);
  CHECK(error_of("prune(k0=1) | ep_level(m_g=2) | refine(k=8)").find("expected an argument this stage") !=
        std::string::npos);  // it takes no m_g
  // It cannot open a policy: on an empty S the busiest device holds nothing.
  CHECK(!mr::parse_policy("ep_level() | refine(k=8)").outcome.ok());
  CHECK(mr::to_string(mr::bind_policy(plain, {64, 8, false}))
            .find("invalid parameter: ep_level: needs an expert placement") != std::string::npos);
  CHECK(mr::to_string(mr::bind_policy(plain, {64, 8, false})).find("needs an expert placement") != std::string::npos);
  CHECK(mr::bind_policy(plain, {64, 8, true}).ok());
}

}  // namespace

// ---- redundant experts: the replica map and the dispatch of assignments to replicas ----

#include <moe_routing/core/replica_map.hpp>

#include <random>
#include <set>
#include <vector>

namespace {

/// An owned replica map: physical_to_logical given, the rest derived (row order = slot order).
struct owned_map {
  std::vector<std::int32_t> p2l, l2p, counts;
  int experts = 0, width = 1, devices = 1;
  owned_map(std::vector<std::int32_t> physical_to_logical, int E, int G)
      : p2l(std::move(physical_to_logical)), experts(E), devices(G) {
    counts.assign(static_cast<std::size_t>(E), 0);
    for (const auto e : p2l) ++counts[static_cast<std::size_t>(e)];
    for (const auto c : counts) width = std::max(width, static_cast<int>(c));
    l2p.assign(static_cast<std::size_t>(E) * width, -1);
    std::vector<int> seen(static_cast<std::size_t>(E), 0);
    for (int p = 0; p < static_cast<int>(p2l.size()); ++p) {
      const int e = p2l[static_cast<std::size_t>(p)];
      l2p[static_cast<std::size_t>(e) * width + seen[static_cast<std::size_t>(e)]++] = p;
    }
  }
  mr::replica_map view(mr::replica_choice choice = mr::replica_choice::token_modulo) const {
    return {p2l.data(), l2p.data(), counts.data(), experts, static_cast<int>(p2l.size()), width, devices, choice};
  }
};

/// E = 4 over P = 6 slots on G = 3 devices: e0 in slots 0 and 3, e1 in 1 and 5, e2 in 2,
/// e3 in 4.
owned_map small_map() { return owned_map({0, 1, 2, 0, 3, 1}, 4, 3); }

std::string error_of_map(const owned_map& m, int experts = 4) {
  return mr::to_string(mr::validate_replica_map(m.view(), experts));
}

}  // namespace

TEST_CASE("replica map: a well-formed map passes, and each fault is named with its value") {
  CHECK(error_of_map(small_map()) == "ok");
  owned_map m = small_map();
  m.p2l[4] = 7;
  CHECK(error_of_map(m).find("replicas.physical_to_logical[4] = 7: must be in [0, E)") != std::string::npos);
  m = small_map();
  m.l2p[1] = 9;  // e0's second slot out of range
  CHECK(error_of_map(m).find("replicas.logical_to_physical[0][1] = 9") != std::string::npos);
  m = small_map();
  m.l2p[1] = 1;  // slot 1 holds e1
  CHECK(error_of_map(m) ==
        "invalid input: replicas.logical_to_physical[0][1] = 1: names a slot holding another expert: "
        "physical_to_logical of it is replicas.physical_to_logical[p] = 1");
  m = small_map();
  m.l2p[1] = 0;  // slot 0 twice
  CHECK(error_of_map(m) == "invalid input: replicas.logical_to_physical[0][1] = 0: lists a slot twice for one expert");
  m = small_map();
  m.l2p[5] = 4;  // e2 has one replica: its padding must stay -1
  CHECK(error_of_map(m) ==
        "invalid input: replicas.logical_to_physical[2][1] = 4: must be -1 past the expert's replica count "
        "replicas.replica_counts[2] = 1");
  m = small_map();
  m.l2p[1] = -1;  // -1 inside e0's two replicas
  CHECK(error_of_map(m).find("replicas.logical_to_physical[0][1] = -1: must be a physical slot") != std::string::npos);
  m = small_map();
  m.counts[0] = 1;  // e0 listed with one replica: slot 3 then serves nobody
  CHECK(error_of_map(m).find("must be -1 past the expert's replica count") != std::string::npos);
  m = small_map();
  m.counts[2] = 0;
  CHECK(error_of_map(m).find("replicas.replica_counts[2] = 0: must be in [1, max_replicas]") != std::string::npos);
  m = small_map();
  m.devices = 4;
  CHECK(error_of_map(m).find("replicas.device_count = 4: must be positive and divide") != std::string::npos);
  CHECK(error_of_map(small_map(), 5).find("replicas.experts = 4: must equal batch.E = 5") != std::string::npos);
  m = small_map();
  mr::replica_map v = m.view();
  v.replica_counts = nullptr;
  CHECK(mr::to_string(mr::validate_replica_map(v, 4)).find("replicas.replica_counts") != std::string::npos);
  // Counts that do not add up to P: a slot held by an expert whose row omits it.
  owned_map odd({0, 1, 2, 3, 0, 0}, 4, 3);
  odd.counts[0] = 2;
  odd.l2p[static_cast<std::size_t>(0) * odd.width + 2] = -1;
  CHECK(error_of_map(odd).find("replicas.replica_counts = 5: (their sum) must equal the physical slots") !=
        std::string::npos);
}

TEST_CASE("replica map: the per-entry rules the CUDA backend runs on the device catch each fault") {
  // slot_holds_expert and check_replica_row are what validate_replica_map and the device
  // check (route_kernels.cuh, replica_map_fault) both run; describe() their shared words.
  const auto row_fault = [](const owned_map& m, int e) { return mr::check_replica_row(m.view(), e); };
  owned_map m = small_map();
  for (int p = 0; p < 6; ++p) CHECK(mr::slot_holds_expert(m.view(), p));
  for (int e = 0; e < 4; ++e) CHECK(row_fault(m, e).fault == mr::replica_fault::none);
  m.p2l[4] = 7;
  CHECK_FALSE(mr::slot_holds_expert(m.view(), 4));
  m.p2l[4] = -1;
  CHECK_FALSE(mr::slot_holds_expert(m.view(), 4));
  m = small_map();
  m.counts[2] = 3;  // above max_replicas = 2
  CHECK(row_fault(m, 2).fault == mr::replica_fault::count);
  m = small_map();
  m.l2p[5] = 4;
  CHECK(row_fault(m, 2).fault == mr::replica_fault::padding);
  CHECK(row_fault(m, 2).r == 1);
  m = small_map();
  m.l2p[1] = 6;
  CHECK(row_fault(m, 0).fault == mr::replica_fault::row_slot);
  m = small_map();
  m.l2p[1] = 1;
  CHECK(row_fault(m, 0).fault == mr::replica_fault::other_expert);
  m = small_map();
  m.l2p[1] = 0;
  CHECK(row_fault(m, 0).fault == mr::replica_fault::listed_twice);
  CHECK(std::string(mr::describe(mr::replica_fault::listed_twice).parameter) == "replicas.logical_to_physical[e][r]");
  CHECK(std::string(mr::describe(mr::replica_fault::counts_sum).parameter) == "replicas.replica_counts");
  CHECK(std::string(mr::describe(mr::replica_fault::slot_expert).requirement) == "must be in [0, E)");
  // The placement against the map (validate_batch's last rule, the device's first_device).
  m = small_map();
  const std::int32_t placed[] = {0, 0, 1, 2}, misplaced[] = {0, 1, 1, 2};
  for (int e = 0; e < 4; ++e) CHECK(mr::placed_on_first_replica(m.view(), placed, e));
  CHECK_FALSE(mr::placed_on_first_replica(m.view(), misplaced, 1));
  CHECK(std::string(mr::describe(mr::replica_fault::first_device).parameter) == "placement[e]");
}

namespace {

/// The dispatch from its definition: per assignment in row order, the replica by rule;
/// device loads = distinct slots used per device.
struct naive_dispatch {
  std::vector<std::int32_t> physical;
  std::vector<int> loads;
};
naive_dispatch dispatch_by_hand(const owned_map& m, const std::vector<std::int32_t>& ids,
                                const std::vector<std::int32_t>& counts, int n, int k, bool least_loaded) {
  const int per_device = static_cast<int>(m.p2l.size()) / m.devices;
  naive_dispatch out{ids, std::vector<int>(static_cast<std::size_t>(m.devices), 0)};
  std::vector<int> tokens_on(static_cast<std::size_t>(m.devices), 0);
  std::set<int> used;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < counts[static_cast<std::size_t>(i)]; ++j) {
      const int e = ids[static_cast<std::size_t>(i) * k + j];
      std::vector<int> replicas;
      for (int p = 0; p < static_cast<int>(m.p2l.size()); ++p)
        if (m.p2l[static_cast<std::size_t>(p)] == e) replicas.push_back(p);
      int chosen = replicas[static_cast<std::size_t>(i) % replicas.size()];
      if (least_loaded) {
        chosen = replicas[0];
        for (const int p : replicas)
          if (tokens_on[static_cast<std::size_t>(p / per_device)] <
              tokens_on[static_cast<std::size_t>(chosen / per_device)])
            chosen = p;
      }
      out.physical[static_cast<std::size_t>(i) * k + j] = chosen;
      ++tokens_on[static_cast<std::size_t>(chosen / per_device)];
      used.insert(chosen);
    }
  }
  for (const int p : used) ++out.loads[static_cast<std::size_t>(p / per_device)];
  return out;
}

}  // namespace

TEST_CASE("replica dispatch: physical ids map back, modulo and least-loaded equal a naive reference") {
  std::mt19937 rng(8080);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    const int E = uniform(2, 64), G = uniform(1, 8);
    int P = E + uniform(0, 24);
    P += (G - P % G) % G;
    // Every expert once, the rest random, shuffled over the slots (slot order = row order).
    std::vector<std::int32_t> p2l;
    for (int e = 0; e < E; ++e) p2l.push_back(e);
    while (static_cast<int>(p2l.size()) < P) p2l.push_back(uniform(0, E - 1));
    std::shuffle(p2l.begin(), p2l.end(), rng);
    const owned_map m(p2l, E, G);
    REQUIRE(error_of_map(m, E) == "ok");
    const int n = uniform(0, 40), k = uniform(1, std::min(E, 8));
    std::vector<std::int32_t> ids(static_cast<std::size_t>(n) * k, -1), counts(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      std::vector<int> experts(static_cast<std::size_t>(E));
      std::iota(experts.begin(), experts.end(), 0);
      std::shuffle(experts.begin(), experts.end(), rng);
      counts[static_cast<std::size_t>(i)] = uniform(0, k);
      for (int j = 0; j < counts[static_cast<std::size_t>(i)]; ++j)
        ids[static_cast<std::size_t>(i) * k + j] = experts[static_cast<std::size_t>(j)];
    }
    for (const bool least : {false, true}) {
      CAPTURE(least);
      const mr::replica_map map = m.view(least ? mr::replica_choice::least_loaded : mr::replica_choice::token_modulo);
      std::vector<std::int32_t> physical(ids.size()), loads(static_cast<std::size_t>(G)),
          tokens(static_cast<std::size_t>(G));
      mr::expert_set used;
      const int most = mr::dispatch_to_replicas(map, ids.data(), counts.data(), n, k, physical.data(), loads.data(),
                                                tokens.data(), used);
      const naive_dispatch want = dispatch_by_hand(m, ids, counts, n, k, least);
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < k; ++j) {
          const auto at = static_cast<std::size_t>(i) * k + j;
          if (j < counts[static_cast<std::size_t>(i)])
            REQUIRE(m.p2l[static_cast<std::size_t>(physical[at])] == ids[at]);
          REQUIRE(physical[at] == want.physical[at]);
        }
      }
      for (int g = 0; g < G; ++g)
        REQUIRE(loads[static_cast<std::size_t>(g)] == want.loads[static_cast<std::size_t>(g)]);
      REQUIRE(most == (G == 0 ? 0 : *std::max_element(want.loads.begin(), want.loads.end())));
    }
  }
}

TEST_CASE("replica dispatch by hand: modulo by token index, least loaded by device assignments") {
  // Devices hold slots {0,1} {2,3} {4,5}: e0 in slots 0 (device 0) and 3 (device 1), e1 in
  // 1 (device 0) and 5 (device 2), e2 in 2 (device 1), e3 in 4 (device 2).
  const owned_map m = small_map();
  // Three tokens, k = 2: {e0, e1}, {e0, e2}, {e0, e3}.
  const std::vector<std::int32_t> ids = {0, 1, 0, 2, 0, 3}, counts = {2, 2, 2};
  std::vector<std::int32_t> physical(6), loads(3), tokens(3);
  mr::expert_set used;
  int most = mr::dispatch_to_replicas(m.view(), ids.data(), counts.data(), 3, 2, physical.data(), loads.data(),
                                      tokens.data(), used);
  // Token i takes replica i mod 2 of e0 and e1: slots 0, 3, 0 for e0; slot 1 for t0's e1.
  CHECK(physical == std::vector<std::int32_t>{0, 1, 3, 2, 0, 4});
  CHECK(loads == std::vector<std::int32_t>{2, 2, 1});  // {0,1} {2,3} {4}
  CHECK(most == 2);
  most = mr::dispatch_to_replicas(m.view(mr::replica_choice::least_loaded), ids.data(), counts.data(), 3, 2,
                                  physical.data(), loads.data(), tokens.data(), used);
  // t0: e0 -> slot 0 (devices 0 and 1 tie at 0, the earlier replica), e1 -> slot 5 (device 2
  // has 0, device 0 has 1); t1: e0 -> slot 3 (device 1: 0 < 1), e2 -> slot 2; t2: e0 ->
  // slot 0 (device 0: 1 < device 1: 2), e3 -> slot 4.
  CHECK(physical == std::vector<std::int32_t>{0, 5, 3, 2, 0, 4});
  CHECK(loads == std::vector<std::int32_t>{1, 2, 2});  // {0} {2,3} {4,5}
  CHECK(most == 2);
}
