#pragma once
// Capacity re-routing written from its description alone (policies/capacity.hpp's file
// comment), sharing no code with the library: it walks each token's full ranking from the
// naive router instead of comparing rank keys, and counts loads with plain vectors.

#include <algorithm>
#include <cmath>
#include <vector>

#include "naive_router.hpp"

namespace naive {

/// The weighting of SPEC section 3 (renormalise or raw, times scale; equal shares when the
/// sum is not a positive finite number).
inline std::vector<float> weigh(const std::vector<float>& p_in, bool raw, float scale) {
  std::vector<float> w(p_in.size());
  double sum = 0;
  for (std::size_t j = 0; j < p_in.size(); ++j) {
    w[j] = std::max(p_in[j], 0.0f);
    sum += w[j];
  }
  bool equal = !(sum > 0) || !std::isfinite(static_cast<float>(sum));
  if (!equal) {
    for (auto& v : w) {
      v = raw ? v * scale : v / static_cast<float>(sum) * scale;
      equal = equal || !std::isfinite(v);
    }
  }
  if (equal) {
    for (auto& v : w) v = scale / static_cast<float>(w.size());
  }
  return w;
}

/// `routed` re-routed over capacity c. The batch must have no group limit (capacity ranks
/// S without one). Updates ids, weights, active and active_count; returns the loads.
inline std::vector<int> apply_capacity(const batch& b, plan& routed, int c, bool raw, float scale) {
  const int n = b.n, E = b.E, k = routed.k;
  std::vector<int> load(E, 0);
  std::vector<std::vector<int>> rows(n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < routed.counts[i]; ++j) rows[i].push_back(routed.ids[static_cast<std::size_t>(i) * k + j]);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < std::min(routed.guaranteed[i], routed.counts[i]); ++j) ++load[rows[i][j]];
  std::vector<bool> changed(n, false);
  std::vector<std::vector<float>> p_of(n);  // each token's p, by expert
  for (int i = 0; i < n; ++i) {
    p_of[i] = score_token(b, i).p;
    for (auto& v : p_of[i]) v = std::isnan(v) ? -INFINITY : v;  // NaN seats last
  }
  for (int j = 0; j < k; ++j) {
    // Round j's seat order: the token's p for its slot-j expert, highest first; equal p by
    // token index (so the order does not depend on where a request sits in the batch).
    std::vector<int> round;
    for (int i = 0; i < n; ++i)
      if (j < routed.counts[i] && j >= routed.guaranteed[i]) round.push_back(i);
    std::stable_sort(round.begin(), round.end(),
                     [&](int a, int z) { return p_of[a][rows[a][j]] > p_of[z][rows[z][j]]; });
    for (const int i : round) {
      const int e = rows[i][j];
      if (load[e] < c) {
        ++load[e];
        continue;
      }
      int pick = -1;
      for (const int f : score_token(b, i).order) {  // best rank first
        const bool in_row = std::find(rows[i].begin(), rows[i].end(), f) != rows[i].end();
        if (routed.S[f] && load[f] < c && !in_row) {
          pick = f;
          break;
        }
      }
      if (pick < 0) {
        ++load[e];
        continue;
      }
      rows[i][j] = pick;
      ++load[pick];
      changed[i] = true;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!changed[i]) continue;
    const token_info t = score_token(b, i);
    std::vector<int> position(E);
    for (int r = 0; r < E; ++r) position[t.order[r]] = r;
    std::sort(rows[i].begin(), rows[i].end(), [&](int a, int z) { return position[a] < position[z]; });
    std::vector<float> p;
    for (const int e : rows[i]) p.push_back(t.p[e]);
    const std::vector<float> w = weigh(p, raw, scale);
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      routed.ids[static_cast<std::size_t>(i) * k + j] = rows[i][j];
      routed.weights[static_cast<std::size_t>(i) * k + j] = w[j];
    }
  }
  routed.active.assign(E, false);
  routed.active_count = 0;
  for (int e = 0; e < E; ++e) {
    routed.active[e] = load[e] > 0;
    routed.active_count += load[e] > 0 ? 1 : 0;
  }
  return load;
}

}  // namespace naive
