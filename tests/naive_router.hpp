#pragma once
// A deliberately naive router written from SPEC.md alone, sharing no code with the
// library: full sorts of every row, std::vector<bool> sets, loops over everything.
// Slow and obvious on purpose; the library must agree with it id for id.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace naive {

enum class mode { softmax, sigmoid, sqrtsoftplus, probabilities };

struct batch {
  int n = 0, E = 0;
  std::vector<float> x;  // n*E inputs, already as float
  mode scoring = mode::softmax;
  std::vector<float> bias;  // empty = none
  int n_group = 0, topk_group = 0;
  bool group_max = false;          // false: top2_sum
  std::vector<std::uint8_t> mask;  // empty = all valid
  std::vector<int> segments;       // empty = one request per token
  std::vector<int> placement;      // empty = none
  int G = 0;
  bool prefill = false;
  bool valid(int i) const { return mask.empty() || mask[i] != 0; }
};

struct stage {
  std::string kind;  // topk_union prune greedy_mass per_request ep_fill vote_drop confidence_keep
  int k = 0, k0 = 0, add = -1, size = -1, m_r = 0, m_g = 0, d = 0, budget = 0;
  float top_p = 1, beta = 0, mass = -1, conf = 0;
  bool dense = false;
};

struct policy {
  std::vector<stage> sets;
  int k = 0;  // refine k (0 = top_k)
  int max_rank = 1 << 20;
  bool raw = false;
  float scale = 1;
};

struct plan {
  int n = 0, k = 0;
  std::vector<int> ids;
  std::vector<float> weights;
  std::vector<int> counts;
  std::vector<int> guaranteed;
  std::vector<bool> S, active;
  int selected = 0, active_count = 0;
};

inline bool before(float a, int ia, float b, int ib) {  // rank order: a before b?
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return nb;
  if (!na && a != b) return a > b;
  return ia < ib;
}

inline std::int64_t fixed(float g) {
  if (!(g > 0)) return 0;
  return static_cast<std::int64_t>(std::nearbyint(static_cast<double>(std::min(g, 65536.0f)) * 4294967296.0));
}

struct token_info {
  std::vector<float> p, s;
  std::vector<bool> candidate;
  std::vector<int> order;  // full ranking
  float total = 0, confidence = 0;
};

inline token_info score_token(const batch& b, int i) {
  token_info t;
  const float* x = &b.x[static_cast<std::size_t>(i) * b.E];
  t.p.assign(b.E, 0);
  t.s.assign(b.E, 0);
  if (b.scoring == mode::softmax) {
    float m = -INFINITY;
    for (int e = 0; e < b.E; ++e)
      if (!std::isnan(x[e]) && x[e] > m) m = x[e];
    if (m == INFINITY) {
      float c = 0;
      for (int e = 0; e < b.E; ++e) c += x[e] == INFINITY ? 1.0f : 0.0f;
      for (int e = 0; e < b.E; ++e) t.p[e] = x[e] == INFINITY ? 1.0f / c : 0.0f;
    } else if (m == -INFINITY) {
      for (int e = 0; e < b.E; ++e) t.p[e] = 1.0f / static_cast<float>(b.E);
    } else {
      // SPEC preamble: the denominator only scales weights, so it is summed in double and
      // rounded to float once (any summation order then gives the same float, or one a
      // rounding step away).
      double sum = 0;
      for (int e = 0; e < b.E; ++e)
        if (!std::isnan(x[e])) sum += static_cast<double>(std::exp(x[e] - m));
      const float den = static_cast<float>(sum);
      for (int e = 0; e < b.E; ++e) t.p[e] = std::isnan(x[e]) ? 0.0f : std::exp(x[e] - m) / den;
    }
  } else {
    for (int e = 0; e < b.E; ++e) {
      if (b.scoring == mode::sigmoid)
        t.p[e] = 1.0f / (1.0f + std::exp(-x[e]));
      else if (b.scoring == mode::sqrtsoftplus)
        t.p[e] = std::sqrt(x[e] > 20.0f ? x[e] : std::log1p(std::exp(x[e])));
      else
        t.p[e] = x[e];
    }
  }
  // SPEC section 1: s = p, plus the bias when one is given.
  for (int e = 0; e < b.E; ++e) t.s[e] = t.p[e] + (b.bias.empty() ? 0.0f : b.bias[e]);
  t.candidate.assign(b.E, true);
  if (b.n_group > 0) {
    const int size = b.E / b.n_group;
    std::vector<float> group_scores(b.n_group);
    for (int g = 0; g < b.n_group; ++g) {
      std::vector<int> members(size);
      std::iota(members.begin(), members.end(), g * size);
      auto value = [&](int e) { return t.s[e]; };
      std::sort(members.begin(), members.end(), [&](int a, int c) { return before(value(a), a, value(c), c); });
      group_scores[g] = (b.group_max || size == 1) ? value(members[0]) : value(members[0]) + value(members[1]);
    }
    std::vector<int> groups(b.n_group);
    std::iota(groups.begin(), groups.end(), 0);
    std::sort(groups.begin(), groups.end(),
              [&](int a, int c) { return before(group_scores[a], a, group_scores[c], c); });
    for (int r = b.topk_group; r < b.n_group; ++r) {
      for (int e = groups[r] * size; e < (groups[r] + 1) * size; ++e) {
        t.candidate[e] = false;
        t.s[e] = -INFINITY;
      }
    }
  }
  // Ranked by s; without a bias by the input itself, which every mode maps to p
  // monotonically (same order, no ties where p saturates or underflows).
  std::vector<float> rank_value(b.E);
  for (int e = 0; e < b.E; ++e) rank_value[e] = !t.candidate[e] ? -INFINITY : b.bias.empty() ? x[e] : t.s[e];
  t.order.resize(b.E);
  std::iota(t.order.begin(), t.order.end(), 0);
  std::sort(t.order.begin(), t.order.end(), [&](int a, int c) { return before(rank_value[a], a, rank_value[c], c); });
  float max_p = 0;
  double total = 0;  // double, rounded once, like the denominator
  for (int e = 0; e < b.E; ++e) {
    if (t.candidate[e] && t.p[e] > 0) {
      total += static_cast<double>(t.p[e]);
      max_p = std::max(max_p, t.p[e]);
    }
  }
  t.total = static_cast<float>(total);
  t.confidence = max_p / t.total;
  return t;
}

inline plan route(const batch& b, const policy& pol_in, int top_k) {
  policy pol = pol_in;
  bool decode_only = false;
  for (const auto& st : pol.sets) decode_only |= st.kind == "vote_drop" || st.kind == "confidence_keep";
  if (b.prefill && decode_only) {
    pol.sets = {stage{.kind = "topk_union"}};
    pol.k = 0;
    pol.max_rank = 1 << 20;
  }
  const int n = b.n, E = b.E;
  std::vector<token_info> info(n);
  for (int i = 0; i < n; ++i)
    if (b.valid(i)) info[i] = score_token(b, i);

  // gates over topk_i and column masses
  auto gate_of = [&](int i, int e) -> float {  // sparse gate
    const auto& t = info[i];
    bool in_top = false;
    for (int j = 0; j < top_k; ++j) in_top |= t.order[j] == e;
    if (!in_top) return 0.0f;
    // Softmax without a bias, finite top logit: the gate is exp(x - x_top1) renormalised over the
    // top-k (the softmax denominator cancels; docs/design.md). Otherwise p renormalised.
    const float* x = &b.x[static_cast<std::size_t>(i) * b.E];
    const float top = x[t.order[0]];
    std::vector<float> value(b.E, 0.0f);
    for (int j = 0; j < top_k; ++j) {
      const int expert = t.order[j];
      const bool relative = b.scoring == mode::softmax && b.bias.empty() && std::isfinite(top);
      value[expert] = relative ? std::exp(x[expert] - top) : t.p[expert];
    }
    float sum = 0;
    for (int j = 0; j < top_k; ++j) sum += std::max(0.0f, value[t.order[j]]);
    if (!(sum > 0) || std::isinf(sum)) return 1.0f / static_cast<float>(top_k);
    return std::max(0.0f, value[e]) / sum;
  };
  auto mass_of = [&](int i, int e, bool dense) -> std::int64_t {
    return dense ? fixed(info[i].p[e]) : fixed(gate_of(i, e));
  };
  auto column = [&](bool dense) {
    std::vector<std::int64_t> c(E, 0);
    for (int i = 0; i < n; ++i)
      if (b.valid(i))
        for (int e = 0; e < E; ++e) c[e] += mass_of(i, e, dense);
    return c;
  };
  auto in_topk = [&](int i, int e) {
    for (int j = 0; j < top_k; ++j)
      if (info[i].order[j] == e) return true;
    return false;
  };

  std::vector<bool> S(E, false), guaranteed_set(E, false);
  std::vector<int> depth(n, 0);
  auto guarantee = [&](int i, int ranks) {
    depth[i] = std::max(depth[i], ranks);
    for (int j = 0; j < ranks; ++j) {
      S[info[i].order[j]] = true;
      guaranteed_set[info[i].order[j]] = true;
    }
  };
  auto size_of = [&](const std::vector<bool>& set) {
    return static_cast<int>(std::count(set.begin(), set.end(), true));
  };

  for (const stage& st : pol.sets) {
    if (st.kind == "topk_union") {
      const int k = st.k == 0 ? top_k : st.k;
      for (int i = 0; i < n; ++i)
        if (b.valid(i))
          for (int j = 0; j < k; ++j) S[info[i].order[j]] = true;
    } else if (st.kind == "prune") {
      for (int i = 0; i < n; ++i) {
        if (!b.valid(i)) continue;
        const auto& t = info[i];
        int kp = st.k0;
        if (st.top_p < 1.0f && t.total > 0 && std::isfinite(t.total)) {
          float acc = 0;
          for (int j = 0; j < st.k0; ++j) {
            acc += std::max(0.0f, t.p[t.order[j]]);
            if (acc >= st.top_p * t.total) {
              kp = j + 1;
              break;
            }
          }
        }
        int kb = 1;
        while (kb < st.k0 && t.p[t.order[kb]] >= st.beta * t.p[t.order[0]]) ++kb;
        guarantee(i, std::min({st.k0, kp, kb}));
      }
    } else if (st.kind == "greedy_mass") {
      const auto c = column(st.dense);
      std::vector<int> order;
      for (int e = 0; e < E; ++e)
        if (!S[e] && c[e] > 0) order.push_back(e);
      std::sort(order.begin(), order.end(), [&](int a, int d) { return c[a] != c[d] ? c[a] > c[d] : a < d; });
      std::int64_t total = 0, held = 0;
      for (int e = 0; e < E; ++e) {
        total += c[e];
        if (S[e]) held += c[e];
      }
      for (std::size_t r = 0; r < order.size(); ++r) {
        if (st.add >= 0 && static_cast<int>(r) >= st.add) break;
        if (st.size >= 0 && size_of(S) >= st.size) break;
        if (st.mass >= 0 && static_cast<double>(held) >= static_cast<double>(st.mass) * static_cast<double>(total))
          break;
        S[order[r]] = true;
        held += c[order[r]];
      }
    } else if (st.kind == "per_request") {
      const int R = b.segments.empty() ? n : static_cast<int>(b.segments.size()) - 1;
      std::vector<bool> add(E, false);
      for (int r = 0; r < R; ++r) {
        const int lo = b.segments.empty() ? r : b.segments[r], hi = b.segments.empty() ? r + 1 : b.segments[r + 1];
        std::vector<bool> base(E, false);
        std::vector<std::int64_t> c(E, 0);
        for (int i = lo; i < hi; ++i) {
          if (!b.valid(i)) continue;
          guarantee(i, st.k0);
          for (int j = 0; j < st.k0; ++j) base[info[i].order[j]] = true;
          for (int e = 0; e < E; ++e) c[e] += mass_of(i, e, st.dense);
        }
        std::vector<int> order;
        for (int e = 0; e < E; ++e)
          if (!base[e] && c[e] > 0) order.push_back(e);
        std::sort(order.begin(), order.end(), [&](int a, int d) { return c[a] != c[d] ? c[a] > c[d] : a < d; });
        for (int j = 0; j < std::min<int>(st.m_r, static_cast<int>(order.size())); ++j) add[order[j]] = true;
      }
      for (int e = 0; e < E; ++e)
        if (add[e]) S[e] = true;
    } else if (st.kind == "ep_fill") {
      const auto c = column(st.dense);
      while (true) {
        bool added = false;
        for (int g = 0; g < b.G; ++g) {
          int load = 0;
          for (int e = 0; e < E; ++e) load += S[e] && b.placement[e] == g;
          if (load >= st.m_g) continue;
          int best = -1;
          for (int e = 0; e < E; ++e) {
            if (S[e] || b.placement[e] != g || c[e] <= 0) continue;
            if (best < 0 || c[e] > c[best]) best = e;
          }
          if (best >= 0) {
            S[best] = true;
            added = true;
          }
        }
        if (!added) break;
      }
    } else if (st.kind == "vote_drop") {
      const auto c = column(st.dense);
      std::vector<int> votes(E, 0);
      for (int i = 0; i < n; ++i)
        if (b.valid(i))
          for (int e = 0; e < E; ++e) votes[e] += in_topk(i, e);
      for (int drop = 0; drop < st.d; ++drop) {
        if (size_of(S) <= 1) break;
        int worst = -1;
        for (int e = 0; e < E; ++e) {
          if (!S[e] || guaranteed_set[e]) continue;
          if (worst < 0 || votes[e] < votes[worst] ||
              (votes[e] == votes[worst] && (c[e] < c[worst] || (c[e] == c[worst] && e > worst))))
            worst = e;
        }
        if (worst < 0) break;
        S[worst] = false;
      }
    } else if (st.kind == "confidence_keep") {
      const auto c = column(st.dense);
      std::vector<bool> important(n, false);
      bool any = false;
      for (int i = 0; i < n; ++i)
        if (b.valid(i) && info[i].confidence >= st.conf) {
          important[i] = true;
          any = true;
        }
      if (!any)
        for (int i = 0; i < n; ++i) important[i] = b.valid(i);
      std::vector<bool> kept(E, false);
      std::vector<int> votes(E, 0);
      for (int i = 0; i < n; ++i) {
        if (!important[i]) continue;
        kept[info[i].order[0]] = true;
        for (int e = 0; e < E; ++e) votes[e] += in_topk(i, e);
      }
      while (size_of(kept) < st.budget) {
        int best = -1;
        for (int e = 0; e < E; ++e) {
          if (kept[e] || votes[e] == 0) continue;
          if (best < 0 || votes[e] > votes[best] || (votes[e] == votes[best] && c[e] > c[best])) best = e;
        }
        if (best < 0) break;
        kept[best] = true;
      }
      S = kept;
    }
  }

  plan out;
  out.n = n;
  out.k = top_k;
  out.ids.assign(static_cast<std::size_t>(n) * top_k, -1);
  out.weights.assign(static_cast<std::size_t>(n) * top_k, 0.0f);
  out.counts.assign(n, 0);
  out.guaranteed = depth;
  out.S = S;
  out.active.assign(E, false);
  const int kr = pol.k == 0 ? top_k : pol.k;
  for (int i = 0; i < n; ++i) {
    if (!b.valid(i)) continue;
    const auto& t = info[i];
    std::vector<int> A;
    for (int r = 0; r < E && r < pol.max_rank && static_cast<int>(A.size()) < kr; ++r) {
      if (S[t.order[r]]) A.push_back(t.order[r]);
    }
    if (A.empty()) {
      for (int r = 0; r < E; ++r)
        if (S[t.order[r]]) {
          A.push_back(t.order[r]);
          break;
        }
    }
    std::vector<float> w(A.size());
    float sum = 0;
    for (std::size_t j = 0; j < A.size(); ++j) {
      w[j] = std::max(0.0f, t.p[A[j]]);
      if (std::isnan(t.p[A[j]])) w[j] = NAN;
      sum += w[j];
    }
    bool equal = !(sum > 0) || !std::isfinite(sum);
    for (std::size_t j = 0; j < A.size() && !equal; ++j) {
      w[j] = pol.raw ? w[j] * pol.scale : w[j] / sum * pol.scale;
      equal = !std::isfinite(w[j]);
    }
    if (equal)
      for (auto& v : w) v = pol.scale / static_cast<float>(A.size());
    out.counts[i] = static_cast<int>(A.size());
    for (std::size_t j = 0; j < A.size(); ++j) {
      out.ids[static_cast<std::size_t>(i) * top_k + j] = A[j];
      out.weights[static_cast<std::size_t>(i) * top_k + j] = w[j];
      out.active[A[j]] = true;
    }
  }
  out.selected = size_of(S);
  out.active_count = size_of(out.active);
  return out;
}

}  // namespace naive
