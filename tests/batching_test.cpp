// Batch forming: signatures, unions and marginal costs against sets computed naively here;
// every method a partition; the greedy oracle against a naive greedy and never worse than
// random; MinHash on clustered pools; online admission's order and its fairness bound.

#include <algorithm>
#include <array>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/batching/expert_parallel_batches.hpp>
#include <moe_routing/batching/form_batches.hpp>
#include <moe_routing/batching/online_admission.hpp>
#include <moe_routing/batching/spectral_batches.hpp>
#include <range/v3/view/cartesian_product.hpp>

namespace {

namespace mb = moe_routing::batching;
using expert_pairs = std::set<std::pair<int, int>>;  // (layer, expert)

/// Random signatures, kept twice: in the library's bitsets and as plain sets. With
/// `topics` > 0, each request draws most of its experts from its topic's own range.
struct pool {
  mb::request_signatures signatures;
  std::vector<expert_pairs> sets;

  pool(int requests, int layers, int experts, int per_layer, int topics, unsigned seed)
      : signatures(requests, layers, experts), sets(static_cast<std::size_t>(requests)) {
    std::mt19937 rng(seed);
    for (int r = 0; r < requests; ++r) {
      const int topic = topics > 0 ? r % topics : 0;
      const int span = topics > 0 ? experts / topics : experts;
      for (int l = 0; l < layers; ++l) {
        for (int j = 0; j < per_layer; ++j) {
          const bool own = topics > 0 && std::uniform_int_distribution<int>(0, 9)(rng) < 9;
          const int e = own ? topic * span + std::uniform_int_distribution<int>(0, span - 1)(rng)
                            : std::uniform_int_distribution<int>(0, experts - 1)(rng);
          signatures.add(r, l, e);
          sets[static_cast<std::size_t>(r)].insert({l, e});
        }
      }
    }
  }

  long long naive_loads(const mb::batch_list& batches) const {
    long long total = 0;
    for (const auto& members : batches) {
      expert_pairs joined;
      for (const int r : members)
        joined.insert(sets[static_cast<std::size_t>(r)].begin(), sets[static_cast<std::size_t>(r)].end());
      total += static_cast<long long>(joined.size());
    }
    return total;
  }
};

/// Each request exactly once, no batch above B.
void check_partition(const mb::batch_list& batches, int requests, int batch_size) {
  std::vector<int> seen(static_cast<std::size_t>(requests), 0);
  for (const auto& members : batches) {
    REQUIRE(!members.empty());
    REQUIRE(static_cast<int>(members.size()) <= batch_size);
    for (const int r : members) ++seen[static_cast<std::size_t>(r)];
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int count) { return count == 1; }));
}

/// The study's greedy written plainly over sets: oldest left as the seed, then the
/// fewest new pairs, the oldest on ties.
mb::batch_list naive_greedy(const std::vector<expert_pairs>& sets, int batch_size) {
  std::vector<int> left(sets.size());
  for (std::size_t i = 0; i < left.size(); ++i) left[i] = static_cast<int>(i);
  mb::batch_list batches;
  while (!left.empty()) {
    std::vector<int> members = {left.front()};
    expert_pairs joined = sets[static_cast<std::size_t>(left.front())];
    left.erase(left.begin());
    while (static_cast<int>(members.size()) < batch_size && !left.empty()) {
      std::size_t best = 0;
      long best_cost = -1;
      for (std::size_t i = 0; i < left.size(); ++i) {
        long cost = 0;
        for (const auto& pair : sets[static_cast<std::size_t>(left[i])]) cost += joined.count(pair) == 0 ? 1 : 0;
        if (best_cost < 0 || cost < best_cost) best = i, best_cost = cost;
      }
      members.push_back(left[best]);
      joined.insert(sets[static_cast<std::size_t>(left[best])].begin(),
                    sets[static_cast<std::size_t>(left[best])].end());
      left.erase(left.begin() + static_cast<std::ptrdiff_t>(best));
    }
    batches.push_back(members);
  }
  return batches;
}

}  // namespace

TEST_CASE("signatures: unions and new experts equal the naive sets'") {
  for (const int experts : {2, 60, 64, 65, 256, 1024}) {
    CAPTURE(experts);
    const pool p(30, 3, experts, 5, 0, static_cast<unsigned>(experts));
    mb::batch_union joined(p.signatures);
    expert_pairs naive;
    for (int r = 0; r < 30; ++r) {
      long naive_new = 0;
      for (const auto& pair : p.sets[static_cast<std::size_t>(r)]) naive_new += naive.count(pair) == 0 ? 1 : 0;
      CHECK(joined.new_experts(r) == naive_new);
      CHECK(p.signatures.size(r) == static_cast<int>(p.sets[static_cast<std::size_t>(r)].size()));
      joined.add(r);
      naive.insert(p.sets[static_cast<std::size_t>(r)].begin(), p.sets[static_cast<std::size_t>(r)].end());
      CHECK(joined.loads() == static_cast<long long>(naive.size()));
    }
  }
  // A plan row: padding ids are skipped.
  mb::request_signatures s(1, 2, 8);
  const std::int32_t row[4] = {3, 7, -1, 8};
  s.add_row(0, 1, row, 4);
  CHECK(s.contains(0, 1, 3));
  CHECK(s.contains(0, 1, 7));
  CHECK_FALSE(s.contains(0, 0, 3));
  CHECK(s.size(0) == 2);
  CHECK_THROWS_AS(mb::request_signatures(-1, 2, 8), moe_routing::routing_error);
  CHECK_THROWS_AS(mb::request_signatures(4, 2, 2000), moe_routing::routing_error);
}

TEST_CASE("batch forming: a hand-worked pool") {
  // Requests 0 and 2 use experts {0, 1}, requests 1 and 3 use {2, 3}; one layer, B = 2.
  // Arrival order pairs strangers (4 + 4 = 8 loads); the oracle pairs alikes (2 + 2 = 4).
  mb::request_signatures s(4, 1, 8);
  for (const int r : {0, 2}) s.add(r, 0, 0), s.add(r, 0, 1);
  for (const int r : {1, 3}) s.add(r, 0, 2), s.add(r, 0, 3);
  CHECK(mb::expert_loads(s, mb::fifo_batches(4, 2)) == 8);
  CHECK(mb::greedy_batches(s, 2) == mb::batch_list{{0, 2}, {1, 3}});
  CHECK(mb::expert_loads(s, mb::greedy_batches(s, 2)) == 4);
  CHECK(mb::expert_loads(s, mb::minhash_batches(s, 2)) == 4);
  CHECK_THROWS_AS(mb::fifo_batches(4, 0), moe_routing::routing_error);
}

TEST_CASE("batch forming: partitions, and the oracle equals a naive greedy and never loses to random") {
  static const std::array topic_counts{0, 4};
  static const std::array batch_sizes{1, 3, 8};
  for (const auto [topic_count, size] : ranges::views::cartesian_product(topic_counts, batch_sizes)) {
    const int topics = topic_count, batch_size = size;  // named copies: clang 14 cannot capture a structured binding
    CAPTURE(topics);
    CAPTURE(batch_size);
    const pool p(41, 4, 64, 6, topics, static_cast<unsigned>(100 + batch_size + topics));
    const mb::batch_list greedy = mb::greedy_batches(p.signatures, batch_size);
    check_partition(greedy, 41, batch_size);
    CHECK(greedy == naive_greedy(p.sets, batch_size));
    CHECK(mb::expert_loads(p.signatures, greedy) == p.naive_loads(greedy));
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
      const mb::batch_list random = mb::random_batches(41, batch_size, seed);
      check_partition(random, 41, batch_size);
      CHECK(mb::expert_loads(p.signatures, greedy) <= mb::expert_loads(p.signatures, random));
    }
    check_partition(mb::fifo_batches(41, batch_size), 41, batch_size);
    check_partition(mb::minhash_batches(p.signatures, batch_size), 41, batch_size);
  }
}

TEST_CASE("random batches: the same for a seed, another for another seed") {
  CHECK(mb::random_batches(100, 7, 5) == mb::random_batches(100, 7, 5));
  CHECK(mb::random_batches(100, 7, 5) != mb::random_batches(100, 7, 6));
}

TEST_CASE("MinHash batches group requests of one topic, near the oracle on a clustered pool") {
  const pool p(400, 4, 256, 8, 8, 77);  // 8 topics, 90% of each request's experts from its own
  const long long random = mb::expert_loads(p.signatures, mb::random_batches(400, 16, 1));
  const long long greedy = mb::expert_loads(p.signatures, mb::greedy_batches(p.signatures, 16));
  const long long minhash = mb::expert_loads(p.signatures, mb::minhash_batches(p.signatures, 16));
  INFO("random " << random << ", greedy " << greedy << ", minhash " << minhash);
  CHECK(greedy < random);
  CHECK(minhash < random);
  // At least 70% of the oracle's saving on this pool (80% when written).
  CHECK(static_cast<double>(random - minhash) >= 0.7 * static_cast<double>(random - greedy));
}

TEST_CASE("online admission: overdue requests first, then the fewest new experts") {
  mb::request_signatures s(4, 1, 16);
  for (const int e : {0, 1, 2}) s.add(0, 0, e);   // the running batch
  for (const int e : {8, 9, 10}) s.add(1, 0, e);  // 3 new experts
  s.add(2, 0, 1);                                 // none new
  for (const int e : {2, 3}) s.add(3, 0, e);      // 1 new
  mb::batch_union running(s);
  running.add(0);
  const std::vector<mb::waiting_request> queue = {{1, 0}, {2, 0}, {3, 0}};
  CHECK(mb::choose_admissions(running, queue, 2, 5) == std::vector<int>{1, 2});
  const std::vector<mb::waiting_request> overdue = {{1, 5}, {2, 0}, {3, 0}};
  CHECK(mb::choose_admissions(running, overdue, 2, 5) == std::vector<int>{0, 1});
  CHECK(mb::choose_admissions(running, queue, 5, 5).size() == 3);  // more slots than requests
  CHECK(mb::choose_admissions(running, {}, 2, 5).empty());
}

TEST_CASE("online admission: no request waits past the bound under an adversarial stream") {
  // One slot frees per step. A request whose experts nobody shares waits at the head of the
  // queue while a cheap request (the running batch's own experts) arrives every step and
  // would always be preferred; the bound must still admit it after max_wait steps.
  const int steps = 40, max_wait = 6;
  mb::request_signatures s(steps + 2, 1, 64);
  for (int e = 0; e < 8; ++e) s.add(0, 0, e);    // the running batch
  for (int e = 32; e < 48; ++e) s.add(1, 0, e);  // the expensive request
  for (int r = 2; r < steps + 2; ++r) s.add(r, 0, r % 8);
  mb::batch_union running(s);
  running.add(0);
  std::vector<mb::waiting_request> queue = {{1, 0}};
  int admitted_after = -1;
  for (int step = 0; step < steps && admitted_after < 0; ++step) {
    queue.push_back({step + 2, 0});
    for (const int position : mb::choose_admissions(running, queue, 1, max_wait)) {
      if (queue[static_cast<std::size_t>(position)].request == 1)
        admitted_after = queue[static_cast<std::size_t>(position)].waited_steps;
      queue.erase(queue.begin() + position);
    }
    for (auto& waiting : queue) ++waiting.waited_steps;
  }
  CHECK(admitted_after == max_wait);
}

TEST_CASE("online batches: a partition, each request within max_wait steps of its arrival, saving on topics") {
  static const std::array online_batch_sizes{1, 5, 16};
  static const std::array waits{0, 1, 3, 8};
  const pool p(400, 4, 256, 8, 8, 91);
  for (const auto [size, wait] : ranges::views::cartesian_product(online_batch_sizes, waits)) {
    const int batch_size = size, max_wait = wait;  // named copies: clang 14 cannot capture a structured binding
    CAPTURE(batch_size);
    CAPTURE(max_wait);
    const mb::batch_list online = mb::online_batches(p.signatures, batch_size, max_wait);
    check_partition(online, 400, batch_size);
    for (std::size_t step = 0; step < online.size(); ++step) {
      for (const int request : online[step]) {
        // batch_size * (max_wait / 2) requests wait at step 0, then batch_size arrive per step.
        const int arrival_step = std::max(0, (request - batch_size * (max_wait / 2)) / batch_size);
        CHECK(static_cast<int>(step) >= arrival_step);
        CHECK(static_cast<int>(step) - arrival_step <= max_wait);
      }
    }
    if (max_wait == 0) CHECK(online == mb::fifo_batches(400, batch_size));  // no waiting: arrival order
  }
  const long long fifo = mb::expert_loads(p.signatures, mb::fifo_batches(400, 16));
  const long long online = mb::expert_loads(p.signatures, mb::online_batches(p.signatures, 16, 8));
  INFO("fifo " << fifo << ", online " << online);
  CHECK(online < fifo);
}

namespace {

/// Busiest-device cost of a batch from the plain sets: per layer, the most distinct experts
/// on one device, summed over layers.
long long naive_busiest(const std::vector<expert_pairs>& sets, const std::vector<int>& members,
                        const std::vector<std::int32_t>& placement, int devices, int layers) {
  std::set<std::pair<int, int>> joined;
  for (const int r : members)
    joined.insert(sets[static_cast<std::size_t>(r)].begin(), sets[static_cast<std::size_t>(r)].end());
  long long total = 0;
  for (int l = 0; l < layers; ++l) {
    std::vector<int> per_device(static_cast<std::size_t>(devices), 0);
    for (const auto& [layer, e] : joined) {
      if (layer == l) ++per_device[static_cast<std::size_t>(placement[static_cast<std::size_t>(e)])];
    }
    total += *std::max_element(per_device.begin(), per_device.end());
  }
  return total;
}

}  // namespace

TEST_CASE("expert-parallel batches: the busiest device's cost against naive sets, and greedy beats random on it") {
  const int layers = 4, experts = 96, devices = 4;
  const pool p(120, layers, experts, 6, 6, 23);
  std::vector<std::int32_t> placement(experts);
  for (int e = 0; e < experts; ++e) placement[static_cast<std::size_t>(e)] = (e * 7) % devices;  // scattered
  const mb::device_masks masks(p.signatures, placement, devices);
  mb::ep_batch_union growing(p.signatures, masks);
  std::vector<int> members;
  for (const int r : {3, 17, 40, 41, 99}) {
    const long long before = naive_busiest(p.sets, members, placement, devices, layers);
    members.push_back(r);
    const long long after = naive_busiest(p.sets, members, placement, devices, layers);
    CHECK(growing.added_cost(r) == after - before);
    growing.add(r);
    CHECK(growing.cost() == after);
  }
  const mb::batch_list greedy = mb::greedy_ep_batches(p.signatures, masks, 8);
  check_partition(greedy, 120, 8);
  long long naive_total = 0;
  for (const auto& batch : greedy) naive_total += naive_busiest(p.sets, batch, placement, devices, layers);
  CHECK(mb::busiest_device_loads(p.signatures, masks, greedy) == naive_total);
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    CHECK(mb::busiest_device_loads(p.signatures, masks, greedy) <
          mb::busiest_device_loads(p.signatures, masks, mb::random_batches(120, 8, seed)));
  }
  CHECK_THROWS_WITH(mb::device_masks(p.signatures, std::vector<std::int32_t>(experts, devices), devices),
                    doctest::Contains("placement[0] = 4"));
}

TEST_CASE("spectral batches: a partition, the same for a seed, near the oracle where topics are weak") {
  for (const int batch_size : {1, 3, 8}) {
    const pool small(41, 4, 64, 6, 4, static_cast<unsigned>(300 + batch_size));
    check_partition(mb::spectral_batches(small.signatures, batch_size), 41, batch_size);
    check_partition(mb::spectral_batches(small.signatures, batch_size, {.leaf_batches = 1, .iterations = 0}), 41,
                    batch_size);
  }
  const pool p(600, 6, 256, 8, 12, 5);  // 12 topics, 90% of each request's experts from its own
  CHECK(mb::spectral_batches(p.signatures, 16, {.seed = 3}) == mb::spectral_batches(p.signatures, 16, {.seed = 3}));
  const long long random = mb::expert_loads(p.signatures, mb::random_batches(600, 16, 1));
  const long long greedy = mb::expert_loads(p.signatures, mb::greedy_batches(p.signatures, 16));
  const long long spectral = mb::expert_loads(p.signatures, mb::spectral_batches(p.signatures, 16));
  const long long unguided =  // random directions: the principal ones are what finds the topics
      mb::expert_loads(p.signatures, mb::spectral_batches(p.signatures, 16, {.iterations = 0}));
  INFO("random " << random << ", greedy " << greedy << ", spectral " << spectral << ", unguided " << unguided);
  CHECK(static_cast<double>(random - spectral) >= 0.74 * static_cast<double>(random - greedy));
  CHECK(spectral < unguided);
  CHECK_THROWS_WITH(mb::spectral_batches(p.signatures, 16, {.leaf_batches = 0}),
                    doctest::Contains("spectral_options.leaf_batches = 0"));
}
