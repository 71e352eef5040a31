// The reference grouped MoE executor against a naive per-token loop: the bodies every
// backend runs (tests/bodies/executor_check.hpp), the weight and activation types only the
// CPU executor has, and the CPU executor's own promises.

#include <sys/mman.h>
#include <unistd.h>
#include <bit>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>

#include <moe_routing/cpu/executor/moe_forward.hpp>

#include "backends/cpu_executor_runner.hpp"
#include "bodies/executor_check.hpp"
#include "naive_executor.hpp"
#include "plan_checks.hpp"

namespace {
namespace mr = test::mr;

using test::expert_bank;
using test::naive_forward;
using test::relative_error;
using test::view_of;

/// The parallel run and the fused gate_up layout give the very same bits as the
/// sequential run on separate matrices (every preset's plans, n 1..512, shared experts on
/// and off).
template <class Weight>
void check_bitwise_stable(std::uint32_t seed, int d, int h, int shared_h, bool bf16_activations) {
  std::mt19937 rng(seed);
  const int experts = 16, k = 4;
  const expert_bank<Weight> routed(experts, d, h, rng), shared(2, d, shared_h, rng);
  for (const int n : {1, 7, 64, 512}) {
    const test::layer_inputs inputs(n, d, experts, rng);
    const std::vector<float>& x = inputs.x;
    mr::cpu::executor_workspace ws({n, k, experts, d, h, 2, shared_h, bf16_activations});
    for (const char* text : test::bodies::executor_policies) {
      mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
      REQUIRE(mr::cpu::route(mr::parse_policy_or_throw(text), inputs.batch(), plan.view()).ok());
      for (const bool with_shared : {false, true}) {
        CAPTURE(n);
        CAPTURE(text);
        CAPTURE(with_shared);
        const auto* s = with_shared ? &shared : nullptr;
        std::vector<float> y(x.size()), y_fused(x.size()), y_par(x.size());
        REQUIRE(mr::cpu::moe_forward(x.data(), n, plan.view(), view_of(routed, false, s), y.data(), ws).ok());
        REQUIRE(mr::cpu::moe_forward(x.data(), n, plan.view(), view_of(routed, true, s), y_fused.data(), ws).ok());
        CHECK(y_fused == y);  // the fused gate_up layout computes the very same sums
        REQUIRE(mr::cpu::moe_forward(x.data(), n, plan.view(), view_of(routed, false, s), y_par.data(), ws,
                                     std::execution::par)
                    .ok());
        CHECK(y_par == y);  // deterministic across threads
      }
    }
  }
}

}  // namespace

MOE_ROUTING_EXECUTOR_TESTS(test::cpu_backend_runner)

// Only the CPU executor keeps float32 activations (for bfloat16 weights on request, for
// float16 weights always); the CUDA executor's cuBLAS GEMMs take both operands in the
// weight type, so these bodies are instantiated here only.
TEST_CASE("executor equals a naive per-token loop: bfloat16 weights, float32 activations") {
  test::bodies::executor_matches_naive_loop<test::cpu_backend_runner, mr::bfloat16>(2, 64, 48, 40, false);
}
TEST_CASE("executor equals a naive per-token loop: float16 weights") {
  test::bodies::executor_matches_naive_loop<test::cpu_backend_runner, mr::float16>(3, 64, 48, 40, false);
}

TEST_CASE("the CPU executor gives the same bits in parallel and in the fused gate_up layout") {
  check_bitwise_stable<float>(1, 64, 48, 40, false);
  check_bitwise_stable<mr::bfloat16>(2, 64, 48, 40, false);
  check_bitwise_stable<mr::bfloat16>(4, 64, 48, 40, true);
  check_bitwise_stable<mr::bfloat16>(5, 128, 64, 96, true);
  check_bitwise_stable<mr::float16>(3, 64, 48, 40, false);
}

TEST_CASE("experts that no token uses are never read (their weights trap on access)") {
  std::mt19937 rng(4);
  const int experts = 32, d = 64, h = 32, n = 24, k = 2;
  const expert_bank<mr::bfloat16> bank(experts, d, h, rng);
  // Logits that send every token to experts 0-7 only.
  std::vector<float> logits(static_cast<std::size_t>(n) * experts, -20.0f), x(static_cast<std::size_t>(n) * d);
  for (int i = 0; i < n; ++i)
    for (int e = 0; e < 8; ++e)
      logits[static_cast<std::size_t>(i) * experts + e] = std::normal_distribution<float>(0, 1)(rng);
  for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
  REQUIRE(mr::cpu::route(mr::presets::oea(1, k), batch, plan.view()).ok());
  // One PROT_NONE mapping large enough for any matrix: reading it kills the test.
  const std::size_t bytes = static_cast<std::size_t>(d) * h * 2 * sizeof(mr::bfloat16);
  void* trap = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(trap != MAP_FAILED);
  auto w = view_of<mr::bfloat16>(bank, false, nullptr);
  std::vector<const mr::bfloat16*> gate = bank.gate_p, up = bank.up_p, down = bank.down_p;
  int trapped = 0;
  for (int e = 0; e < experts; ++e) {
    if (plan.expert_tokens()[static_cast<std::size_t>(e)] == 0) {
      gate[static_cast<std::size_t>(e)] = up[static_cast<std::size_t>(e)] = down[static_cast<std::size_t>(e)] =
          static_cast<const mr::bfloat16*>(trap);
      ++trapped;
    }
  }
  CHECK(trapped >= 24);
  w.gate = gate.data(), w.up = up.data(), w.down = down.data();
  mr::cpu::executor_workspace ws({n, k, experts, d, h});
  std::vector<float> y(x.size());
  REQUIRE(mr::cpu::moe_forward(x.data(), n, plan.view(), w, y.data(), ws, std::execution::par).ok());
  CHECK(relative_error(y, naive_forward<mr::bfloat16>(x, plan, bank, nullptr, /*rounded=*/true)) < 1.0 / 256);
  ::munmap(trap, bytes);
}

TEST_CASE("executor bad input: mismatched shapes, ids beyond E, null pointers") {
  std::mt19937 rng(5);
  const expert_bank<float> bank(8, 32, 16, rng);
  std::vector<float> x(4 * 32, 0.5f), y(4 * 32), logits(4 * 16);
  for (auto& v : logits) v = std::normal_distribution<float>(0, 1)(rng);
  mr::routing_batch<float> batch{mr::make_score_view(logits.data(), 4, 16)};
  mr::routing_plan plan({.tokens = 4, .experts = 16, .top_k = 2});
  REQUIRE(mr::cpu::route(mr::presets::vanilla(2), batch, plan.view()).ok());
  auto w = view_of<float>(bank, false, nullptr);
  mr::cpu::executor_workspace ws({4, 2, 16, 32, 16});
  // The plan was routed over 16 experts; the weights hold 8.
  bool beyond = false;
  for (auto id : plan.ids()) beyond = beyond || id >= 8;
  REQUIRE(beyond);
  CHECK(mr::to_string(mr::cpu::moe_forward(x.data(), 4, plan.view(), w, y.data(), ws))
            .find("must be an expert index below weights.experts = 8") != std::string::npos);
  mr::routing_plan small({.tokens = 4, .experts = 8, .top_k = 2});
  mr::routing_batch<float> eight{mr::make_score_view(logits.data(), 4, 8, 16)};
  REQUIRE(mr::cpu::route(mr::presets::vanilla(2), eight, small.view()).ok());
  CHECK(mr::cpu::moe_forward(x.data(), 4, small.view(), w, y.data(), ws).ok());
  mr::cpu::executor_workspace other_d({4, 2, 16, 64, 16});
  CHECK(mr::to_string(mr::cpu::moe_forward(x.data(), 4, small.view(), w, y.data(), other_d)) ==
        "workspace too small: executor_shape.hidden = 64: must equal weights.hidden = 32");
  mr::cpu::executor_workspace few_tokens({2, 2, 16, 32, 16});
  CHECK(mr::to_string(mr::cpu::moe_forward(x.data(), 4, small.view(), w, y.data(), few_tokens)) ==
        "workspace too small: executor_shape.max_tokens = 2: must be at least n = 4");
  CHECK_THROWS_WITH_AS(
      mr::cpu::executor_workspace({-1, 2, 16, 32, 16}),
      "invalid parameter: executor_shape.max_tokens = -1: must be in [0, max_tokens] max_tokens = 16384",
      mr::routing_error);
  CHECK_THROWS_WITH_AS(
      mr::cpu::executor_workspace({4, 2, 16, -32, 16}),
      "invalid parameter: executor_shape.hidden = -32: must be in [1, max_executor_width] max_executor_width = 1048576",
      mr::routing_error);
  mr::plan_view negative = small.view();
  negative.tokens = -1;
  CHECK(mr::to_string(mr::cpu::moe_forward(x.data(), -1, negative, w, y.data(), ws)) ==
        "shape mismatch: n = -1: must be in [0, max_tokens] max_tokens = 16384");
  mr::plan_view no_width = small.view();
  no_width.top_k = -1;
  CHECK(mr::to_string(mr::cpu::moe_forward(x.data(), 4, no_width, w, y.data(), ws)) ==
        "invalid parameter: plan.top_k = -1: must be in [1, max_top_k] max_top_k = 32");
  CHECK(mr::to_string(mr::cpu::moe_forward(x.data(), 3, small.view(), w, y.data(), ws)) ==
        "shape mismatch: plan.tokens = 4: must equal n = 3");
  CHECK(mr::cpu::moe_forward(nullptr, 4, small.view(), w, y.data(), ws).code == mr::errc::null_pointer);
  auto broken = w;
  std::vector<const float*> gate = bank.gate_p;
  gate[3] = nullptr;
  broken.gate = gate.data();
  CHECK(mr::to_string(mr::cpu::moe_forward(x.data(), 4, small.view(), broken, y.data(), ws)) ==
        "null pointer: weights.gate = 3: has a null entry at this expert index");
  broken = w;
  broken.hidden = 0;
  CHECK(mr::to_string(mr::cpu::moe_forward(x.data(), 4, small.view(), broken, y.data(), ws)) ==
        "shape mismatch: weights.hidden = 0: must be positive");
}

TEST_CASE("executor bad input: a plan's non-finite weight, negative id or count above k is refused, y untouched") {
  std::mt19937 rng(6);
  const expert_bank<float> bank(8, 32, 16, rng);
  const test::layer_inputs inputs(4, 32, 8, rng);  // token 2 masked: a row of count 0
  const std::vector<float>& x = inputs.x;
  mr::routing_plan plan({.tokens = 4, .experts = 8, .top_k = 2});
  REQUIRE(mr::cpu::route(mr::presets::vanilla(2), inputs.batch(), plan.view()).ok());
  REQUIRE(plan.count(2) == 0);
  const auto w = view_of<float>(bank, false, nullptr);
  mr::cpu::executor_workspace ws({4, 2, 8, 32, 16});
  const std::vector<float> untouched(4 * 32, 7.0f);
  const auto refusal = [&](std::vector<float> weights, std::vector<std::int32_t> ids,
                           std::vector<std::int32_t> counts) {
    mr::plan_view view = plan.view();
    view.weights = weights.data(), view.ids = ids.data(), view.counts = counts.data();
    std::vector<float> y = untouched;
    const std::string message = mr::to_string(mr::cpu::moe_forward(x.data(), 4, view, w, y.data(), ws));
    if (message != "ok") CHECK(y == untouched);
    return message;
  };
  const std::vector<float> weights(plan.weights().begin(), plan.weights().end());
  const std::vector<std::int32_t> ids(plan.ids().begin(), plan.ids().end());
  const std::vector<std::int32_t> counts(plan.counts().begin(), plan.counts().end());
  REQUIRE(refusal(weights, ids, counts) == "ok");  // the plan as routed: the lambda changes nothing else
  const auto with_weight = [&](float bad) {
    auto changed = weights;
    changed[7] = bad;  // token 3, slot 1
    return refusal(changed, ids, counts);
  };
  CHECK(with_weight(std::numeric_limits<float>::quiet_NaN()) ==
        "invalid input: plan.weights[3][1]: is NaN: must be finite");
  CHECK(with_weight(std::numeric_limits<float>::infinity()) ==
        "invalid input: plan.weights[3][1] = inf: must be finite");
  CHECK(with_weight(-std::numeric_limits<float>::infinity()) ==
        "invalid input: plan.weights[3][1] = -inf: must be finite");
  auto negative = ids;
  negative[6] = -1;  // token 3, slot 0
  CHECK(refusal(weights, negative, counts) ==
        "invalid input: plan.ids[3][0] = -1: must be an expert index below weights.experts = 8");
  auto too_many = counts;
  too_many[3] = 3;
  CHECK(refusal(weights, ids, too_many) == "invalid input: plan.counts[3] = 3: must be in [0, k] k = 2");
  // A weight past the row's count is not part of the plan, whatever it holds: in a row cut
  // short, and in the masked token's row of count 0.
  auto short_rows = counts;
  short_rows[3] = 1;
  auto unused = weights;
  unused[7] = std::numeric_limits<float>::quiet_NaN();
  unused[4] = std::numeric_limits<float>::infinity();
  std::vector<float> y(4 * 32);
  mr::plan_view view = plan.view();
  view.weights = unused.data(), view.counts = short_rows.data();
  CHECK(mr::cpu::moe_forward(x.data(), 4, view, w, y.data(), ws).ok());
  for (const float v : y) REQUIRE(std::isfinite(v));
}

TEST_CASE("a shared experts' width left set in a view without shared experts changes nothing") {
  std::mt19937 rng(12);
  const expert_bank<mr::bfloat16> bank(8, 64, 48, rng), shared(1, 64, 96, rng);
  const test::layer_inputs inputs(7, 64, 8, rng);
  mr::routing_plan plan({.tokens = 7, .experts = 8, .top_k = 2});
  REQUIRE(mr::cpu::route(mr::presets::vanilla(2), inputs.batch(), plan.view()).ok());
  mr::cpu::executor_workspace ws({7, 2, 8, 64, 48});  // no room for wider experts
  auto w = view_of<mr::bfloat16>(bank, false, nullptr);
  std::vector<float> y(inputs.x.size()), y_stale(inputs.x.size());
  REQUIRE(mr::cpu::moe_forward(inputs.x.data(), 7, plan.view(), w, y.data(), ws).ok());
  CHECK(relative_error(y, naive_forward<mr::bfloat16>(inputs.x, plan, bank, nullptr, true)) < 1.0 / 256);
  w.shared_intermediate = 4096;  // a model config's shared width, copied into a view without shared experts
  const mr::status stale = mr::cpu::moe_forward(inputs.x.data(), 7, plan.view(), w, y_stale.data(), ws);
  REQUIRE_MESSAGE(stale.ok(), mr::to_string(stale));
  CHECK(y_stale == y);
  // With shared experts the workspace must have room for them (this one has none), and for
  // their width (the next one is too narrow).
  CHECK(mr::to_string(
            mr::cpu::moe_forward(inputs.x.data(), 7, plan.view(), view_of(bank, false, &shared), y.data(), ws)) ==
        "workspace too small: executor_shape.shared_experts = 0: must be at least weights.shared_experts = 1");
  mr::cpu::executor_workspace narrow_shared({7, 2, 8, 64, 48, 1, 0});
  CHECK(mr::to_string(mr::cpu::moe_forward(inputs.x.data(), 7, plan.view(), view_of(bank, false, &shared), y.data(),
                                           narrow_shared)) ==
        "workspace too small: executor_shape.shared_intermediate = 0: must be at least "
        "weights.shared_intermediate = 96");
}

namespace {

/// Lowers the CPU runner's kernel ceiling for one scope.
struct kernel_ceiling_scope {
  explicit kernel_ceiling_scope(mr::cpu::isa_level level) { set(level); }
  ~kernel_ceiling_scope() { set(mr::cpu::best_projection_level()); }
  kernel_ceiling_scope(const kernel_ceiling_scope&) = delete;
  kernel_ceiling_scope& operator=(const kernel_ceiling_scope&) = delete;

  static void set(mr::cpu::isa_level level) {
    test::cpu_backend_runner::executor<float>::kernel_ceiling = level;
    test::cpu_backend_runner::executor<mr::bfloat16>::kernel_ceiling = level;
    test::cpu_backend_runner::executor<mr::float16>::kernel_ceiling = level;
  }
};

/// The kernel a call with these weights ran, with the workspace forced to `level`: its level,
/// and its name in `name` when asked.
template <class Weight>
mr::cpu::isa_level kernel_that_ran(mr::cpu::isa_level level, int d, bool bf16_activations,
                                   std::string* name = nullptr) {
  std::mt19937 rng(9);
  const expert_bank<Weight> bank(4, d, 32, rng);
  mr::cpu::executor_workspace ws({2, 2, 4, d, 32, 0, 0, bf16_activations});
  ws.force_kernel(level);
  const std::vector<float> logits = {2, 1, 0, 0, 0, 1, 2, 0};
  const mr::routing_batch<float> batch{mr::make_score_view(logits.data(), 2, 4)};
  mr::routing_plan plan({.tokens = 2, .experts = 4, .top_k = 2});
  REQUIRE(mr::cpu::route(mr::presets::vanilla(2), batch, plan.view()).ok());
  std::vector<float> x(static_cast<std::size_t>(2) * d, 1.0f), y(x.size());
  REQUIRE(mr::cpu::moe_forward(x.data(), 2, plan.view(), view_of<Weight>(bank, false, nullptr), y.data(), ws).ok());
  if (name != nullptr) *name = ws.last_kernel_name();
  return ws.last_kernel();
}

/// The levels to test on this machine, each once: portable up to what the CPU runs.
std::vector<mr::cpu::isa_level> runnable_levels() {
  std::vector<mr::cpu::isa_level> levels;
  for (int l = 0; l <= static_cast<int>(mr::cpu::best_projection_level()); ++l)
    levels.push_back(static_cast<mr::cpu::isa_level>(l));
  return levels;
}

}  // namespace

// Shapes whose d and h are not multiples of the kernels' 8, 16 or 32 columns (row tails), nor
// of the 4-row and 2-row blocks (d = 70, h = 45: a short last block in every sweep), and n up
// to 512 (128 tokens per expert: many token groups over each item).
TEST_CASE("every projection kernel this CPU runs equals the naive loop") {
  namespace bodies = test::bodies;
  using runner = test::cpu_backend_runner;
  for (const mr::cpu::isa_level level : runnable_levels()) {
    const kernel_ceiling_scope scope(level);
    const std::string name = mr::cpu::name_of(level);
    CAPTURE(name);
    bodies::executor_matches_naive_loop<runner, float>(21, 72, 44, 40, false);
    bodies::executor_matches_naive_loop<runner, mr::float16>(22, 72, 44, 40, false);
    bodies::executor_matches_naive_loop<runner, mr::bfloat16>(23, 72, 44, 40, false);
    bodies::executor_matches_naive_loop<runner, mr::bfloat16>(24, 72, 44, 40, true);
    bodies::executor_matches_naive_loop<runner, mr::bfloat16>(25, 128, 64, 96, true);  // whole tiles
    bodies::executor_matches_naive_loop<runner, mr::bfloat16>(26, 64, 64, 40, true);   // tiles and rows in one call
    bodies::executor_matches_naive_loop<runner, float>(27, 70, 45, 40, false);         // short blocks
    bodies::executor_matches_naive_loop<runner, mr::bfloat16>(28, 70, 45, 40, true);
    // Rows narrower than any vector: every column and row in a kernel's tail.
    bodies::executor_matches_naive_loop<runner, float>(29, 1, 1, 1, false);
    bodies::executor_matches_naive_loop<runner, mr::float16>(30, 3, 2, 3, false);
    bodies::executor_matches_naive_loop<runner, mr::bfloat16>(31, 2, 3, 1, true);
    bodies::executor_matches_naive_loop<runner, mr::bfloat16>(32, 3, 1, 2, false);
  }
}

namespace {

/// Pair order as the kernels for bfloat16 weights without bfloat16 instructions take it, listed
/// here column by column: `order[p]` is the column at position p of a `cols`-wide row. In each
/// whole `group` columns (16 for AVX2, 32 for AVX-512) the even ones, then the odd ones; the rest
/// in place.
std::vector<int> pair_order_of(int cols, int group_columns) {
  std::vector<int> order;
  const int whole = cols / group_columns * group_columns;
  for (int group = 0; group < whole; group += group_columns) {
    for (int c = group; c < group + group_columns; c += 2) order.push_back(c);
    for (int c = group + 1; c < group + group_columns; c += 2) order.push_back(c);
  }
  for (int c = whole; c < cols; ++c) order.push_back(c);
  return order;
}

/// One row kernel's `sweep_rows` and `sweep_gate_up` over `Weight` weights against dot
/// products in double, written here: rows [row_begin, rows) of `cols`-wide matrices, `m`
/// tokens. Activation and output rows are longer than the sums need (padding that holds NaN),
/// so a sweep that mixes up a stride with a width reads NaN or writes where it must not. Each
/// output must be within 1e-5 times the sum of its products' magnitudes (float sums of exact
/// products), and the executor's epilogue (SwiGLU rounded to bfloat16) within half a bfloat16
/// step of silu(g) u from those sums; every output outside [row_begin, rows) must stay
/// unwritten. A kernel that takes pair order gets its activations in that order and writes its
/// SwiGLU values in it (`pair_order_of`).
template <class Weight, class Kernel>
void check_sweeps(Kernel kernel, int row_begin, int rows, int cols, int m, std::mt19937& rng) {
  using input = std::conditional_t<mr::cpu::takes_bf16_activations<Kernel>, mr::bfloat16, float>;
  const int x_stride = cols + 5, out_stride = rows + 3;
  const float unwritten = std::numeric_limits<float>::quiet_NaN();
  std::normal_distribution<float> noise(0.0f, 1.0f);
  // `columns` values of each of `count` rows `stride` apart, rounded to bfloat16 (so that
  // bf16 x bf16 products are those of the values stored), and the stored values decoded here
  // in double; NaN in the padding.
  const auto fill = [&]<class Value>(std::vector<Value>& values, std::vector<double>& exact, int count, int columns,
                                     int stride) {
    const auto as_value = [](float v) {
      if constexpr (std::is_same_v<Value, float>) {
        return v;
      } else if constexpr (std::is_same_v<Value, mr::float16>) {
        return mr::to_float16(v);
      } else {
        return mr::to_bfloat16(v);
      }
    };
    const auto decoded = [](Value v) {  // no "-> double": GCC 12 then warns of a missing return
      if constexpr (std::is_same_v<Value, float>) {
        return static_cast<double>(v);
      } else if constexpr (std::is_same_v<Value, mr::float16>) {
        return static_cast<double>(test::decode_f16(v.bits));
      } else {
        return static_cast<double>(test::decode_bf16(v.bits));
      }
    };
    values.assign(static_cast<std::size_t>(count) * stride, as_value(unwritten));
    exact.assign(values.size(), 0.0);
    for (int row = 0; row < count; ++row) {
      for (int c = 0; c < columns; ++c) {
        const std::size_t at = static_cast<std::size_t>(row) * stride + c;
        values[at] = as_value(static_cast<float>(test::round_to_bf16(noise(rng))));
        exact[at] = decoded(values[at]);
      }
    }
  };
  std::vector<Weight> gate, up;
  std::vector<input> x;
  std::vector<double> gate_d, up_d, x_d;
  fill(gate, gate_d, rows, cols, cols);
  fill(up, up_d, rows, cols, cols);
  fill(x, x_d, m, cols, x_stride);
  // dot(row r of w, token t) and the sum of its products' magnitudes.
  const auto dot = [&](const std::vector<double>& w, int r, int t, double& magnitude) {
    double sum = 0;
    magnitude = 0;
    for (int c = 0; c < cols; ++c) {
      const double product =
          w[static_cast<std::size_t>(r) * cols + c] * x_d[static_cast<std::size_t>(t) * x_stride + c];
      sum += product, magnitude += std::abs(product);
    }
    return sum;
  };
  // The kernel's activations: x as it is, or each row's first `cols` columns in pair order;
  // `act_at[r]`: where the sweep writes row r's SwiGLU value in an activation row `rows` wide.
  constexpr bool paired = mr::cpu::takes_paired_activations<Kernel>;
  std::vector<input> x_in = x;
  std::vector<int> act_at(static_cast<std::size_t>(out_stride));
  std::iota(act_at.begin(), act_at.end(), 0);
  if (paired) {
    constexpr int group = mr::cpu::pair_group_columns_of<Kernel>;
    const std::vector<int> order = pair_order_of(cols, group), act_order = pair_order_of(rows, group);
    for (int t = 0; t < m; ++t) {
      for (int p = 0; p < cols; ++p) x_in[static_cast<std::size_t>(t) * x_stride + p] = x[t * x_stride + order[p]];
    }
    for (int p = 0; p < rows; ++p) act_at[act_order[p]] = p;
  }
  std::vector<float> out(static_cast<std::size_t>(m) * out_stride, unwritten), act(out.size(), unwritten);
  mr::cpu::sweep_rows(kernel, gate.data(), row_begin, rows, cols, x_in.data(), x_stride, m, out.data(), out_stride);
  mr::cpu::sweep_gate_up(
      kernel, gate.data(), up.data(), row_begin, rows, cols, x_in.data(), x_stride, m, act.data(), out_stride, rows,
      [](float g, float u) { return g - 2.0f * u; }, [](float v) { return v; });
  // SwiGLU rounded to bfloat16, the epilogue the executor gives the bfloat16 kernels (for the
  // float kernels it widens the rounded value back to float).
  std::vector<mr::bfloat16> rounded_act(out.size(), mr::to_bfloat16(unwritten));
  mr::cpu::sweep_gate_up(kernel, gate.data(), up.data(), row_begin, rows, cols, x_in.data(), x_stride, m,
                         rounded_act.data(), out_stride, rows, mr::cpu::swiglu,
                         [](float v) { return mr::to_bfloat16(v); });
  int wrong = 0, written_outside = 0;
  for (int t = 0; t < m; ++t) {
    for (int r = 0; r < out_stride; ++r) {
      const std::size_t at = static_cast<std::size_t>(t) * out_stride + r;
      const std::size_t act_index = static_cast<std::size_t>(t) * out_stride + act_at[static_cast<std::size_t>(r)];
      if (r < row_begin || r >= rows) {
        written_outside += !std::isnan(out[at]) + !std::isnan(act[act_index]) +
                           !std::isnan(test::decode_bf16(rounded_act[act_index].bits));
        continue;
      }
      double g_size = 0, u_size = 0;
      const double g = dot(gate_d, r, t, g_size), u = dot(up_d, r, t, u_size);
      const bool row_ok = std::abs(out[at] - g) <= 1e-5 * g_size;
      const bool act_ok = std::abs(act[act_index] - (g - 2 * u)) <= 1e-5 * (g_size + 2 * u_size);
      // silu(g) u from sums within 1e-5 of their magnitudes (silu's slope stays below 1.1),
      // then rounded to bfloat16: at most half a step, 2^-8 of the value.
      const double silu = g / (1 + std::exp(-g)), expected = silu * u;
      const double from_sums = 1e-5 * (1.1 * std::abs(u) * g_size + std::abs(silu) * u_size);
      const bool rounded_ok = std::abs(test::decode_bf16(rounded_act[act_index].bits) - expected) <=
                              std::abs(expected) * (1.0 / 256 + 1e-6) + 2 * from_sums;
      wrong += !row_ok || !act_ok || !rounded_ok;  // false for NaN too
    }
  }
  const std::string weights = std::is_same_v<Weight, float>         ? "float"
                              : std::is_same_v<Weight, mr::float16> ? "float16"
                                                                    : "bfloat16";
  CAPTURE(weights);
  CAPTURE(row_begin);
  CAPTURE(rows);
  CAPTURE(cols);
  CAPTURE(m);
  CHECK(wrong == 0);
  CHECK(written_outside == 0);
}

}  // namespace

// Rows over a thousand columns wide (1100: a last step short of every kernel's 8, 16 and 32
// columns) and up to 50 tokens (9 to 25 tiles, depending on the kernel's tile: every pass's
// prefetch mode), which the executor tests' small shapes do not reach, an activation that
// tells gate from up, and the executor's SwiGLU in bfloat16.
TEST_CASE("every row kernel's sweeps equal dot products in double on wide rows and many tokens") {
  std::mt19937 rng(31);
  const auto check_weight = [&]<class Weight>(mr::cpu::isa_level level, Weight) {
    const auto check_kernel = [&](auto kernel) {
      if constexpr (mr::cpu::row_kernel<decltype(kernel)>) {
        for (const int m : {1, 6, 7, 13, 24, 25, 50}) check_sweeps<Weight>(kernel, 0, 37, 1100, m, rng);
        check_sweeps<Weight>(kernel, 5, 37, 1100, 13, rng);  // a sweep that starts past row 0
        check_sweeps<Weight>(kernel, 0, 19, 70, 30, rng);    // rows shorter than the prefetch distance
        // A last 16 to 31 columns (AVX2's pair-order group, and AVX-512's tail of a whole 16
        // and a masked rest) and a tail; rows of one whole group and a half; rows of 20 and 31
        // columns (no whole AVX-512 group); rows narrower than any vector.
        check_sweeps<Weight>(kernel, 0, 21, 1110, 5, rng);
        check_sweeps<Weight>(kernel, 0, 13, 20, 4, rng);
        check_sweeps<Weight>(kernel, 0, 11, 31, 1, rng);
        check_sweeps<Weight>(kernel, 0, 18, 48, 3, rng);
        check_sweeps<Weight>(kernel, 0, 9, 7, 4, rng);
        check_sweeps<Weight>(kernel, 3, 29, 100, 2, rng);  // 2 tokens (wide tiles where a kernel has them)
        // One token on short rows with a masked rest, and on rows narrower than a vector (in
        // address order where a kernel reads one-token rows so and the process streams into L2).
        // Rows of 48 (a whole step, then a masked one), 96 and 128 columns (whole steps only).
        for (const int cols : {70, 7, 48, 96, 128}) check_sweeps<Weight>(kernel, 2, 19, cols, 1, rng);
      }
    };
    mr::cpu::with_projection_kernel<Weight>(level, check_kernel);
#if MOE_ROUTING_X86_KERNELS
    // The widening kernels also take bfloat16 weights (the executor gives them the pair-order
    // kernels; the benchmarks compare the two).
    if (std::is_same_v<Weight, mr::bfloat16>) {
      if (level == mr::cpu::isa_level::avx2) check_kernel(mr::cpu::avx2_kernel{});
      if (level == mr::cpu::isa_level::avx512) check_kernel(mr::cpu::avx512_kernel{});
    }
#endif
  };
  for (const mr::cpu::isa_level level : runnable_levels()) {
    const std::string name = mr::cpu::name_of(level);
    CAPTURE(name);
    check_weight(level, mr::bfloat16{});
    check_weight(level, mr::float16{});
    check_weight(level, 0.0f);
  }
}

TEST_CASE("a forced kernel is the one that runs, and the bfloat16 kernels only for bf16 x bf16 products") {
  using mr::cpu::isa_level;
  for (const isa_level level : runnable_levels()) {
    const std::string name = mr::cpu::name_of(level);
    CAPTURE(name);
    const isa_level float_level = std::min(level, isa_level::avx512);
    CHECK(kernel_that_ran<float>(level, 64, true) == float_level);
    CHECK(kernel_that_ran<mr::float16>(level, 64, true) == float_level);
    CHECK(kernel_that_ran<mr::bfloat16>(level, 64, false) == float_level);
    CHECK(kernel_that_ran<mr::bfloat16>(level, 64, true) == level);
    // AMX needs d in whole tiles; otherwise the call takes vdpbf16ps.
    CHECK(kernel_that_ran<mr::bfloat16>(level, 72, true) == std::min(level, isa_level::avx512_bf16));
  }
}

TEST_CASE("at avx2 and avx512, bfloat16 weights take the pair-order kernel and other weights the widening one") {
  using mr::cpu::isa_level;
  struct names {
    isa_level level;
    const char* bf16_kernel;
    const char* other_kernel;
  };
  for (const names expected :
       {names{isa_level::avx2, "avx2_bf16", "avx2"}, names{isa_level::avx512, "avx512_pairs", "avx512"}}) {
    const std::string level = mr::cpu::name_of(expected.level);
    CAPTURE(level);
    if (mr::cpu::best_projection_level() < expected.level) {
      MESSAGE("skipped at " << level << ": this CPU does not run it");
      continue;
    }
    std::string name;
    for (const bool bf16_activations : {false, true}) {
      CHECK(kernel_that_ran<mr::bfloat16>(expected.level, 64, bf16_activations, &name) == expected.level);
      CHECK(name == expected.bf16_kernel);
    }
    CHECK(kernel_that_ran<mr::float16>(expected.level, 64, true, &name) == expected.level);
    CHECK(name == expected.other_kernel);
    CHECK(kernel_that_ran<float>(expected.level, 64, false, &name) == expected.level);
    CHECK(name == expected.other_kernel);
  }
}

namespace {

/// `write_in_pair_order` and `paired_column` with groups of `Group` columns against
/// `pair_order_of`, for rows of 0 to 100 columns.
template <int Group>
void check_pair_order() {
  CAPTURE(Group);
  for (int cols = 0; cols <= 100; ++cols) {
    CAPTURE(cols);
    const std::vector<int> order = pair_order_of(cols, Group);
    std::vector<int> written(static_cast<std::size_t>(cols), -1);
    mr::cpu::write_in_pair_order<Group>(written.data(), cols, [](int c) { return c; });
    CHECK(written == order);
    int misplaced = 0;
    for (int p = 0; p < cols; ++p) {
      misplaced += mr::cpu::paired_column<Group>(order[static_cast<std::size_t>(p)], cols) != p;
    }
    CHECK(misplaced == 0);
  }
}

}  // namespace

TEST_CASE("pair order: each whole group's even columns, then its odd ones, the rest in place") {
  check_pair_order<mr::cpu::pair_group_columns>();
  check_pair_order<mr::cpu::wide_pair_group_columns>();
  // By hand: the first group of a 20-column row, then its last 4 columns in place; AVX-512's
  // group of 32, then 3 columns in place.
  CHECK(pair_order_of(20, 16) ==
        std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 16, 17, 18, 19});
  CHECK(pair_order_of(35, 32) == std::vector<int>{0, 2, 4, 6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 1, 3,
                                                  5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 32, 33, 34});
  CHECK(mr::cpu::pair_group_columns_of<mr::cpu::avx2_bf16_kernel> == 16);
  CHECK(mr::cpu::pair_group_columns_of<mr::cpu::avx512_pairs_kernel> == 32);
  CHECK(mr::cpu::pair_group_columns_of<mr::cpu::avx512_kernel> == 0);
}

TEST_CASE("forcing a kernel this CPU does not run is refused, naming it") {
  using mr::cpu::isa_level;
  const isa_level best = mr::cpu::best_projection_level();
  if (best == isa_level::amx) {
    MESSAGE("skipped: this CPU runs every kernel (set MOE_ROUTING_CPU_ISA lower to test the refusal)");
    return;
  }
  mr::cpu::executor_workspace ws({1, 1, 1, 8, 8, 0, 0, true});
  const auto above = static_cast<isa_level>(static_cast<int>(best) + 1);
  CHECK_THROWS_WITH_AS(ws.force_kernel(above),
                       (std::string("executor kernel = ") + mr::cpu::name_of(above) + ": this CPU runs at most " +
                        mr::cpu::name_of(mr::cpu::cpu_isa()))
                           .c_str(),
                       mr::routing_error);
}

TEST_CASE("the AMX tiles' packed copy keeps each tile row's 16 tokens x 2 columns together") {
  // The packed copy keeps each tile row's 16 tokens x 2 columns together.
  CHECK(mr::cpu::amx::packed_index(0, 0, 64) == 0);
  CHECK(mr::cpu::amx::packed_index(0, 1, 64) == 1);
  CHECK(mr::cpu::amx::packed_index(1, 0, 64) == 2);
  CHECK(mr::cpu::amx::packed_index(0, 2, 64) == 32);
  CHECK(mr::cpu::amx::packed_index(16, 0, 64) == 16 * 64);
}

TEST_CASE("work items are listed busiest group first, each active group's row blocks once and together") {
  // Twenty groups (more than std::sort's insertion-sort cutoff, so ties meet the real sort)
  // whose pair counts tie, skip zeros and are out of order; widths that make 1 to 3 gate/up
  // blocks (2 x width rows each, 32 rows per block).
  const std::vector<int> pairs = {3, 0, 7, 3, 1, 7, 0, 2, 9, 1, 3, 5, 2, 3, 7, 0, 1, 3, 2, 9};
  const std::vector<int> widths = {16, 40, 48, 16, 17, 33, 16, 16, 20, 47, 16, 40, 48, 16, 17, 33, 16, 16, 20, 47};
  const int groups = static_cast<int>(pairs.size());
  mr::cpu::executor_workspace ws({8, 2, groups, 64, 48});
  for (int g = 0; g < groups; ++g) {
    ws.jobs[static_cast<std::size_t>(g)].pairs = pairs[static_cast<std::size_t>(g)];
    ws.jobs[static_cast<std::size_t>(g)].width = widths[static_cast<std::size_t>(g)];
  }
  mr::cpu::order_groups_busiest_first(ws, groups);
  const auto rows_of = [](const mr::cpu::expert_job& job) { return 2 * job.width; };
  const std::size_t count = mr::cpu::list_work_items(ws, groups, rows_of);

  // The naive list: repeatedly the unlisted group with the most pairs (the lowest index among
  // equals), all its blocks in order; groups without pairs never.
  std::vector<mr::cpu::work_item> expected;
  std::vector<bool> listed(pairs.size(), false);
  for (int round = 0; round < groups; ++round) {
    int best = -1;
    for (int g = 0; g < groups; ++g) {
      if (!listed[static_cast<std::size_t>(g)] &&
          (best < 0 || pairs[static_cast<std::size_t>(g)] > pairs[static_cast<std::size_t>(best)]))
        best = g;
    }
    listed[static_cast<std::size_t>(best)] = true;
    if (pairs[static_cast<std::size_t>(best)] == 0) continue;
    const int rows = 2 * widths[static_cast<std::size_t>(best)];
    for (int b = 0; b * mr::cpu::rows_per_item < rows; ++b) expected.push_back({best, b});
  }
  REQUIRE(count == expected.size());
  for (std::size_t i = 0; i < count; ++i) {
    CAPTURE(i);
    CHECK(ws.items[i].group == expected[i].group);
    CHECK(ws.items[i].block == expected[i].block);
  }
  // Hand-worked: groups 8 and 19 have 9 pairs each; 8 (2 x 20 = 40 rows: 2 blocks) leads,
  // then 19 (94 rows: 3 blocks), then group 2, the first of those with 7.
  CHECK(ws.items[0].group == 8);
  CHECK(ws.items[1].group == 8);
  CHECK(ws.items[1].block == 1);
  CHECK(ws.items[2].group == 19);
  CHECK(ws.items[5].group == 2);
}

TEST_CASE("a call lists its busiest expert's work items first") {
  std::mt19937 rng(9);
  const int experts = 16, d = 64, h = 32, n = 12, k = 2;
  const expert_bank<mr::bfloat16> bank(experts, d, h, rng);
  // Every token's first choice is expert 11; its second one of experts 0-3.
  std::vector<float> logits(static_cast<std::size_t>(n) * experts, -20.0f), x(static_cast<std::size_t>(n) * d, 0.5f);
  for (int i = 0; i < n; ++i) {
    logits[static_cast<std::size_t>(i) * experts + 11] = 5.0f;
    logits[static_cast<std::size_t>(i) * experts + static_cast<std::size_t>(i % 4)] = 4.0f;
  }
  mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
  REQUIRE(mr::cpu::route(mr::presets::vanilla(k), batch, plan.view()).ok());
  REQUIRE(plan.expert_tokens()[11] == n);
  mr::cpu::executor_workspace ws({n, k, experts, d, h});
  std::vector<float> y(x.size());
  REQUIRE(
      mr::cpu::moe_forward(x.data(), n, plan.view(), view_of<mr::bfloat16>(bank, false, nullptr), y.data(), ws).ok());
  // The last listing (the down projection's) is still in the workspace.
  CHECK(ws.items[0].group == 11);
  CHECK(ws.items[1].group == 11);
}

// Where each pass prefetches, against the rule written out naively: the first pass asks for
// the element `ahead` bytes further along the row (1 KiB streaming into L1; into L2, 8 KiB over
// the block's rows: 2 KiB a row in blocks of 4, 1 KiB in the wide tiles' 8), or, past the row's
// end, the same distance on into the same row of the next block; the second pass the same
// column of the row `run_ahead_blocks` blocks on (a pass that runs ahead over one row, the same);
// later passes nothing (distance 0). The kernels add the distance to each row's element c, so a
// wrong distance would stream the wrong lines (slower, never wrong sums: no sum test sees it).
TEST_CASE("the prefetch distance points at the line each pass streams") {
  using mr::cpu::prefetch_mode;
  const auto check = [&]<class Weight, int Rows>(Weight, std::integral_constant<int, Rows>) {
    constexpr int size = static_cast<int>(sizeof(Weight));
    constexpr int ahead_to_l1 = 1024 / size, ahead_to_l2 = 8192 / Rows / size;
    for (const int cols : {7, 70, 512, 1100, 2048}) {
      constexpr int blocks = 5;
      std::vector<Weight> matrix(static_cast<std::size_t>(blocks + 1) * Rows * cols);
      // As integers: for rows shorter than the prefetch distance the streamed element lies past
      // the matrix's end, where no pointer may point.
      const auto address_of = [&](int block, int i, int column) {
        const std::ptrdiff_t element = (static_cast<std::ptrdiff_t>(block) * Rows + i) * cols + column;
        return reinterpret_cast<std::uintptr_t>(matrix.data()) + static_cast<std::uintptr_t>(element) * sizeof(Weight);
      };
      const auto streamed = [&](int i, int c, int ahead) {
        const int at = c + ahead;
        return at < cols ? address_of(0, i, at) : address_of(1, i, at - cols);
      };
      mr::cpu::row_block<Weight, Rows> block;
      for (int i = 0; i < Rows; ++i) block.rows[i] = matrix.data() + std::ptrdiff_t{i} * cols;
      block.next_block_bytes = std::ptrdiff_t{Rows} * cols * std::ptrdiff_t{sizeof(Weight)};
      block.run_ahead_blocks = blocks;
      int wrong = 0;
      for (int c = 0; c < cols; ++c) {
        const std::ptrdiff_t stream = mr::cpu::prefetch_distance<prefetch_mode::stream>(block, c, cols),
                             stream_to_l2 = mr::cpu::prefetch_distance<prefetch_mode::stream_to_l2>(block, c, cols),
                             run_ahead = mr::cpu::prefetch_distance<prefetch_mode::run_ahead>(block, c, cols),
                             run_ahead_row = mr::cpu::prefetch_distance<prefetch_mode::run_ahead_row>(block, c, cols),
                             none = mr::cpu::prefetch_distance<prefetch_mode::none>(block, c, cols);
        for (int i = 0; i < Rows; ++i) {
          wrong += mr::cpu::address_on(block.rows[i] + c, stream) != streamed(i, c, ahead_to_l1);
          wrong += mr::cpu::address_on(block.rows[i] + c, stream_to_l2) != streamed(i, c, ahead_to_l2);
          wrong += mr::cpu::address_on(block.rows[i] + c, run_ahead) != address_of(blocks, i, c);
          wrong += mr::cpu::address_on(block.rows[i] + c, run_ahead_row) != address_of(blocks, i, c);
        }
        wrong += none != 0;
      }
      CAPTURE(sizeof(Weight));
      CAPTURE(Rows);
      CAPTURE(cols);
      CHECK(wrong == 0);
    }
  };
  check(float{}, std::integral_constant<int, mr::cpu::block_rows>{});
  check(mr::bfloat16{}, std::integral_constant<int, mr::cpu::block_rows>{});
  check(float{}, std::integral_constant<int, mr::cpu::wide_block_rows>{});
  check(mr::bfloat16{}, std::integral_constant<int, mr::cpu::wide_block_rows>{});
}

// Which lines each prefetch mode asks for, recorded through `prefetch_lines`'s sink and checked
// against the rule written out here: the first pass's modes every row at every column they are
// called for (into L1, or L2 when streaming there); running ahead over the whole block every
// row, and running ahead one row only row `pass - 1`, both once per 64 bytes of columns and into
// L2; computing only, nothing. Which mode each pass takes is checked in "a pass's prefetch mode
// follows the block's pass and stream cache". A wrong row or cache would only slow the kernels.
TEST_CASE("each pass prefetches the rows, lines and cache its mode names") {
  using mr::cpu::prefetch_mode;
  struct asked {
    std::uintptr_t address;
    int locality;
    bool operator==(const asked&) const = default;
  };
  const auto check = [&]<class Weight, int Rows>(Weight, std::integral_constant<int, Rows>) {
    constexpr int cols = 300, line_columns = 64 / static_cast<int>(sizeof(Weight));
    std::vector<Weight> matrix(static_cast<std::size_t>(Rows) * cols);
    mr::cpu::row_block<Weight, Rows> block;
    for (int i = 0; i < Rows; ++i) block.rows[i] = matrix.data() + std::ptrdiff_t{i} * cols;
    block.one_row_per_pass = true;
    const std::ptrdiff_t distance = 4096 + 64;  // any distance: each address is row + c + it
    const auto address = [&](int i, int c) {
      return reinterpret_cast<std::uintptr_t>(matrix.data()) +
             static_cast<std::uintptr_t>((std::ptrdiff_t{i} * cols + c) * std::ptrdiff_t{sizeof(Weight)} + distance);
    };
    const auto recorded = [&]<prefetch_mode Mode>(std::integral_constant<prefetch_mode, Mode>, int pass) {
      block.pass = pass;
      std::vector<asked> lines;
      for (int c = 0; c < cols; ++c) {
        mr::cpu::prefetch_lines<Mode>(block, c, distance,
                                      [&]<int L>(std::uintptr_t at, std::integral_constant<int, L>) {
                                        lines.push_back({at, L});
                                      });
      }
      return lines;
    };
    const auto expected = [&](bool every_column, int first_row, int end_row, int locality) {
      std::vector<asked> lines;
      for (int c = 0; c < cols; ++c) {
        if (!every_column && c % line_columns != 0) continue;
        for (int i = first_row; i < end_row; ++i) lines.push_back({address(i, c), locality});
      }
      return lines;
    };
    using stream = std::integral_constant<prefetch_mode, prefetch_mode::stream>;
    using stream_to_l2 = std::integral_constant<prefetch_mode, prefetch_mode::stream_to_l2>;
    using run_ahead = std::integral_constant<prefetch_mode, prefetch_mode::run_ahead>;
    using run_ahead_row = std::integral_constant<prefetch_mode, prefetch_mode::run_ahead_row>;
    using none = std::integral_constant<prefetch_mode, prefetch_mode::none>;
    CAPTURE(sizeof(Weight));
    CAPTURE(Rows);
    CHECK(recorded(stream{}, 0) == expected(true, 0, Rows, 3));
    CHECK(recorded(stream_to_l2{}, 0) == expected(true, 0, Rows, 2));
    CHECK(recorded(run_ahead{}, 1) == expected(false, 0, Rows, 2));
    for (int pass = 1; pass <= Rows; ++pass) {
      CAPTURE(pass);
      CHECK(recorded(run_ahead_row{}, pass) == expected(false, pass - 1, pass, 2));
    }
    CHECK(recorded(none{}, Rows + 1).empty());
  };
  check(float{}, std::integral_constant<int, mr::cpu::block_rows>{});
  check(mr::bfloat16{}, std::integral_constant<int, mr::cpu::block_rows>{});
  check(float{}, std::integral_constant<int, mr::cpu::wide_block_rows>{});
  check(mr::bfloat16{}, std::integral_constant<int, mr::cpu::wide_block_rows>{});
}

// A kernel that only records the tiles a sweep hands it, in either order (its
// `default_sweep_order`, or `MOE_ROUTING_SWEEP_ORDER`'s), to check the sweep's loops without a
// real kernel's sums.
namespace {
namespace sweep_order_test {
struct tile_visit {
  std::ptrdiff_t first_row;
  int pass;
  std::ptrdiff_t first_token;  // which activation rows the tile was handed
  int tokens;
  int run_ahead_blocks;
  bool streams_to_l2 = false;
  bool one_row_per_pass = false;
};
std::vector<tile_visit> visits;
const float* matrix_start = nullptr;
const float* x_start = nullptr;
constexpr int cols = 64;

template <bool BlocksFirst>
struct recording_kernel {};
template <bool BlocksFirst>
constexpr int tile_tokens_of(recording_kernel<BlocksFirst>) noexcept {
  return 2;
}
template <bool BlocksFirst>
constexpr mr::cpu::sweep_order default_sweep_order(recording_kernel<BlocksFirst>, bool) noexcept {
  return BlocksFirst ? mr::cpu::sweep_order::blocks_first : mr::cpu::sweep_order::groups_first;
}
template <bool BlocksFirst>
void multiply_tile(recording_kernel<BlocksFirst>, const mr::cpu::row_block<float>& block, int, const float* x,
                   std::ptrdiff_t x_stride, int tokens, mr::cpu::tile_sums&) {
  visits.push_back({(block.rows[0] - matrix_start) / cols, block.pass, (x - x_start) / x_stride, tokens,
                    block.run_ahead_blocks, block.streams_to_l2, block.one_row_per_pass});
}
}  // namespace sweep_order_test
}  // namespace

namespace {
TEST_CASE(
    "a sweep hands out its tiles in the kernel's order, the passes that run ahead asking for the rows taken next") {
  using namespace sweep_order_test;
  // 10 rows: blocks at rows 0, 4 and 8 (the last one short). 5 tokens in tiles of at most 2:
  // passes of 2, 2 and 1 tokens, from activation rows 0, 2 and 4.
  constexpr int rows = 10, m = 5;
  std::vector<float> matrix(static_cast<std::size_t>(rows) * cols), x(static_cast<std::size_t>(m) * cols),
      out(static_cast<std::size_t>(m) * rows);
  matrix_start = matrix.data();
  x_start = x.data();
  // {first row, pass, first token, tokens, run-ahead blocks}, written out.
  const std::vector<tile_visit> blocks_first = {{0, 0, 0, 2, 1}, {0, 1, 2, 2, 1}, {0, 2, 4, 1, 1},
                                                {4, 0, 0, 2, 1}, {4, 1, 2, 2, 1}, {4, 2, 4, 1, 1},
                                                {8, 0, 0, 2, 1}, {8, 1, 2, 2, 1}, {8, 2, 4, 1, 1}};
  const std::vector<tile_visit> groups_first = {{0, 0, 0, 2, 3}, {4, 0, 0, 2, 3}, {8, 0, 0, 2, 3},
                                                {0, 1, 2, 2, 3}, {4, 1, 2, 2, 3}, {8, 1, 2, 2, 3},
                                                {0, 2, 4, 1, 3}, {4, 2, 4, 1, 3}, {8, 2, 4, 1, 3}};
  const auto check_visits = [&](const std::vector<tile_visit>& want) {
    REQUIRE(visits.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);  // field by field, so a failure names the tile and what differs
      CHECK(visits[i].first_row == want[i].first_row);
      CHECK(visits[i].pass == want[i].pass);
      CHECK(visits[i].first_token == want[i].first_token);
      CHECK(visits[i].tokens == want[i].tokens);
      CHECK(visits[i].run_ahead_blocks == want[i].run_ahead_blocks);
      // Every tile is told where this process streams (`MOE_ROUTING_STREAM_CACHE` or the CPU's
      // default); only the first pass's prefetches use it.
      CHECK(visits[i].streams_to_l2 == (mr::cpu::weight_stream_cache() == mr::cpu::stream_cache::l2));
      // And how its later passes run ahead (`MOE_ROUTING_RUN_AHEAD` or the CPU's default).
      CHECK(visits[i].one_row_per_pass == (mr::cpu::weight_run_ahead() == mr::cpu::run_ahead_style::one_row_per_pass));
    }
  };
  // The kernel's own order, unless MOE_ROUTING_SWEEP_ORDER names one for every kernel.
  const char* forced = std::getenv("MOE_ROUTING_SWEEP_ORDER");
  const auto expected = [&](bool kernel_blocks_first) -> const std::vector<tile_visit>& {
    if (forced != nullptr && *forced != '\0') return std::string(forced) == "blocks" ? blocks_first : groups_first;
    return kernel_blocks_first ? blocks_first : groups_first;
  };
  CAPTURE(forced);
  visits.clear();
  mr::cpu::sweep_rows(recording_kernel<true>{}, matrix.data(), 0, rows, cols, x.data(), cols, m, out.data(), rows);
  check_visits(expected(true));
  visits.clear();
  mr::cpu::sweep_rows(recording_kernel<false>{}, matrix.data(), 0, rows, cols, x.data(), cols, m, out.data(), rows);
  check_visits(expected(false));
}
}  // namespace

// A kernel with wide tiles (`wide_tile_tokens_of`): sweeps of up to 2 tokens take blocks of
// `wide_block_rows` rows, larger ones the usual 4-row blocks in tiles of 3. It records each
// tile's rows (offsets into the gate and up matrices) and tokens.
namespace {
namespace wide_tile_test {
struct wide_kernel {};
constexpr int tile_tokens_of(wide_kernel) noexcept { return 3; }
constexpr int wide_tile_tokens_of(wide_kernel) noexcept { return 2; }
struct tile_seen {
  std::vector<std::ptrdiff_t> rows;  // each slot's row: gate rows as r, up rows as 1000 + r
  std::ptrdiff_t first_token;
  int tokens;
};
std::vector<tile_seen> seen;
const float* gate_start = nullptr;
const float* up_start = nullptr;
const float* x_start = nullptr;
constexpr int cols = 32;
constexpr std::size_t up_rows = 10;  // the test's matrices
template <int Rows>
void record(const mr::cpu::row_block<float, Rows>& block, const float* x, int tokens, mr::cpu::block_sums<Rows>& sums) {
  tile_seen tile{{}, (x - x_start) / cols, tokens};
  // Which matrix a row is in, by address range (the two vectors lie in either order).
  const auto in_up = [](const float* row) {
    const auto at = reinterpret_cast<std::uintptr_t>(row), begin = reinterpret_cast<std::uintptr_t>(up_start);
    return up_start != nullptr && at >= begin && at < begin + up_rows * cols * sizeof(float);
  };
  for (const float* row : block.rows) {
    const bool up = in_up(row);
    tile.rows.push_back((row - (up ? up_start : gate_start)) / cols + (up ? 1000 : 0));
  }
  seen.push_back(tile);
  for (int i = 0; i < Rows; ++i) {
    for (int t = 0; t < tokens; ++t) sums[i][t] = static_cast<float>(i + 100 * t);  // slot and token
  }
}
void multiply_tile(wide_kernel, const mr::cpu::row_block<float>& block, int, const float* x, std::ptrdiff_t, int tokens,
                   mr::cpu::tile_sums& sums) {
  record(block, x, tokens, sums);
}
void multiply_tile(wide_kernel, const mr::cpu::row_block<float, mr::cpu::wide_block_rows>& block, int, const float* x,
                   std::ptrdiff_t, int tokens, mr::cpu::block_sums<mr::cpu::wide_block_rows>& sums) {
  record(block, x, tokens, sums);
}
}  // namespace wide_tile_test
}  // namespace

TEST_CASE("sweeps of a kernel's wide-tile token count take 8-row blocks, larger ones the usual 4") {
  using namespace wide_tile_test;
  static_assert(mr::cpu::wide_block_rows == 8);
  constexpr int rows = static_cast<int>(up_rows);
  std::vector<float> gate(static_cast<std::size_t>(rows) * cols), up(gate.size()), x(4 * cols), out(4 * rows);
  gate_start = gate.data();
  x_start = x.data();
  using rows_list = std::vector<std::ptrdiff_t>;
  // sweep_rows, 2 tokens: blocks at rows 0 and 8, the second short (its last row repeated).
  up_start = nullptr;
  seen.clear();
  mr::cpu::sweep_rows(wide_kernel{}, gate.data(), 0, rows, cols, x.data(), cols, 2, out.data(), rows);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].rows == rows_list{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(seen[1].rows == rows_list{8, 9, 9, 9, 9, 9, 9, 9});
  CHECK((seen[0].tokens == 2 && seen[1].tokens == 2 && seen[0].first_token == 0));
  // Every slot's sum lands at its row and token (the record writes slot + 100 token): row r is
  // slot r % 8.
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < rows; ++r) {
      CHECK(out[static_cast<std::size_t>(t * rows + r)] == static_cast<float>(r % 8 + 100 * t));
    }
  }
  // 3 tokens: the usual 4-row blocks at rows 0, 4 and 8, one tile of 3 each.
  seen.clear();
  mr::cpu::sweep_rows(wide_kernel{}, gate.data(), 0, rows, cols, x.data(), cols, 3, out.data(), rows);
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].rows == rows_list{0, 1, 2, 3});
  CHECK(seen[2].rows == rows_list{8, 9, 9, 9});
  CHECK(seen[1].tokens == 3);
  // sweep_gate_up, 2 tokens: 4 gate rows then the same 4 rows of up in each block.
  up_start = up.data();
  seen.clear();
  std::vector<float> act(static_cast<std::size_t>(2 * rows), -1.0f);
  mr::cpu::sweep_gate_up(
      wide_kernel{}, gate.data(), up.data(), 0, rows, cols, x.data(), cols, 2, act.data(), rows, rows,
      [](float g, float u) { return 10 * g + u; }, [](float v) { return v; });
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].rows == rows_list{0, 1, 2, 3, 1000, 1001, 1002, 1003});
  CHECK(seen[2].rows == rows_list{8, 9, 9, 9, 1008, 1009, 1009, 1009});
  CHECK(seen[1].tokens == 2);
  // Gate row r sits in slot r % 4 and its up row in slot 4 + r % 4; token t adds 100 t to both.
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < rows; ++r) {
      const auto g = static_cast<float>(r % 4 + 100 * t), u = static_cast<float>(4 + r % 4 + 100 * t);
      CHECK(act[static_cast<std::size_t>(t * rows + r)] == 10.0f * g + u);
    }
  }
}

namespace {
// The prefetch mode each pass runs, as the kernels receive it: the first pass streams into L1
// or L2 as its block says; the second runs ahead over the whole block and later ones prefetch
// nothing, or each later pass up to the block's row count runs ahead over one row.
TEST_CASE("a pass's prefetch mode follows the block's pass and stream cache") {
  using mr::cpu::prefetch_mode;
  const auto mode_of = [](int pass, bool streams_to_l2, bool one_row_per_pass) {
    mr::cpu::row_block<float> block;
    block.pass = pass;
    block.streams_to_l2 = streams_to_l2;
    block.one_row_per_pass = one_row_per_pass;
    prefetch_mode seen{};
    int calls = 0;
    mr::cpu::with_prefetch_mode(block, [&](auto mode) {
      seen = decltype(mode)::value;
      ++calls;
    });
    CHECK(calls == 1);
    return seen;
  };
  CHECK(mode_of(0, false, false) == prefetch_mode::stream);
  CHECK(mode_of(0, true, false) == prefetch_mode::stream_to_l2);
  CHECK(mode_of(1, false, false) == prefetch_mode::run_ahead);
  CHECK(mode_of(1, true, false) == prefetch_mode::run_ahead);
  CHECK(mode_of(2, true, false) == prefetch_mode::none);
  CHECK(mode_of(5, false, false) == prefetch_mode::none);
  // One row per later pass, in blocks of 4 rows: passes 1 to 4 ask for a row each, 5 on none.
  CHECK(mode_of(0, false, true) == prefetch_mode::stream);
  CHECK(mode_of(0, true, true) == prefetch_mode::stream_to_l2);
  for (const int pass : {1, 2, 3, 4}) CHECK(mode_of(pass, false, true) == prefetch_mode::run_ahead_row);
  CHECK(mode_of(5, false, true) == prefetch_mode::none);
  CHECK(mode_of(9, true, true) == prefetch_mode::none);
  CHECK(mr::cpu::streams(prefetch_mode::stream));
  CHECK(mr::cpu::streams(prefetch_mode::stream_to_l2));
  CHECK_FALSE(mr::cpu::streams(prefetch_mode::run_ahead));
  CHECK_FALSE(mr::cpu::streams(prefetch_mode::run_ahead_row));
  CHECK_FALSE(mr::cpu::streams(prefetch_mode::none));
  CHECK(mr::cpu::stream_locality(prefetch_mode::stream) == 3);        // prefetcht0: L1
  CHECK(mr::cpu::stream_locality(prefetch_mode::stream_to_l2) == 2);  // prefetcht1: L2
}

// Which rows of the block each pass asks for ahead, written out for blocks of 4 and of 8 rows:
// with the whole block, rows [0, Rows) in pass 1 and none in any other; with one row per pass,
// row p - 1 in pass p from 1 to Rows and none in pass 0 or after Rows.
TEST_CASE("the rows each later pass asks for ahead") {
  const auto rows_of = []<int Rows>(std::integral_constant<int, Rows>, int pass, bool one_row_per_pass) {
    mr::cpu::row_block<mr::bfloat16, Rows> block;
    block.pass = pass;
    block.one_row_per_pass = one_row_per_pass;
    const mr::cpu::row_span span = mr::cpu::run_ahead_rows(block);
    return std::pair{span.first, span.end};
  };
  using four = std::integral_constant<int, 4>;
  using eight = std::integral_constant<int, 8>;
  using span = std::pair<int, int>;
  CHECK(rows_of(four{}, 0, false).second == rows_of(four{}, 0, false).first);  // the first pass streams
  CHECK(rows_of(four{}, 0, true).second == rows_of(four{}, 0, true).first);
  CHECK(rows_of(four{}, 1, false) == span{0, 4});
  CHECK(rows_of(eight{}, 1, false) == span{0, 8});
  CHECK(rows_of(four{}, 2, false).second == rows_of(four{}, 2, false).first);
  CHECK(rows_of(four{}, 1, true) == span{0, 1});
  CHECK(rows_of(four{}, 2, true) == span{1, 2});
  CHECK(rows_of(four{}, 3, true) == span{2, 3});
  CHECK(rows_of(four{}, 4, true) == span{3, 4});
  CHECK(rows_of(four{}, 5, true).second == rows_of(four{}, 5, true).first);
  CHECK(rows_of(eight{}, 8, true) == span{7, 8});
  CHECK(rows_of(eight{}, 9, true).second == rows_of(eight{}, 9, true).first);
}
}  // namespace
