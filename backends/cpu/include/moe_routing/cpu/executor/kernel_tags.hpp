#pragma once
/// \file
/// The executor's projection kernels named by tag types, each with its instruction-set level
/// (`cpu_features.hpp`) and a name (for reports). A call picks its level once
/// (`kernel_choice.hpp`), and with the weight type its tag; overload resolution on the tag
/// routes every projection of that call to its kernel, so what the CPU supports is decided in
/// one place instead of at each use.
///   - `portable_kernel`: plain loops the compiler maps onto whatever SIMD the build targets;
///   - `avx2_kernel`: AVX2 + FMA + F16C, weights widened to float, float multiply-adds;
///   - `avx2_bf16_kernel`: the same for bfloat16 weights, each 16 split into floats by pairs of
///     columns, with float activations in pair order (`pair_order.hpp`);
///   - `avx512_kernel`: the same on AVX-512;
///   - `avx512_pairs_kernel`: the same on AVX-512 for bfloat16 weights, each 32 split into floats
///     by pairs of columns, with float activations in AVX-512's pair order;
///   - `avx512_bf16_kernel`: vdpbf16ps on bfloat16 weight pairs and bfloat16 activations
///     (the products the AMX tiles form), float sums;
///   - `amx_kernel`: Intel AMX tiles for bfloat16 weights with bfloat16 activations.
/// `avx2_bf16_kernel` and `avx512_pairs_kernel` need bfloat16 weights; the last two need bfloat16
/// weights with rounded activations (`bf16_activations`).

#include <concepts>

#include "moe_routing/cpu/simd/cpu_features.hpp"

namespace moe_routing::cpu {

struct portable_kernel {
  static constexpr isa_level level = isa_level::portable;
  static constexpr const char* name = "portable";
};
struct avx2_kernel {
  static constexpr isa_level level = isa_level::avx2;
  static constexpr const char* name = "avx2";
};
struct avx2_bf16_kernel {
  static constexpr isa_level level = isa_level::avx2;
  static constexpr const char* name = "avx2_bf16";
};
struct avx512_kernel {
  static constexpr isa_level level = isa_level::avx512;
  static constexpr const char* name = "avx512";
};
struct avx512_pairs_kernel {
  static constexpr isa_level level = isa_level::avx512;
  static constexpr const char* name = "avx512_pairs";
};
struct avx512_bf16_kernel {
  static constexpr isa_level level = isa_level::avx512_bf16;
  static constexpr const char* name = "avx512_bf16";
};
struct amx_kernel {
  static constexpr isa_level level = isa_level::amx;
  static constexpr const char* name = "amx";
};

/// A kernel that multiplies row-major activation rows (not a tile-packed copy).
template <class Kernel>
concept row_kernel = std::same_as<Kernel, portable_kernel> || std::same_as<Kernel, avx2_kernel> ||
    std::same_as<Kernel, avx2_bf16_kernel> || std::same_as<Kernel, avx512_kernel> ||
    std::same_as<Kernel, avx512_pairs_kernel> || std::same_as<Kernel, avx512_bf16_kernel>;

/// Whether the kernel's products are of bfloat16 activations (it takes them as bfloat16
/// rows or tiles), not float.
template <class Kernel>
inline constexpr bool takes_bf16_activations =
    std::same_as<Kernel, avx512_bf16_kernel> || std::same_as<Kernel, amx_kernel>;

/// Whether the kernel takes its float activation rows in pair order (`pair_order.hpp`).
template <class Kernel>
inline constexpr bool takes_paired_activations =
    std::same_as<Kernel, avx2_bf16_kernel> || std::same_as<Kernel, avx512_pairs_kernel>;

}  // namespace moe_routing::cpu
