// Load: a long run of random batches of mixed shapes through every preset with one reused
// workspace and one plan buffer, as an engine would route every decode step. A sample is
// checked against the naive router; resident memory must not grow. Batches:
// MOE_ROUTING_SOAK_BATCHES (default 1,000,000).

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <cstdlib>
#include <fstream>
#include <string>

#include "plan_checks.hpp"

namespace {

/// VmRSS or VmHWM of this process in KiB.
long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size() + 1));
  }
  return -1;
}

}  // namespace

TEST_CASE("soak: a million mixed batches through every preset, memory flat") {
  namespace mr = test::mr;
  const char* configured = std::getenv("MOE_ROUTING_SOAK_BATCHES");
  const long batches = configured != nullptr ? std::atol(configured) : 1000000;
  const int max_n = 1024, max_e = 256, max_k = 8;

  std::mt19937 rng(20261121);
  // A pool of scores with a few non-finite values; each batch views a random window.
  std::vector<float> pool(std::size_t{1} << 21);
  for (auto& v : pool) v = std::normal_distribution<float>(0.0f, 2.0f)(rng);
  for (int i = 0; i < 500; ++i) {
    const float specials[] = {NAN, INFINITY, -INFINITY};
    pool[std::uniform_int_distribution<std::size_t>(0, pool.size() - 1)(rng)] = specials[i % 3];
  }
  std::vector<mr::bfloat16> pool_bf16(pool.size());
  for (std::size_t i = 0; i < pool.size(); ++i) pool_bf16[i] = mr::to_bfloat16(pool[i]);
  std::vector<std::int32_t> placement(max_e), segments(max_n + 1);
  std::vector<std::uint8_t> mask(max_n);

  mr::cpu::workspace ws({max_n, max_e, max_k});
  std::vector<std::int32_t> ids(max_n * max_k), counts(max_n), expert_tokens(max_e), loads(8), guaranteed(max_n);
  std::vector<float> weights(max_n * max_k);
  mr::plan_summary summary;

  const char* policies[] = {"topk(k=K)",
                            "oea(k0=2,k=K)",
                            "oea(k0=1,top_p=0.8,max_rank=12,k=K)",
                            "pruned(k0=2,k=K)",
                            "xshare(k0=1,m=8,k=K)",
                            "xshare_spec(k0=1,m=2,m_r=2,k=K,gate=dense)",
                            "xshare_ep(k0=1,m_g=4,k=K)",
                            "lynx_lat(d=6,k=K)",
                            "lynx_acc(conf=0.3,budget=10,k=K)",
                            "skip(beta=0.3,k=K)"};
  // Warm-up at the largest shape: touches every page of the workspace and of the naive
  // checker's buffers, so that growth measured later means a leak, not a first touch.
  {
    mr::routing_batch<float> largest{mr::make_score_view(pool.data(), max_n, max_e)};
    for (int i = 0; i <= max_n; ++i) segments[static_cast<std::size_t>(i)] = i;
    largest.segments = segments.data();
    largest.request_count = max_n;
    largest.placement = placement.data();
    largest.device_count = 1;
    mr::plan_view plan{ids.data(), weights.data(),       counts.data(), &summary,          max_n, max_k,
                       {},         expert_tokens.data(), loads.data(),  guaranteed.data(), max_e, 8};
    for (const char* text : {"xshare_spec(k0=1,m=2,m_r=2,k=8,gate=dense)", "oea(k0=1,top_p=0.8,max_rank=12,k=8)"}) {
      REQUIRE(mr::cpu::route(mr::parse_policy_or_throw(text), largest, plan, ws).ok());
    }
    test::problem p;
    p.ref.n = max_n;
    p.ref.E = max_e;
    p.stride = max_e;
    test::store_scores(p, std::vector<float>(pool.begin(), pool.begin() + max_n * max_e));
    (void)naive::route(p.ref, test::to_naive(mr::parse_policy_or_throw("xshare(k0=1,m=8,k=8)")), max_k);
  }

  long checked = 0, failures = 0, routed = 0;
  long rss_after_warmup = 0, peak_after_warmup = 0;
  const int experts_choices[] = {8, 16, 64, 128, 256};
  for (long b = 0; b < batches; ++b) {
    if (b == 10000) {
      rss_after_warmup = status_kib("VmRSS:");
      peak_after_warmup = status_kib("VmHWM:");
    }
    const int experts = experts_choices[rng() % 5];
    const int k = 2 + static_cast<int>(rng() % 7);  // 2..8: every policy below needs k >= k0 = 2
    const int n = (rng() % 50 == 0) ? 1 + static_cast<int>(rng() % max_n) : static_cast<int>(rng() % 65);
    std::string text = policies[rng() % 10];
    text.replace(text.find('K'), 1, std::to_string(k));
    const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
    const std::size_t offset = rng() % (pool.size() - static_cast<std::size_t>(n) * experts);
    const int devices = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < experts; ++e)
      placement[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(rng() % devices);
    const bool masked = rng() % 4 == 0;
    for (int i = 0; i < n; ++i) mask[static_cast<std::size_t>(i)] = rng() % 5 != 0;
    int requests = 0;
    for (int o = 0; o < n; ++requests) {
      segments[static_cast<std::size_t>(requests)] = o;
      o = std::min(n, o + 1 + static_cast<int>(rng() % 4));
    }
    segments[static_cast<std::size_t>(requests)] = n;

    mr::plan_view plan{ids.data(), weights.data(),       counts.data(), &summary,          n,     k,
                       {},         expert_tokens.data(), loads.data(),  guaranteed.data(), max_e, 8};
    const bool use_bf16 = rng() % 2 == 0;
    auto fill = [&](auto& batch) {
      batch.token_mask = masked ? mask.data() : nullptr;
      batch.segments = segments.data();
      batch.request_count = requests;
      batch.placement = placement.data();
      batch.device_count = devices;
    };
    mr::status s;
    if (use_bf16) {
      mr::routing_batch<mr::bfloat16> batch{mr::make_score_view(pool_bf16.data() + offset, n, experts)};
      fill(batch);
      s = mr::cpu::route(policy, batch, plan, ws);
    } else {
      mr::routing_batch<float> batch{mr::make_score_view(pool.data() + offset, n, experts)};
      fill(batch);
      s = mr::cpu::route(policy, batch, plan, ws);
    }
    if (!s.ok()) {
      ++failures;
      continue;
    }
    ++routed;
    if (b % 997 == 0) {  // a sample against the naive router
      ++checked;
      test::problem p;
      p.ref.n = n;
      p.ref.E = experts;
      p.top_k = k;
      p.stride = experts;
      p.type = test::element::f32;
      std::vector<float> values(static_cast<std::size_t>(n) * experts);
      for (std::size_t i = 0; i < values.size(); ++i)
        values[i] = use_bf16 ? mr::to_float(pool_bf16[offset + i]) : pool[offset + i];
      test::store_scores(p, values);
      if (masked) p.ref.mask.assign(mask.begin(), mask.begin() + n);
      p.ref.segments.assign(segments.begin(), segments.begin() + requests + 1);
      p.ref.placement.assign(placement.begin(), placement.begin() + experts);
      p.ref.G = devices;
      const naive::plan want = naive::route(p.ref, test::to_naive(policy), k);
      bool same = true;
      for (int i = 0; i < n && same; ++i) {
        same = counts[static_cast<std::size_t>(i)] == want.counts[static_cast<std::size_t>(i)];
        for (int j = 0; j < counts[static_cast<std::size_t>(i)] && same; ++j) {
          const std::size_t at = static_cast<std::size_t>(i) * k + j;
          same = ids[at] == want.ids[at] && test::close(weights[at], want.weights[at]) && std::isfinite(weights[at]) &&
                 weights[at] >= 0;
        }
      }
      if (!same) {
        ++failures;
        MESSAGE("mismatch at batch " << b << ": " << text << " n=" << n << " E=" << experts);
      }
    }
  }
  const long rss_end = status_kib("VmRSS:"), peak_end = status_kib("VmHWM:");
  MESSAGE("soak: " << batches << " batches, " << routed << " routed, " << checked
                   << " checked against the naive router, " << failures << " failures; VmRSS after warm-up "
                   << rss_after_warmup << " KiB, at the end " << rss_end << " KiB; peak " << peak_after_warmup
                   << " KiB after warm-up, " << peak_end << " KiB at the end");
  CHECK(failures == 0);
  CHECK(routed == batches);
  if (batches > 10000) {
    // The peak must not move (less than 1 MiB), and the current RSS must stay within it:
    // RSS alone wanders below the peak as malloc reuses the checker's freed buffers.
    CHECK(peak_end - peak_after_warmup < 1024);
    CHECK(rss_end <= peak_after_warmup + 1024);
  }
}
