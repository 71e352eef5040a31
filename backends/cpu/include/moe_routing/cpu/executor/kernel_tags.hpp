#pragma once
/// \file
/// The executor's projection kernels named by tag types, one per instruction-set level
/// (`cpu_features.hpp`). A call picks its level once (`kernel_choice.hpp`) and overload
/// resolution on the tag routes every projection of that call to its kernel, so what the
/// CPU supports is decided in one place instead of at each use.
///   - `portable_kernel`: plain loops the compiler maps onto whatever SIMD the build targets;
///   - `avx2_kernel`: AVX2 + FMA + F16C, weights widened to float, float multiply-adds;
///   - `avx512_kernel`: the same on AVX-512;
///   - `avx512_bf16_kernel`: vdpbf16ps on bfloat16 weight pairs and bfloat16 activations
///     (the products the AMX tiles form), float sums;
///   - `amx_kernel`: Intel AMX tiles for bfloat16 weights with bfloat16 activations.
/// The last two need bfloat16 weights with rounded activations (`bf16_activations`).

#include <concepts>

#include "moe_routing/cpu/simd/cpu_features.hpp"

namespace moe_routing::cpu {

struct portable_kernel {
  static constexpr isa_level level = isa_level::portable;
};
struct avx2_kernel {
  static constexpr isa_level level = isa_level::avx2;
};
struct avx512_kernel {
  static constexpr isa_level level = isa_level::avx512;
};
struct avx512_bf16_kernel {
  static constexpr isa_level level = isa_level::avx512_bf16;
};
struct amx_kernel {
  static constexpr isa_level level = isa_level::amx;
};

/// A kernel that multiplies row-major activation rows (not a tile-packed copy).
template <class Kernel>
concept row_kernel = std::same_as<Kernel, portable_kernel> || std::same_as<Kernel, avx2_kernel> ||
    std::same_as<Kernel, avx512_kernel> || std::same_as<Kernel, avx512_bf16_kernel>;

/// Whether the kernel's products are of bfloat16 activations (it takes them as bfloat16
/// rows or tiles), not float.
template <class Kernel>
inline constexpr bool takes_bf16_activations =
    std::same_as<Kernel, avx512_bf16_kernel> || std::same_as<Kernel, amx_kernel>;

}  // namespace moe_routing::cpu
