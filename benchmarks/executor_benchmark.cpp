// The executor against the machine's memory bandwidth, in one binary:
//  - bandwidth/read: a STREAM-like read of a 2 GiB buffer (far beyond the last-level cache);
//  - executor/qwen3: one MoE layer shaped like Qwen3-30B-A3B (E = 128, d = 2048, h = 768,
//    k = 8, bfloat16 weights) at decode batch sizes, its effective weight bandwidth
//    (active experts x bytes per expert / time) and that as a fraction of bandwidth/read;
//  - executor/qwen3-compute: the same plans with every expert using one expert's weights (in
//    the caches): the compute alone, to set beside executor/qwen3 and its paired read;
//  - executor/qwen3-huge-pages: executor/qwen3 with the weights in transparent huge pages
//    (`weight_storage.hpp`; a second pool, built when first run);
//  - executor/kernel:K/n:N: the same with each projection kernel this CPU runs for bfloat16
//    weights (K the kernel's name: avx2_bf16, avx512_pairs, avx512_bf16, amx);
//  - executor/active: latency against the number of active experts at n = 16;
//  - tile/K: one tile of row kernel K (avx2, avx2_bf16, avx512, avx512_pairs, avx512_bf16: each
//    this CPU runs; all with bfloat16 weights) in cache
//    (no memory traffic), per token pass's prefetch mode: the kernel's compute ceiling, in
//    multiply-adds per second (and vdpbf16ps per second for avx512_bf16);
//  - item/K/gate_up: one gate/up work item swept for T tokens as the executor does
//    (every block, every token group, SwiGLU), its rows in L2: what one core's passes cost
//    without memory, steady to a few percent where the layer benchmarks swing by 10%;
//  - bandwidth/row_blocks/rows:R/ahead:B: the same buffer read in the order the executor's
//    first pass reads weights (blocks of R rows of 4 KiB, prefetched B bytes ahead), nothing
//    else: what that access pattern draws, beside bandwidth/read;
//  - bandwidth/l2_read_one_core: one core reading the same 128 KiB again and again: the ceiling
//    of a pass that only reads (one token);
//  - compute/fma_peak_one_core: one core's 256-bit FMAs alone, the ceiling the tile and item
//    rates read against; compute/fma512_peak_one_core the same with 512-bit FMAs (CPUs with
//    AVX-512);
//  - compute/bf16_dot_peak_one_core: one core's vdpbf16ps alone (CPUs with AVX512_BF16), the
//    ceiling of the avx512_bf16 kernel.
// The context names the CPU model, its family and model numbers, its vector-ISA flags and the
// kernels the build takes on it.
// The weights of three layers (3.4 GiB) are allocated and each iteration takes the next
// layer and a fresh plan, so no expert is still cached from the previous iteration (except in
// executor/qwen3-compute, which keeps them cached on purpose).
// End-to-end layer time per policy is benchmarks/layer_benchmark.cpp.

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <execution>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <benchmark/benchmark.h>
#include <moe_routing/moe_routing.hpp>
#include <moe_routing/synthetic/router_trace_generator.hpp>

#include "layer_fixture.hpp"

namespace {
namespace mr = moe_routing;
using bench::top_k;

constexpr int experts = 128, layers = 3;

const bench::weight_pool& pool(bench::page_size pages) {
  if (pages == bench::page_size::huge) {
    static const bench::weight_pool in_huge_pages(layers, experts, pages);
    return in_huge_pages;
  }
  static const bench::weight_pool in_default_pages(layers, experts, pages);
  return in_default_pages;
}

/// A 2 GiB buffer (far beyond the last-level cache) read by every core with a STREAM-like
/// sum; `read` walks it from where the last read stopped, so each read finds cold memory.
class read_reference {
 public:
  static read_reference& instance() {
    static read_reference r;
    return r;
  }
  std::size_t bytes() const { return buffer_.size() * sizeof(double); }

  /// Reads `bytes` (rounded down to a multiple of 4 KiB) in 64 parallel chunks and returns the seconds it took.
  double read(double bytes) {
    const std::size_t doubles = std::min(buffer_.size(), static_cast<std::size_t>(bytes) / sizeof(double) / 512 * 512);
    const std::size_t per_chunk = doubles / chunks_;
    if (next_ + doubles > buffer_.size()) next_ = 0;
    const double* base = buffer_.data() + next_;
    next_ += doubles;
    const auto start = std::chrono::steady_clock::now();
    std::for_each(std::execution::par, index_.begin(), index_.end(), [&](std::size_t c) {
      const double* p = base + c * per_chunk;
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
      for (std::size_t i = 0; i < per_chunk; i += 8) {
        s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3], s4 += p[i + 4], s5 += p[i + 5], s6 += p[i + 6],
            s7 += p[i + 7];
      }
      partial_[c] = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
    });
    benchmark::DoNotOptimize(partial_.data());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  /// Reads the whole buffer in the order the executor's first pass reads a gate/up item's
  /// weights, and nothing else: each chunk is a gate half and an up half of 4 KiB rows (d = 2048
  /// in bfloat16), walked in blocks of `rows` rows (half of them gate, half up), 64 bytes of
  /// every row of the block at a time, each row prefetched `ahead` bytes on into L2 (past its end,
  /// into the same row of the next block), as `prefetch_step` streams. Set beside `read` (the
  /// same bytes in address order), it tells how much of the read this access pattern can draw
  /// before any multiply-add.
  void read_row_blocks(int rows, int ahead) {
    constexpr std::size_t row_bytes = 4096, row_doubles = row_bytes / sizeof(double), line_doubles = 8;
    const std::size_t per_chunk = buffer_.size() / chunks_, per_matrix = per_chunk / 2;
    const std::size_t pair_rows = static_cast<std::size_t>(rows) / 2, block_doubles = pair_rows * row_doubles;
    std::for_each(std::execution::par, index_.begin(), index_.end(), [&](std::size_t c) {
      const double* gate = buffer_.data() + c * per_chunk;
      const double* up = gate + per_matrix;
      double sums[line_doubles] = {};
      for (std::size_t block = 0; block + block_doubles <= per_matrix; block += block_doubles) {
        for (std::size_t column = 0; column < row_doubles; column += line_doubles) {
          const std::size_t on = column * sizeof(double) + static_cast<std::size_t>(ahead) < row_bytes
                                     ? static_cast<std::size_t>(ahead)
                                     : block_doubles * sizeof(double) + static_cast<std::size_t>(ahead) - row_bytes;
          for (std::size_t r = 0; r < pair_rows; ++r) {
            for (const double* matrix : {gate, up}) {
              const double* line = matrix + block + r * row_doubles + column;
              // As an integer: past the buffer's last block the address lies beyond it.
              mr::cpu::prefetch_address<2>(mr::cpu::address_on(line, static_cast<std::ptrdiff_t>(on)));
              for (std::size_t i = 0; i < line_doubles; ++i) sums[i] += line[i];
            }
          }
        }
      }
      partial_[c] = std::accumulate(std::begin(sums), std::end(sums), 0.0);
    });
    benchmark::DoNotOptimize(partial_.data());
  }

 private:
  static constexpr std::size_t chunks_ = 64;
  read_reference() : buffer_(std::size_t{1} << 28, 1.0), index_(chunks_), partial_(chunks_) {
    std::iota(index_.begin(), index_.end(), std::size_t{0});
  }
  std::vector<double> buffer_;
  std::vector<std::size_t> index_;
  std::vector<double> partial_;
  std::size_t next_ = 0;
};

void bandwidth_read(benchmark::State& state) {
  read_reference& reference = read_reference::instance();
  for (auto _ : state) reference.read(static_cast<double>(reference.bytes()));
  state.counters["bytes_per_second"] =
      benchmark::Counter(static_cast<double>(reference.bytes()), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["working_set_MiB"] = static_cast<double>(reference.bytes()) / (1 << 20);
}

// `read_row_blocks` of the whole 2 GiB buffer: the executor's first-pass access pattern as a
// pure read (rows per block, bytes prefetched ahead), to set beside bandwidth/read.
void bandwidth_row_blocks(benchmark::State& state, int rows, int ahead) {
  read_reference& reference = read_reference::instance();
  for (auto _ : state) reference.read_row_blocks(rows, ahead);
  state.counters["bytes_per_second"] =
      benchmark::Counter(static_cast<double>(reference.bytes()), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["working_set_MiB"] = static_cast<double>(reference.bytes()) / (1 << 20);
}

/// Vanilla plans for 64 consecutive steps of a Qwen3-shaped synthetic trace (48.8 active
/// experts at n = 16).
std::vector<mr::routing_plan> trace_plans(int n) {
  auto config = mr::synthetic::find_preset("qwen3-30b-a3b")->config;
  config.tokens_per_step = n;
  config.steps = 64;
  config.seed = 77;
  const mr::io::trace trace = mr::synthetic::generate_trace(config);
  std::vector<mr::routing_plan> plans;
  std::vector<std::int32_t> segments;
  for (int s = 0; s < trace.step_count(); ++s) {
    plans.emplace_back(mr::plan_shape{.tokens = n, .experts = experts, .top_k = top_k});
    mr::throw_if_failed(
        mr::cpu::route(mr::presets::vanilla(top_k), trace.batch<float>(0, s, segments), plans.back().view()));
  }
  return plans;
}

/// Plans of n = 16 tokens over exactly `active` experts, a fresh random subset each.
std::vector<mr::routing_plan> plans_with_active(int active) {
  std::mt19937 rng(static_cast<unsigned>(active));
  const int n = 16;
  std::vector<mr::routing_plan> plans;
  for (int p = 0; p < 16; ++p) {
    std::vector<int> subset(experts);
    std::iota(subset.begin(), subset.end(), 0);
    std::shuffle(subset.begin(), subset.end(), rng);
    subset.resize(static_cast<std::size_t>(active));
    // n*k slots, every expert of the subset used at least once (active <= n*k = 128).
    std::vector<float> logits(static_cast<std::size_t>(n) * experts, -30.0f);
    int next = 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < top_k; ++j) {
        const int e = subset[static_cast<std::size_t>((next++) % active)];
        logits[static_cast<std::size_t>(i) * experts + e] = 10.0f - static_cast<float>(j);
      }
    }
    mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};
    plans.emplace_back(mr::plan_shape{.tokens = n, .experts = experts, .top_k = top_k});
    mr::throw_if_failed(mr::cpu::route(mr::presets::vanilla(top_k), batch, plans.back().view()));
  }
  return plans;
}

/// How `run_plans` runs its layers.
struct layer_setup {
  bool paired_read = false;  // each layer followed by a read of its bytes (`bench::run_layers`)
  mr::cpu::isa_level kernel = mr::cpu::best_projection_level();
  bench::weight_source source = bench::weight_source::rotating_layers;
  bench::page_size pages = bench::page_size::system_default;
};

void run_plans(benchmark::State& state, int n, std::vector<mr::routing_plan> plans, const layer_setup& setup = {}) {
  std::function<double(double)> paired_read;
  if (setup.paired_read) paired_read = [](double bytes) { return read_reference::instance().read(bytes); };
  bench::run_layers(
      state, pool(setup.pages), n, experts,
      [&](std::size_t call) -> mr::routing_plan& { return plans[call % plans.size()]; }, paired_read, setup.kernel,
      setup.source);
}

/// The value of the first /proc/cpuinfo line whose field is `field` ("model name", "flags"),
/// or "unknown" where there is none (another OS, a field the kernel does not report).
std::string cpuinfo_field(const std::string& field) {
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.rfind(field, 0) != 0) continue;
    const auto name_end = line.find_last_not_of(" \t", colon - 1);
    if (name_end + 1 != field.size()) continue;  // "model" must not match "model name"
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : std::string{};
    return value.empty() ? "unknown" : value;
  }
  return "unknown";
}

/// The vector-ISA flags among /proc/cpuinfo's that decide which kernels run, in a fixed order
/// ("unknown" without /proc/cpuinfo): with the family number, what tells the CPU kinds this
/// project runs on apart where the model name does not ("AMD EPYC" is all a Zen 3 and a Zen 5
/// guest report).
std::string vector_isa_flags() {
  const std::string listed = cpuinfo_field("flags");
  if (listed == "unknown") return listed;
  const std::string flags = " " + listed + " ";
  std::string found;
  for (const char* flag :
       {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile", "amx_bf16"}) {
    if (flags.find(" " + std::string(flag) + " ") == std::string::npos) continue;
    found += (found.empty() ? "" : " ") + std::string(flag);
  }
  return found.empty() ? "none of avx2, avx512f, amx" : found;
}

/// A gate/up work item's shape at Qwen3-30B-A3B's d: 16 gate and 16 up rows of 2048 bfloat16
/// columns, 128 KiB, which stays in L2 (1-2 MiB per core on the CPUs we run on) from call to call.
constexpr int item_cols = 2048, item_rows = 16;
constexpr std::size_t item_bytes = std::size_t{2} * item_rows * item_cols * sizeof(mr::bfloat16);

#if MOE_ROUTING_X86_KERNELS
/// What a row kernel multiplies weights with: bfloat16 rows for the bfloat16 kernels, float rows
/// for the others.
template <class Kernel>
using input_of = std::conditional_t<mr::cpu::takes_bf16_activations<Kernel>, mr::bfloat16, float>;

/// `v` rounded to bfloat16, as an activation of type `Input` (the executor's rounding).
template <class Input>
Input rounded_input(float v) {
  if constexpr (std::is_same_v<Input, float>) {
    return mr::to_float(mr::to_bfloat16(v));
  } else {
    return mr::to_bfloat16(v);
  }
}

/// `count` values of `T`, all `value`, starting `offset` bytes after a 4 KiB page boundary
/// (`offset` a multiple of sizeof(T), at most a page). The tile and item benchmarks start their
/// weights on a page boundary, as engines' weights and `weight_storage.hpp`'s are, and their
/// activation rows 2 KiB into a page.
/// Why: rows 4 KiB apart (d = 2048 in bfloat16) that start at the same place in a page fall in
/// the same L1 sets, and separate vectors land wherever the allocator puts them. On Zen 4 a
/// 12-token gate/up item ran 2.1-2.3 G vdpbf16ps per second where its three vectors happened to
/// start within 32 bytes of each other in their pages, 2.9-3.1 G placed so
/// (docs/benchmarks/executor_zen4.md, the fifth session).
template <class T>
class page_placed {
 public:
  page_placed(std::size_t count, T value, std::size_t offset) : storage_(count + 2 * page / sizeof(T), value) {
    assert(offset % sizeof(T) == 0 && offset <= page);
    const auto start = (reinterpret_cast<std::uintptr_t>(storage_.data()) + page - 1) / page * page + offset;
    data_ = storage_.data() + (start - reinterpret_cast<std::uintptr_t>(storage_.data())) / sizeof(T);
  }
  page_placed(const page_placed&) = delete;  // a copy's pointer would point into this one's storage
  page_placed& operator=(const page_placed&) = delete;
  T* data() noexcept { return data_; }

 private:
  static constexpr std::size_t page = 4096;
  std::vector<T> storage_;
  T* data_ = nullptr;
};

/// Where the tile and item benchmarks' activation rows start in a page (`page_placed`).
constexpr std::size_t activation_offset = 2048;

// One tile of a row kernel: 4 bfloat16 weight rows, `cols` long, by `tokens` activation rows,
// as token pass `pass` meets it (0 streams along the rows; later passes ask for the next block's
// rows as this process's sweeps do, `weight_run_ahead()`: 1 the whole block and 2 on nothing, or
// each of 1 to 4 one row). The weights of both blocks fit in L2, so this is the kernel's
// compute rate alone. Counters: multiply-adds (weight x token products) per second, and for
// the AVX512_BF16 kernel vdpbf16ps per second (Zen 5 issues two per cycle per core).
template <class Kernel>
void tile_in_cache(benchmark::State& state, int cols, int tokens, int pass) {
  constexpr int rows = mr::cpu::block_rows;
  page_placed<mr::bfloat16> weights(static_cast<std::size_t>(2 * rows * cols), mr::to_bfloat16(0.5f), 0);
  page_placed<input_of<Kernel>> x(static_cast<std::size_t>(tokens * cols), rounded_input<input_of<Kernel>>(0.25f),
                                  activation_offset);
  mr::cpu::row_block<mr::bfloat16> block;
  for (int i = 0; i < rows; ++i) block.rows[i] = weights.data() + static_cast<std::ptrdiff_t>(i) * cols;
  block.next_block_bytes = std::ptrdiff_t{rows} * cols * std::ptrdiff_t{sizeof(mr::bfloat16)};
  block.pass = pass;
  block.streams_to_l2 = mr::cpu::weight_stream_cache() == mr::cpu::stream_cache::l2;  // as the executor's sweeps
  block.one_row_per_pass = mr::cpu::weight_run_ahead() == mr::cpu::run_ahead_style::one_row_per_pass;
  mr::cpu::tile_sums sums;
  for (auto _ : state) {
    mr::cpu::multiply_tile(Kernel{}, block, cols, x.data(), cols, tokens, sums);
    benchmark::DoNotOptimize(sums);
    benchmark::ClobberMemory();
  }
  const double products = double{rows} * tokens * cols;
  state.counters["multiply_adds_per_s"] =
      benchmark::Counter(products * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  if constexpr (std::is_same_v<Kernel, mr::cpu::avx512_bf16_kernel>) {
    const double instructions_per_tile = double{rows} * tokens * ((cols + 31) / 32);
    state.counters["vdpbf16ps_per_s"] = benchmark::Counter(
        instructions_per_tile * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  }
}

// One gate/up work item for `tokens` tokens, as the executor sweeps it (`sweep_gate_up`: blocks
// of 2 gate and 2 up rows by token groups, or of 4 and 4 for a kernel's wide tiles at 1-3
// tokens, in the kernel's order, SwiGLU on each tile's sums). (`tile/...` above times the
// 4-row tile only.)
// The matrices hold the next item's rows as well, so the second token pass's run-ahead
// prefetches land on weights, as they do in a layer.
template <class Kernel>
void item_in_cache(benchmark::State& state, int tokens) {
  using input = input_of<Kernel>;
  const std::size_t elements = std::size_t{2} * item_rows * item_cols;  // this item's rows and the next's
  page_placed<mr::bfloat16> gate(elements, mr::to_bfloat16(0.5f), 0), up(elements, mr::to_bfloat16(-0.25f), 0);
  page_placed<input> x(static_cast<std::size_t>(tokens) * item_cols, rounded_input<input>(0.125f), activation_offset);
  std::vector<input> activations(static_cast<std::size_t>(tokens) * item_rows);
  for (auto _ : state) {
    mr::cpu::sweep_gate_up(Kernel{}, gate.data(), up.data(), 0, item_rows, item_cols, x.data(), item_cols, tokens,
                           activations.data(), item_rows, item_rows, mr::cpu::swiglu,
                           [](float v) { return rounded_input<input>(v); });
    benchmark::DoNotOptimize(activations.data());
    benchmark::ClobberMemory();
  }
  const double products = 2.0 * item_rows * tokens * item_cols;
  state.counters["multiply_adds_per_s"] =
      benchmark::Counter(products * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  if constexpr (std::is_same_v<Kernel, mr::cpu::avx512_bf16_kernel>) {
    state.counters["vdpbf16ps_per_s"] =
        benchmark::Counter(products / 32 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  }
  state.counters["weight_bytes_per_s"] =
      benchmark::Counter(static_cast<double>(item_bytes), benchmark::Counter::kIsIterationInvariantRate);
}

// One core's multiply-add ceiling with 256-bit FMAs: 10 independent chains (enough to cover
// the instruction's latency on the CPUs we run on) and nothing else, in registers. The tile and
// item counters `multiply_adds_per_s` read as a fraction of this one, measured in the same run.
// Each chain starts from its own value: started alike (until 2026-11-27), the chains were the
// same computation, GCC 12 kept one of them, and the loop ran one FMA per latency (4 cycles on
// Zen 3) counted as 10, a ceiling 1.25x the real one on CPUs with two FMA pipes.
MOE_ROUTING_TARGET_AVX2 void fma_peak_one_core(benchmark::State& state) {
  constexpr int chains = 10, steps = 1000;
  const __m256 scale = _mm256_set1_ps(0.999999f), shift = _mm256_set1_ps(1e-7f);
  __m256 a0 = _mm256_set1_ps(1.0f), a1 = _mm256_set1_ps(1.125f), a2 = _mm256_set1_ps(1.25f),
         a3 = _mm256_set1_ps(1.375f), a4 = _mm256_set1_ps(1.5f), a5 = _mm256_set1_ps(1.625f),
         a6 = _mm256_set1_ps(1.75f), a7 = _mm256_set1_ps(1.875f), a8 = _mm256_set1_ps(2.0f),
         a9 = _mm256_set1_ps(2.125f);
  for (auto _ : state) {
    for (int s = 0; s < steps; ++s) {
      // Named variables, not an array: GCC 12 kept an array of them in memory (a load and a
      // store around every FMA).
      a0 = _mm256_fmadd_ps(a0, scale, shift), a1 = _mm256_fmadd_ps(a1, scale, shift);
      a2 = _mm256_fmadd_ps(a2, scale, shift), a3 = _mm256_fmadd_ps(a3, scale, shift);
      a4 = _mm256_fmadd_ps(a4, scale, shift), a5 = _mm256_fmadd_ps(a5, scale, shift);
      a6 = _mm256_fmadd_ps(a6, scale, shift), a7 = _mm256_fmadd_ps(a7, scale, shift);
      a8 = _mm256_fmadd_ps(a8, scale, shift), a9 = _mm256_fmadd_ps(a9, scale, shift);
    }
    benchmark::DoNotOptimize(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))));
    benchmark::DoNotOptimize(_mm256_add_ps(a8, a9));
  }
  state.counters["multiply_adds_per_s"] = benchmark::Counter(
      double{chains} * steps * 8 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The same with 512-bit FMAs, the ceiling of the avx512 and avx512_pairs kernels: on Ice Lake
// two 512-bit FMAs issue per cycle at a lower clock than 256-bit ones (91 G multiply-adds per
// second against 55; docs/benchmarks/executor_icelake.md), so the 256-bit ceiling understates
// what those kernels could reach. 12 chains, enough where two issue per cycle.
MOE_ROUTING_TARGET_AVX512 void fma512_peak_one_core(benchmark::State& state) {
  constexpr int chains = 12, steps = 1000;
  const __m512 scale = _mm512_set1_ps(0.999999f), shift = _mm512_set1_ps(1e-7f);
  __m512 a0 = _mm512_set1_ps(1.0f), a1 = _mm512_set1_ps(1.125f), a2 = _mm512_set1_ps(1.25f),
         a3 = _mm512_set1_ps(1.375f), a4 = _mm512_set1_ps(1.5f), a5 = _mm512_set1_ps(1.625f),
         a6 = _mm512_set1_ps(1.75f), a7 = _mm512_set1_ps(1.875f), a8 = _mm512_set1_ps(2.0f),
         a9 = _mm512_set1_ps(2.125f), a10 = _mm512_set1_ps(2.25f), a11 = _mm512_set1_ps(2.375f);
  for (auto _ : state) {
    for (int s = 0; s < steps; ++s) {
      a0 = _mm512_fmadd_ps(a0, scale, shift), a1 = _mm512_fmadd_ps(a1, scale, shift);
      a2 = _mm512_fmadd_ps(a2, scale, shift), a3 = _mm512_fmadd_ps(a3, scale, shift);
      a4 = _mm512_fmadd_ps(a4, scale, shift), a5 = _mm512_fmadd_ps(a5, scale, shift);
      a6 = _mm512_fmadd_ps(a6, scale, shift), a7 = _mm512_fmadd_ps(a7, scale, shift);
      a8 = _mm512_fmadd_ps(a8, scale, shift), a9 = _mm512_fmadd_ps(a9, scale, shift);
      a10 = _mm512_fmadd_ps(a10, scale, shift), a11 = _mm512_fmadd_ps(a11, scale, shift);
    }
    benchmark::DoNotOptimize(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))));
    benchmark::DoNotOptimize(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  }
  state.counters["multiply_adds_per_s"] = benchmark::Counter(
      double{chains} * steps * 16 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// One core's ceiling for the avx512_bf16 kernel: vdpbf16ps alone (32 multiply-adds each: 16
// lanes of two bfloat16 products), 12 independent chains in registers, enough to cover the
// instruction's latency where two issue per cycle. The executor's multiply-adds at n = 64 cannot
// take less than they take at this rate on every core (benchmarks/executor_report.py's floor).
// Named variables and distinct starting values for the reason `fma_peak_one_core` gives.
MOE_ROUTING_TARGET_AVX512_BF16 void bf16_dot_peak_one_core(benchmark::State& state) {
  constexpr int chains = 12, steps = 1000;
  const __m512bh w = (__m512bh)_mm512_set1_epi16(static_cast<short>(0x3f80)),  // bfloat16 1.0
      x = (__m512bh)_mm512_set1_epi16(static_cast<short>(0x3380));             // bfloat16 2^-24
  __m512 a0 = _mm512_set1_ps(1.0f), a1 = _mm512_set1_ps(1.125f), a2 = _mm512_set1_ps(1.25f),
         a3 = _mm512_set1_ps(1.375f), a4 = _mm512_set1_ps(1.5f), a5 = _mm512_set1_ps(1.625f),
         a6 = _mm512_set1_ps(1.75f), a7 = _mm512_set1_ps(1.875f), a8 = _mm512_set1_ps(2.0f),
         a9 = _mm512_set1_ps(2.125f), a10 = _mm512_set1_ps(2.25f), a11 = _mm512_set1_ps(2.375f);
  for (auto _ : state) {
    for (int s = 0; s < steps; ++s) {
      a0 = _mm512_dpbf16_ps(a0, w, x), a1 = _mm512_dpbf16_ps(a1, w, x), a2 = _mm512_dpbf16_ps(a2, w, x);
      a3 = _mm512_dpbf16_ps(a3, w, x), a4 = _mm512_dpbf16_ps(a4, w, x), a5 = _mm512_dpbf16_ps(a5, w, x);
      a6 = _mm512_dpbf16_ps(a6, w, x), a7 = _mm512_dpbf16_ps(a7, w, x), a8 = _mm512_dpbf16_ps(a8, w, x);
      a9 = _mm512_dpbf16_ps(a9, w, x), a10 = _mm512_dpbf16_ps(a10, w, x), a11 = _mm512_dpbf16_ps(a11, w, x);
    }
    benchmark::DoNotOptimize(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))));
    benchmark::DoNotOptimize(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  }
  const double instructions = double{chains} * steps * static_cast<double>(state.iterations());
  state.counters["multiply_adds_per_s"] = benchmark::Counter(instructions * 32, benchmark::Counter::kIsRate);
  state.counters["vdpbf16ps_per_s"] = benchmark::Counter(instructions, benchmark::Counter::kIsRate);
}

// The tile and item benchmarks of one row kernel, named after it.
template <class Kernel>
void register_kernel_in_cache() {
  const std::string kernel = Kernel::name;
  for (const int cols : {768, 2048}) {
    for (int tokens = 1; tokens <= mr::cpu::tile_tokens_of(Kernel{}); ++tokens) {
      for (const int pass : {0, 1, 2}) {
        benchmark::RegisterBenchmark(("tile/" + kernel + "/cols:" + std::to_string(cols) +
                                      "/tokens:" + std::to_string(tokens) + "/pass:" + std::to_string(pass))
                                         .c_str(),
                                     [=](benchmark::State& s) { tile_in_cache<Kernel>(s, cols, tokens, pass); });
      }
    }
  }
  for (const int tokens : {1, 2, 3, 4, 6, 12, 24}) {
    benchmark::RegisterBenchmark(("item/" + kernel + "/gate_up/tokens:" + std::to_string(tokens)).c_str(),
                                 [=](benchmark::State& s) { item_in_cache<Kernel>(s, tokens); });
  }
}
#endif

// One core reading a gate/up item's 128 KiB (in L2 after the first iteration) with integer sums,
// which the compiler vectorizes: what a pass over an item from L2 could reach if it only read.
void l2_read_one_core(benchmark::State& state) {
  std::vector<std::uint64_t> buffer(item_bytes / sizeof(std::uint64_t), 1);
  for (auto _ : state) {
    std::uint64_t sum = 0;
    for (const std::uint64_t v : buffer) sum += v;
    benchmark::DoNotOptimize(sum);
  }
  state.counters["bytes_per_second"] =
      benchmark::Counter(static_cast<double>(item_bytes), benchmark::Counter::kIsIterationInvariantRate);
}

const bool registered = [] {
  benchmark::AddCustomContext("cpu_model", cpuinfo_field("model name"));
  benchmark::AddCustomContext("cpu_family_model",
                              "family " + cpuinfo_field("cpu family") + ", model " + cpuinfo_field("model"));
  benchmark::AddCustomContext("cpu_flags", vector_isa_flags());
  benchmark::AddCustomContext("kernels", mr::cpu::kernel_report());
  benchmark::RegisterBenchmark("bandwidth/read", bandwidth_read)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("bandwidth/l2_read_one_core", l2_read_one_core);
  for (const int rows : {4, 8}) {
    for (const int ahead : {1024, 2048}) {
      benchmark::RegisterBenchmark(
          ("bandwidth/row_blocks/rows:" + std::to_string(rows) + "/ahead:" + std::to_string(ahead)).c_str(),
          [=](benchmark::State& s) { bandwidth_row_blocks(s, rows, ahead); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const int n : {1, 4, 16, 64}) {
    benchmark::RegisterBenchmark(("executor/qwen3/n:" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& s) { run_plans(s, n, trace_plans(n), {.paired_read = true}); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    // The same layers with the weights in huge pages: what the TLB costs the executor.
    benchmark::RegisterBenchmark(("executor/qwen3-huge-pages/n:" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& s) {
                                   run_plans(s, n, trace_plans(n),
                                             {.paired_read = true, .pages = bench::page_size::huge});
                                 })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    // The same plans with every expert using one expert's weights, which stay in the caches:
    // the compute alone. Where executor/qwen3 takes about this plus its paired read, the two
    // do not overlap; where it takes the longer of the two, they overlap fully.
    benchmark::RegisterBenchmark(("executor/qwen3-compute/n:" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& s) {
                                   run_plans(s, n, trace_plans(n),
                                             {.source = bench::weight_source::one_expert_for_all});
                                 })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  // Every vector kernel this CPU runs, side by side (the default above is the fastest), named
  // after the kernel the level takes for these bfloat16 weights (`avx2_bf16` at `avx2`,
  // `avx512_pairs` at `avx512`).
  for (int level = static_cast<int>(mr::cpu::isa_level::avx2);
       level <= static_cast<int>(mr::cpu::best_projection_level()); ++level) {
    const auto kernel = static_cast<mr::cpu::isa_level>(level);
    std::string kernel_name;
    mr::cpu::with_projection_kernel<mr::bfloat16>(kernel, [&](auto tag) { kernel_name = decltype(tag)::name; });
    for (const int n : {1, 4, 16, 64}) {
      benchmark::RegisterBenchmark((std::string("executor/kernel:") + kernel_name + "/n:" + std::to_string(n)).c_str(),
                                   [n, kernel](benchmark::State& s) {
                                     run_plans(s, n, trace_plans(n), {.paired_read = true, .kernel = kernel});
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (int active = 8; active <= 128; active += 12) {
    benchmark::RegisterBenchmark(("executor/active:" + std::to_string(active)).c_str(),
                                 [active](benchmark::State& s) { run_plans(s, 16, plans_with_active(active)); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
#if MOE_ROUTING_X86_KERNELS
  // The row kernels' tiles and items in cache, each kernel this CPU runs.
  if (mr::cpu::cpu_runs(mr::cpu::isa_level::avx2)) {
    benchmark::RegisterBenchmark("compute/fma_peak_one_core", fma_peak_one_core);
    register_kernel_in_cache<mr::cpu::avx2_kernel>();
    register_kernel_in_cache<mr::cpu::avx2_bf16_kernel>();
  }
  if (mr::cpu::cpu_runs(mr::cpu::isa_level::avx512)) {
    benchmark::RegisterBenchmark("compute/fma512_peak_one_core", fma512_peak_one_core);
    register_kernel_in_cache<mr::cpu::avx512_kernel>();
    register_kernel_in_cache<mr::cpu::avx512_pairs_kernel>();
  }
  if (mr::cpu::cpu_runs(mr::cpu::isa_level::avx512_bf16)) {
    benchmark::RegisterBenchmark("compute/bf16_dot_peak_one_core", bf16_dot_peak_one_core);
    register_kernel_in_cache<mr::cpu::avx512_bf16_kernel>();
  }
#endif
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
