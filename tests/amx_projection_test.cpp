// The AMX projection kernels on their own, against sums written here (they run wherever the
// machine has AMX, whatever the build targets).

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/cpu/executor/amx_projection.hpp>

#include "naive_executor.hpp"

namespace {
namespace mr = test::mr;
namespace amx = mr::cpu::amx;

/// Random bfloat16 values and the doubles they hold.
struct bf16_values {
  std::vector<mr::bfloat16> bits;
  std::vector<double> exact;
  bf16_values(std::size_t count, std::mt19937& rng) {
    std::normal_distribution<float> noise(0.0f, 1.0f);
    for (std::size_t i = 0; i < count; ++i) {
      bits.push_back(mr::to_bfloat16(noise(rng)));
      exact.push_back(test::decode_bf16(bits.back().bits));
    }
  }
};

/// Token rows as floats, and the packed copy the kernels take, built by `pack_rows`.
struct packed_tokens {
  std::vector<float> rows;
  std::vector<mr::bfloat16> packed;
  packed_tokens(int tokens, int columns, std::mt19937& rng) : rows(static_cast<std::size_t>(tokens) * columns) {
    std::normal_distribution<float> noise(0.0f, 1.0f);
    for (auto& v : rows) v = noise(rng);
    packed.assign(static_cast<std::size_t>(amx::padded_tokens(tokens)) * columns,
                  mr::bfloat16{0x7fc0});  // NaN until written
    amx::pack_rows([&](int p) { return rows.data() + static_cast<std::ptrdiff_t>(p) * columns; }, tokens, columns,
                   packed.data());
  }
  double value(int t, int c, int columns) const {
    return test::round_to_bf16(rows[static_cast<std::size_t>(t) * columns + c]);
  }
};

[[maybe_unused]] double dot(const bf16_values& w, int row, const packed_tokens& x, int t, int columns) {
  double sum = 0;
  for (int c = 0; c < columns; ++c)
    sum += w.exact[static_cast<std::size_t>(row) * columns + c] * x.value(t, c, columns);
  return sum;
}

}  // namespace

TEST_CASE("pack_rows writes each token's bfloat16 pairs where packed_index says, zero padding") {
  std::mt19937 rng(11);
  for (const int tokens : {1, 15, 16, 17, 40}) {
    const int columns = 64;
    const packed_tokens x(tokens, columns, rng);
    for (int t = 0; t < amx::padded_tokens(tokens); ++t) {
      for (int c = 0; c < columns; ++c) {
        const double expected = t < tokens ? x.value(t, c, columns) : 0.0;
        REQUIRE(test::decode_bf16(x.packed[amx::packed_index(t, c, columns)].bits) == expected);
      }
    }
  }
}

// The tile kernels exist in every x86-64 Linux build, and run only where the CPU has AMX and
// the OS grants the tile state: elsewhere their cases are registered skipped, with the
// reason as their description (CTest reports them skipped; --reporters=xml shows why).
#if MOE_ROUTING_HAS_AMX
#define MOE_ROUTING_TEST_NEEDS_AMX   \
  doctest::skip(!amx::available()) * \
      doctest::description("skipped: this CPU has no AMX, or the OS did not grant tile data")
#else
#define MOE_ROUTING_TEST_NEEDS_AMX \
  doctest::skip() * doctest::description("skipped: the AMX kernels are built on x86-64 Linux only")
#endif

#if MOE_ROUTING_HAS_AMX
/// The kernels' tile configuration as the CPU holds it once loaded.
MOE_ROUTING_TARGET_AMX amx::detail::tile_config configure_and_read_back() {
  amx::detail::configure_tiles();
  amx::detail::tile_config loaded;
  __asm__ volatile("sttilecfg %0" : "=m"(loaded));  // all 64 bytes (GCC's _tile_storeconfig declares 8)
  _tile_release();
  return loaded;
}
#endif

TEST_CASE("the tile configuration the kernels load is the one they wrote" * MOE_ROUTING_TEST_NEEDS_AMX) {
#if MOE_ROUTING_HAS_AMX
  REQUIRE(amx::available());
  const amx::detail::tile_config loaded = configure_and_read_back();
  CHECK(loaded.palette == 1);
  for (int t = 0; t < 5; ++t) {
    CHECK(loaded.rows[t] == amx::tile_rows);
    CHECK(loaded.bytes_per_row[t] == 64);
  }
#endif
}

TEST_CASE("AMX project_rows and project_gate_up equal dot products in double" * MOE_ROUTING_TEST_NEEDS_AMX) {
#if MOE_ROUTING_HAS_AMX
  REQUIRE(amx::available());
  std::mt19937 rng(12);
  const int rows = 64, columns = 96;  // three column steps: an odd count
  const bf16_values w(static_cast<std::size_t>(rows) * columns, rng);
  for (const int tokens : {1, 5, 16, 33}) {
    CAPTURE(tokens);
    const packed_tokens x(tokens, columns, rng);
    // Rows 16..63: one pair of 16-row blocks, then a lone block.
    std::vector<float> out(static_cast<std::size_t>(tokens) * rows, -1.0f);
    amx::project_rows(w.bits.data(), rows, 16, 64, columns, x.packed.data(), tokens, out.data(), rows);
    for (int t = 0; t < tokens; ++t) {
      for (int r = 0; r < rows; ++r) {
        const float got = out[static_cast<std::size_t>(t) * rows + r];
        if (r < 16) {
          REQUIRE(got == -1.0f);  // outside the requested rows
        } else {
          const double expected = dot(w, r, x, t, columns);
          REQUIRE(std::abs(got - expected) <= 1e-5 * (1.0 + std::abs(expected)));
        }
      }
    }
    // Gate = rows 16..31, up = rows 48..63, activation g - 2u, written as rows 16..31 of a
    // packed copy 32 wide.
    const int width = 32;
    std::vector<mr::bfloat16> act(static_cast<std::size_t>(amx::padded_tokens(tokens)) * width, mr::bfloat16{0x7fc0});
    amx::project_gate_up(w.bits.data(), w.bits.data() + 32 * columns, 16, columns, x.packed.data(), tokens, width,
                         act.data(), [](float g, float u) { return g - 2.0f * u; });
    for (int t = 0; t < amx::padded_tokens(tokens); ++t) {
      for (int r = 16; r < 32; ++r) {
        const double got = test::decode_bf16(act[amx::packed_index(t, r, width)].bits);
        if (t >= tokens) {
          REQUIRE(got == 0.0);
          continue;
        }
        const double expected = dot(w, r, x, t, columns) - 2.0 * dot(w, r + 32, x, t, columns);
        REQUIRE(std::abs(got - expected) <= std::abs(expected) / 128 + 1e-5);  // one bfloat16 rounding
      }
    }
  }
#endif
}
