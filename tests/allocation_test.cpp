// Once the workspace and plan are sized, a routing call makes no heap allocation.
// This binary counts every global operator new, and can make a chosen one throw (what a
// workspace does when its sizing runs out of memory part of the way through).

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <atomic>
#include <cstdlib>
#include <new>

#include <moe_routing/cpu/executor/moe_forward.hpp>

#include "naive_executor.hpp"
#include "plan_checks.hpp"

namespace {
std::atomic<long> allocations{0};
std::atomic<long> failing_allocation{-1};  ///< the value of `allocations` whose allocation throws

/// Counts one allocation; throws std::bad_alloc if it is the one chosen to fail.
void count_allocation() {
  if (allocations.fetch_add(1, std::memory_order_relaxed) + 1 == failing_allocation.load()) throw std::bad_alloc();
}
/// `count` values drawn from N(0, 1): router logits, or an expert layer's input.
std::vector<float> normal_values(std::size_t count, std::mt19937& rng) {
  std::vector<float> values(count);
  for (auto& v : values) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  return values;
}
}  // namespace

void* operator new(std::size_t size) {
  count_allocation();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void* operator new(std::size_t size, std::align_val_t alignment) {
  count_allocation();
  const std::size_t a = static_cast<std::size_t>(alignment);
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

TEST_CASE("a sequential routing call allocates nothing, for every preset") {
  namespace mr = test::mr;
  std::mt19937 rng(5);
  const int n = 300, experts = 256, k = 8, devices = 4;
  const std::vector<float> scores = normal_values(static_cast<std::size_t>(n) * experts, rng);
  std::vector<std::int32_t> placement(experts), segments;
  for (int e = 0; e < experts; ++e) placement[static_cast<std::size_t>(e)] = e % devices;
  for (int o = 0; o <= n; o += 4) segments.push_back(o);
  mr::routing_batch<float> batch{mr::make_score_view(scores.data(), n, experts)};
  batch.placement = placement.data();
  batch.device_count = devices;
  batch.segments = segments.data();
  batch.request_count = static_cast<int>(segments.size()) - 1;
  mr::cpu::workspace ws({n, experts, k});
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k, .devices = devices});
  for (const char* text :
       {"topk(k=8)", "oea(k0=4,top_p=0.8,max_rank=20,k=8)", "pruned(k0=3,k=8)", "xshare(k0=1,m=16,k=8,gate=dense)",
        "xshare_spec(k0=1,m=2,m_r=4,k=8,gate=dense)", "xshare_ep(k0=1,m_g=20,k=8)", "lynx_lat(d=32,k=8)",
        "lynx_acc(conf=0.5,budget=24,k=8)", "skip(beta=0.3,k=8)", "prune(k0=1)|coverage_greedy(add=16,k=4)|refine(k=8)",
        "prune_to_budget(budget=40)|refine(k=8)", "prune_to_latency(target=48,t_token=0.01)|refine(k=8)",
        "prune(k0=2)|refine(k=8)|capacity(c=12)", "oea(k0=4,k=8)|capacity(c=10)", "prune(k0=1)|ep_level()|refine(k=8)",
        "prune(k0=1)|ep_level(gate=dense)|refine(k=8)|capacity(c=16)"}) {
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    REQUIRE(mr::cpu::route(policy, batch, plan.view(), ws).ok());  // warm-up
    const long before = allocations.load();
    for (int call = 0; call < 5; ++call) REQUIRE(mr::cpu::route(policy, batch, plan.view(), ws).ok());
    CHECK(allocations.load() - before == 0);
  }
  // The compile-time form too.
  const auto compiled = mr::presets::xshare_batch(1, 16, k);
  REQUIRE(mr::cpu::route(compiled, batch, plan.view(), ws).ok());
  const long before = allocations.load();
  REQUIRE(mr::cpu::route(compiled, batch, plan.view(), ws).ok());
  CHECK(allocations.load() - before == 0);
}

TEST_CASE("parallel routing calls: the library allocates nothing of its own") {
  // TBB's scheduler may allocate task objects from its own pools; global operator new
  // (what the library itself would use) stays untouched after warm-up.
  namespace mr = test::mr;
  const int n = 1024, experts = 128, k = 8;
  std::mt19937 rng(6);
  const std::vector<float> scores = normal_values(static_cast<std::size_t>(n) * experts, rng);
  mr::routing_batch<float> batch{mr::make_score_view(scores.data(), n, experts)};
  mr::cpu::workspace ws({n, experts, k});
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
  const auto policy = mr::presets::oea(3, k);
  for (int warm = 0; warm < 50; ++warm)
    REQUIRE(mr::cpu::route(policy, batch, plan.view(), ws, std::execution::par).ok());
  int failures = 0;
  const long before = allocations.load();
  for (int call = 0; call < 20; ++call)
    failures += mr::cpu::route(policy, batch, plan.view(), ws, std::execution::par).ok() ? 0 : 1;
  const long made = allocations.load() - before;
  CHECK(failures == 0);
  CHECK(made == 0);
}

TEST_CASE("a sequential routing call with a replica map allocates nothing") {
  namespace mr = test::mr;
  std::mt19937 rng(6);
  const int n = 200, experts = 128, k = 8, devices = 4, physical = 160;
  const std::vector<float> scores = normal_values(static_cast<std::size_t>(n) * experts, rng);
  // Slots 0..127 hold e0..e127, slots 128..159 a second replica of e0..e31 (row order = slot order).
  std::vector<std::int32_t> p2l(physical), counts(experts, 1), l2p(static_cast<std::size_t>(experts) * 2, -1);
  for (int p = 0; p < physical; ++p) p2l[static_cast<std::size_t>(p)] = p % experts;
  for (int e = 0; e < experts; ++e) l2p[static_cast<std::size_t>(e) * 2] = e;
  for (int p = experts; p < physical; ++p) {
    l2p[static_cast<std::size_t>(p - experts) * 2 + 1] = p;
    counts[static_cast<std::size_t>(p - experts)] = 2;
  }
  std::vector<std::int32_t> placement(experts);
  for (int e = 0; e < experts; ++e) placement[static_cast<std::size_t>(e)] = e / (physical / devices);
  mr::routing_batch<float> batch{mr::make_score_view(scores.data(), n, experts)};
  batch.placement = placement.data();
  batch.device_count = devices;
  for (const auto choice : {mr::replica_choice::token_modulo, mr::replica_choice::least_loaded}) {
    batch.replicas = {p2l.data(), l2p.data(), counts.data(), experts, physical, 2, devices, choice};
    REQUIRE(mr::validate_replica_map(batch.replicas, experts).ok());
    mr::cpu::workspace ws({n, experts, k});
    mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k, .devices = devices});
    for (const char* text : {"topk(k=8)", "xshare_ep(k0=1,m_g=20,k=8)", "prune(k0=1)|ep_level()|refine(k=8)",
                             "per_request(k0=1,m_r=2)|ep_fill(m_g=4)|refine(k=8)|capacity(c=12)"}) {
      CAPTURE(text);
      const auto policy = mr::parse_policy_or_throw(text);
      REQUIRE(mr::cpu::route(policy, batch, plan.view(), ws).ok());  // warm-up
      const long before = allocations.load();
      for (int call = 0; call < 5; ++call) REQUIRE(mr::cpu::route(policy, batch, plan.view(), ws).ok());
      CHECK(allocations.load() - before == 0);
    }
  }
}

namespace {
/// Calls `reserve()` again and again, one of its allocations made to throw std::bad_alloc,
/// with `after_failure()` after each failure, until a call succeeds; returns how many failed.
/// A buffer that a failed call already sized is not allocated again, while the one that threw
/// is allocated first in the next call: so the first call fails its first allocation, and each
/// later call its second, and every buffer the reserve grows is the one that throws once.
template <class Reserve, class AfterFailure>
int fail_each_allocation_of(Reserve&& reserve, AfterFailure&& after_failure) {
  for (int failures = 0;; ++failures) {
    REQUIRE(failures <= 1000);  // a buffer failing again and again: stop, and say so
    failing_allocation = allocations.load() + (failures == 0 ? 1 : 2);
    try {
      reserve();
      failing_allocation = -1;
      return failures;
    } catch (const std::bad_alloc&) {
      failing_allocation = -1;
      after_failure();
    }
  }
}
}  // namespace

TEST_CASE("a routing workspace whose sizing runs out of memory claims no room until sized again") {
  namespace mr = test::mr;
  const int n = 300, experts = 64, k = 8;
  std::mt19937 rng(8);
  const std::vector<float> scores = normal_values(static_cast<std::size_t>(n) * experts, rng);
  mr::routing_batch<float> batch{mr::make_score_view(scores.data(), n, experts)};
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k}),
      fresh({.tokens = n, .experts = experts, .top_k = k});
  const auto policy = mr::parse_policy_or_throw("oea(k0=4,top_p=0.8,max_rank=20,k=8)");
  mr::cpu::workspace ws({16, 16, 2});  // too small for the batch
  const int failures = fail_each_allocation_of(
      [&] {
        ws.reserve({n, experts, k});
      },
      [&] {
        REQUIRE(ws.shape().max_tokens == 0);
        CHECK(ws.shape().experts == 0);
        CHECK(ws.shape().top_k == 0);
        CHECK(mr::cpu::route(policy, batch, plan.view(), ws).code == mr::errc::workspace_too_small);
      });
  // Each allocation that sizing makes from the same start failed once.
  mr::cpu::workspace probe({16, 16, 2});
  const long before = allocations.load();
  probe.reserve({n, experts, k});
  CHECK(failures == allocations.load() - before);
  CHECK(failures >= 10);
  REQUIRE(mr::cpu::route(policy, batch, plan.view(), ws).ok());
  mr::cpu::workspace other({n, experts, k});
  REQUIRE(mr::cpu::route(policy, batch, fresh.view(), other).ok());
  CHECK(plan.ids() == fresh.ids());
  CHECK(plan.weights() == fresh.weights());
}

TEST_CASE("an executor workspace whose sizing runs out of memory claims no room until sized again") {
  namespace mr = test::mr;
  const int n = 24, experts = 8, d = 64, h = 48, k = 2;
  std::mt19937 rng(9);
  const test::expert_bank<mr::bfloat16> bank(experts, d, h, rng);
  const auto weights = test::view_of<mr::bfloat16>(bank, false, nullptr);
  const test::layer_inputs inputs(n, d, experts, rng);
  const std::vector<float>& x = inputs.x;
  std::vector<float> y(x.size());
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
  REQUIRE(mr::cpu::route(mr::presets::vanilla(k), inputs.batch(), plan.view()).ok());
  mr::cpu::executor_workspace ws({2, k, experts, d, h});  // too few tokens for the call
  const int failures = fail_each_allocation_of(
      [&] {
        ws.reserve({n, k, experts, d, h});
      },
      [&] {
        REQUIRE(ws.shape().max_tokens == 0);
        CHECK(ws.shape().hidden == 0);
        CHECK(mr::cpu::moe_forward(x.data(), n, plan.view(), weights, y.data(), ws).code ==
              mr::errc::workspace_too_small);
      });
  mr::cpu::executor_workspace probe({2, k, experts, d, h});
  const long before = allocations.load();
  probe.reserve({n, k, experts, d, h});
  CHECK(failures == allocations.load() - before);  // each allocation failed once
  CHECK(failures >= 10);
  REQUIRE(mr::cpu::moe_forward(x.data(), n, plan.view(), weights, y.data(), ws).ok());
  CHECK(test::relative_error(y, test::naive_forward<mr::bfloat16>(x, plan, bank, nullptr, /*rounded=*/true)) <
        1.0 / 256);
}
