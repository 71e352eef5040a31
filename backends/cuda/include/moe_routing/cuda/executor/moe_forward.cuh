#pragma once
/// \file
/// The CUDA reference executor: `moe_forward(x, n, plan, weights, y, ws, stream)` computes
/// y_i = sum over A_i of w_ie * down_e(silu(gate_e x_i) * up_e x_i) (+ shared experts),
/// as the CPU executor does, from a plan in device memory:
/// 1. align: a histogram of the plan's experts, an exclusive scan (CUB), and a scatter
///    that gathers each assigned token's x into its expert's contiguous rows;
/// 2. one cuBLAS GEMM per active expert and projection on `stream` (fp32 accumulation), so
///    each active expert's weights stream from memory once whatever its token count;
/// 3. SwiGLU and the weighted combine as kernels (the combine sums a token's experts in
///    slot order, so y does not depend on the scatter's order).
/// The GEMM sizes are the per-expert token counts, so the call copies E + 1 offsets to the
/// host once (one synchronisation): the price of calling cuBLAS per expert. Activations are
/// rounded to the weight type before each GEMM (bf16/f16 weights), as engines' GEMMs do.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cub/device/device_scan.cuh>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cuda/cuda_status.cuh"
#include "moe_routing/executor/executor_shape.hpp"
#include "moe_routing/executor/expert_weights.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing::cuda {

using moe_routing::executor_shape;

namespace detail {

inline status cublas_status(cublasStatus_t code, const char* call) noexcept {
  if (code == CUBLAS_STATUS_SUCCESS) return {};
  return fail(errc::device_error, call, static_cast<double>(code), "cuBLAS call failed");
}
#define MOE_ROUTING_CUBLAS_TRY(call) MOE_ROUTING_TRY(::moe_routing::cuda::detail::cublas_status((call), #call))

template <class Weight>
constexpr cudaDataType_t cuda_type() {
  if constexpr (std::is_same_v<Weight, float>) return CUDA_R_32F;
  if constexpr (std::is_same_v<Weight, bfloat16>) return CUDA_R_16BF;
  return CUDA_R_16F;
}

/// A float in the weight type (round to nearest even), as the GEMM inputs need it.
template <class Weight>
__device__ Weight from_float(float v) {
  if constexpr (std::is_same_v<Weight, float>) {
    return v;
  } else if constexpr (std::is_same_v<Weight, bfloat16>) {
    return to_bfloat16(v);
  } else {
    return to_float16(v);
  }
}

/// Rows one token contributes: its assigned experts plus every shared expert.
inline constexpr int max_rows_per_token = 64;

/// counts[e] = assignments to expert e; counts[experts] = assignments whose id or row count
/// is out of range or whose weight is not finite (reported by moe_forward before anything
/// reads them).
static __global__ void count_assignments_kernel(plan_view plan, int experts, int* counts) {
  const int token = blockIdx.x * blockDim.x + threadIdx.x;
  if (token >= plan.tokens) return;
  const int count = plan.counts[token];
  if (count < 0 || count > plan.top_k) {
    atomicAdd(counts + experts, 1);
    return;
  }
  for (int j = 0; j < count; ++j) {
    const int e = plan.ids[token * plan.top_k + j];
    // A NaN or infinite weight would turn the token's output row into NaN or infinity.
    const bool refused = e < 0 || e >= experts || !isfinite(plan.weights[token * plan.top_k + j]);
    atomicAdd(counts + (refused ? experts : e), 1);
  }
}

/// Gives every assignment a row of its expert's block and gathers x into it; shared experts
/// take rows routed_rows + s * n + token.
template <class Weight>
__global__ void gather_rows_kernel(const float* x, int d, plan_view plan, const int* offsets, int* cursor,
                                   int* row_of_slot, int routed_rows, int shared_experts, Weight* rows) {
  const int token = blockIdx.x;
  const int n = plan.tokens;
  __shared__ int targets[max_rows_per_token];
  const int count = plan.counts[token];
  if (threadIdx.x == 0) {
    for (int j = 0; j < count; ++j) {
      const int e = plan.ids[token * plan.top_k + j];
      targets[j] = offsets[e] + atomicAdd(cursor + e, 1);
      row_of_slot[token * plan.top_k + j] = targets[j];
    }
    for (int s = 0; s < shared_experts; ++s) targets[count + s] = routed_rows + s * n + token;
  }
  __syncthreads();
  const float* in = x + static_cast<long long>(token) * d;
  for (int t = 0; t < count + shared_experts; ++t) {
    Weight* out = rows + static_cast<long long>(targets[t]) * d;
    for (int c = threadIdx.x; c < d; c += blockDim.x) out[c] = from_float<Weight>(in[c]);
  }
}

/// act[r][c] = silu(gate_up[r][c]) * gate_up[r][h + c] for rows [first, first + count).
template <class Weight>
__global__ void swiglu_kernel(const float* gate_up, int ld_gate_up, int first, int count, int h, Weight* act,
                              int ld_act) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(count) * h) return;
  const long long r = first + i / h;
  const int c = static_cast<int>(i % h);
  const float g = gate_up[r * ld_gate_up + c];
  const float u = gate_up[r * ld_gate_up + h + c];
  act[r * ld_act + c] = from_float<Weight>(g / (1.0f + expf(-g)) * u);
}

/// y[token] = sum over its slots of w * out[row], then + each shared expert's row; a token
/// routed to nothing (padding) gets 0, as in the CPU executor.
static __global__ void combine_kernel(const float* out, int d, plan_view plan, const int* row_of_slot, int routed_rows,
                                      int shared_experts, float* y) {
  const int token = blockIdx.x;
  const int n = plan.tokens;
  const int shared = plan.counts[token] > 0 ? shared_experts : 0;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float sum = 0;
    for (int j = 0; j < plan.counts[token]; ++j) {
      sum += plan.weights[token * plan.top_k + j] *
             out[static_cast<long long>(row_of_slot[token * plan.top_k + j]) * d + c];
    }
    for (int s = 0; s < shared; ++s) sum += out[static_cast<long long>(routed_rows + s * n + token) * d + c];
    y[static_cast<long long>(token) * d + c] = sum;
  }
}

}  // namespace detail

/// Device buffers and the cuBLAS handle for one executor shape, allocated once.
template <score_element Weight>
class executor_workspace {
 public:
  /// Throws routing_error naming the size when one is out of range, before allocating; a
  /// failed allocation throws too, after freeing what was allocated before it.
  explicit executor_workspace(const executor_shape& shape) : shape_(shape) {
    throw_if_failed(validate_executor_shape(shape));
    try {
      allocate_all();
    } catch (...) {
      release();
      throw;
    }
  }
  executor_workspace(const executor_workspace&) = delete;
  executor_workspace& operator=(const executor_workspace&) = delete;
  ~executor_workspace() { release(); }

 private:
  void allocate_all() {
    const executor_shape& shape = shape_;
    const auto n = static_cast<std::size_t>(shape.max_tokens > 0 ? shape.max_tokens : 1);
    const auto rows = n * static_cast<std::size_t>(shape.top_k + shape.shared_experts);
    const int shared_h = shape.shared_intermediate > 0 ? shape.shared_intermediate : shape.intermediate;
    width_ = shape.intermediate > shared_h ? shape.intermediate : shared_h;
    allocate(counts_, shape.experts + 1);
    allocate(offsets_, shape.experts + 1);
    allocate(cursor_, shape.experts);
    allocate(row_of_slot_, n * static_cast<std::size_t>(shape.top_k));
    allocate(rows_, rows * static_cast<std::size_t>(shape.hidden));
    allocate(gate_up_, rows * 2 * static_cast<std::size_t>(width_));
    allocate(act_, rows * static_cast<std::size_t>(width_));
    allocate(out_, rows * static_cast<std::size_t>(shape.hidden));
    throw_if_failed(
        cuda_status(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes_, counts_, offsets_, shape.experts + 1),
                    "cub::DeviceScan::ExclusiveSum (size query)"));
    allocate(scan_storage_, scan_bytes_);
    host_offsets_.resize(static_cast<std::size_t>(shape.experts) + 1);
    throw_if_failed(detail::cublas_status(cublasCreate(&handle_), "cublasCreate"));
  }
  /// Frees whatever is allocated (null pointers are skipped).
  void release() noexcept {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = nullptr;
    for (void* p : {static_cast<void*>(counts_), static_cast<void*>(offsets_), static_cast<void*>(cursor_),
                    static_cast<void*>(row_of_slot_), static_cast<void*>(rows_), static_cast<void*>(gate_up_),
                    static_cast<void*>(act_), static_cast<void*>(out_), scan_storage_}) {
      if (p != nullptr) cudaFree(p);
    }
  }

 public:
  const executor_shape& shape() const noexcept { return shape_; }

  // The buffers, for moe_forward.
  int width() const noexcept { return width_; }
  int* counts() const noexcept { return counts_; }
  int* offsets() const noexcept { return offsets_; }
  int* cursor() const noexcept { return cursor_; }
  int* row_of_slot() const noexcept { return row_of_slot_; }
  Weight* rows() const noexcept { return rows_; }
  float* gate_up() const noexcept { return gate_up_; }
  Weight* act() const noexcept { return act_; }
  float* out() const noexcept { return out_; }
  void* scan_storage() const noexcept { return scan_storage_; }
  std::size_t scan_bytes() const noexcept { return scan_bytes_; }
  std::vector<int>& host_offsets() noexcept { return host_offsets_; }
  cublasHandle_t handle() const noexcept { return handle_; }

 private:
  template <class T>
  void allocate(T*& pointer, std::size_t count) {
    throw_if_failed(
        cuda_status(cudaMalloc(reinterpret_cast<void**>(&pointer), (count > 0 ? count : 1) * sizeof(T)), "cudaMalloc"));
  }
  void allocate(void*& pointer, std::size_t bytes) {
    throw_if_failed(cuda_status(cudaMalloc(&pointer, bytes > 0 ? bytes : 1), "cudaMalloc"));
  }

  executor_shape shape_;
  int width_ = 0;  ///< the wider of h and the shared experts' width: the row stride of act
  int* counts_ = nullptr;
  int* offsets_ = nullptr;
  int* cursor_ = nullptr;
  int* row_of_slot_ = nullptr;
  Weight* rows_ = nullptr;    ///< gathered x, one row per assignment (then shared rows)
  float* gate_up_ = nullptr;  ///< [rows, 2 * width]
  Weight* act_ = nullptr;     ///< [rows, width]
  float* out_ = nullptr;      ///< [rows, d]
  void* scan_storage_ = nullptr;
  std::size_t scan_bytes_ = 0;
  std::vector<int> host_offsets_;
  cublasHandle_t handle_ = nullptr;
};

namespace detail {

/// out[m x rows_out] (row-major, ld = ldc) = in[m x k] * W^T with W row-major [rows_out x k].
template <score_element Weight>
status project(cublasHandle_t handle, const Weight* w, int rows_out, int k, const Weight* in, int m, float* out,
               int ldc) {
  const float one = 1.0f, zero = 0.0f;
  // Column-major view: out^T [rows_out x m] = W [rows_out x k] * in^T [k x m]; W's row-major
  // storage is W^T in column-major, hence op T on it.
  return cublas_status(
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, rows_out, m, k, &one, w, cuda_type<Weight>(), k, in,
                   cuda_type<Weight>(), k, &zero, out, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

}  // namespace detail

/// Runs the MoE layer for the plan on `stream`. x and y are device [n x d] float32; the
/// plan's ids, weights and counts are device memory; `w`'s pointer tables are host arrays
/// of device pointers. Checks shapes on the host first, with the CPU executor's messages.
template <score_element Weight>
[[nodiscard]] status moe_forward(const float* x, int n, const plan_view& plan, const expert_weights<Weight>& w,
                                 float* y, executor_workspace<Weight>& ws, cudaStream_t stream = nullptr) {
  MOE_ROUTING_TRY(check_executor_call(x, n, plan, w, y, ws.shape()));
  if (w.shared_experts > detail::max_rows_per_token - max_top_k) {
    return fail(errc::invalid_parameter, "weights.shared_experts", w.shared_experts, "must be at most",
                "max_rows_per_token - max_top_k", detail::max_rows_per_token - max_top_k);
  }
  if (n == 0) return {};
  // An error an earlier, unrelated call left (peeked, so it stays for its owner): without
  // this, the first cudaGetLastError below would report it as this call's.
  MOE_ROUTING_CUDA_TRY(cudaPeekAtLastError());
  const int d = w.hidden, h = w.intermediate, experts = w.experts;
  const int shared_h = w.shared_intermediate > 0 ? w.shared_intermediate : h;
  const bool fused = w.layout == projection_layout::fused_gate_up;
  const int width = ws.width();

  // 1. align: per-expert counts, offsets, and the gathered rows.
  MOE_ROUTING_CUDA_TRY(cudaMemsetAsync(ws.counts(), 0, (experts + 1) * sizeof(int), stream));
  MOE_ROUTING_CUDA_TRY(cudaMemsetAsync(ws.cursor(), 0, experts * sizeof(int), stream));
  detail::count_assignments_kernel<<<(n + 255) / 256, 256, 0, stream>>>(plan, experts, ws.counts());
  MOE_ROUTING_CUDA_TRY(cudaGetLastError());
  std::size_t scan_bytes = ws.scan_bytes();
  MOE_ROUTING_CUDA_TRY(
      cub::DeviceScan::ExclusiveSum(ws.scan_storage(), scan_bytes, ws.counts(), ws.offsets(), experts + 1, stream));
  MOE_ROUTING_CUDA_TRY(cudaMemcpyAsync(ws.host_offsets().data(), ws.offsets(), (experts + 1) * sizeof(int),
                                       cudaMemcpyDeviceToHost, stream));
  int out_of_range = 0;
  MOE_ROUTING_CUDA_TRY(
      cudaMemcpyAsync(&out_of_range, ws.counts() + experts, sizeof(int), cudaMemcpyDeviceToHost, stream));
  MOE_ROUTING_CUDA_TRY(cudaStreamSynchronize(stream));  // the GEMM sizes, for cuBLAS
  if (out_of_range > 0) {
    return fail(errc::invalid_input, "plan.ids/counts/weights", out_of_range,
                "assignments have an expert id outside [0, weights.experts), a weight that is not finite, or a row "
                "count outside [0, top_k]",
                "weights.experts", experts);
  }
  const int routed_rows = ws.host_offsets()[static_cast<std::size_t>(experts)];
  detail::gather_rows_kernel<Weight><<<n, 128, 0, stream>>>(x, d, plan, ws.offsets(), ws.cursor(), ws.row_of_slot(),
                                                            routed_rows, w.shared_experts, ws.rows());
  MOE_ROUTING_CUDA_TRY(cudaGetLastError());

  // 2. gate and up per active expert (and shared expert), SwiGLU, then down.
  MOE_ROUTING_CUBLAS_TRY(cublasSetStream(ws.handle(), stream));
  const int ld_gate_up = 2 * width;
  const auto up_projection = [&](const Weight* gate, const Weight* up, const Weight* gate_up, int first, int m,
                                 int hh) -> status {
    const Weight* in = ws.rows() + static_cast<long long>(first) * d;
    float* out = ws.gate_up() + static_cast<long long>(first) * ld_gate_up;
    if (fused) return detail::project(ws.handle(), gate_up, 2 * hh, d, in, m, out, ld_gate_up);
    MOE_ROUTING_TRY(detail::project(ws.handle(), gate, hh, d, in, m, out, ld_gate_up));
    return detail::project(ws.handle(), up, hh, d, in, m, out + hh, ld_gate_up);
  };
  const auto swiglu = [&](int first, int m, int hh) -> status {
    const long long total = static_cast<long long>(m) * hh;
    detail::swiglu_kernel<Weight><<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(
        ws.gate_up(), ld_gate_up, first, m, hh, ws.act(), width);
    return cuda_status(cudaGetLastError(), "swiglu_kernel launch");
  };
  const auto down_projection = [&](const Weight* down, int first, int m, int hh) -> status {
    const float one = 1.0f, zero = 0.0f;
    return detail::cublas_status(
        cublasGemmEx(ws.handle(), CUBLAS_OP_T, CUBLAS_OP_N, d, m, hh, &one, down, detail::cuda_type<Weight>(), hh,
                     ws.act() + static_cast<long long>(first) * width, detail::cuda_type<Weight>(), width, &zero,
                     ws.out() + static_cast<long long>(first) * d, CUDA_R_32F, d, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx (down)");
  };
  for (int e = 0; e < experts; ++e) {
    const int first = ws.host_offsets()[static_cast<std::size_t>(e)];
    const int m = ws.host_offsets()[static_cast<std::size_t>(e) + 1] - first;
    if (m == 0) continue;  // inactive: its weights are never read
    MOE_ROUTING_TRY(up_projection(fused ? nullptr : w.gate[e], fused ? nullptr : w.up[e],
                                  fused ? w.gate_up[e] : nullptr, first, m, h));
  }
  if (routed_rows > 0) MOE_ROUTING_TRY(swiglu(0, routed_rows, h));
  for (int e = 0; e < experts; ++e) {
    const int first = ws.host_offsets()[static_cast<std::size_t>(e)];
    const int m = ws.host_offsets()[static_cast<std::size_t>(e) + 1] - first;
    if (m > 0) MOE_ROUTING_TRY(down_projection(w.down[e], first, m, h));
  }
  for (int s = 0; s < w.shared_experts; ++s) {
    const int first = routed_rows + s * n;
    MOE_ROUTING_TRY(up_projection(fused ? nullptr : w.shared_gate[s], fused ? nullptr : w.shared_up[s],
                                  fused ? w.shared_gate_up[s] : nullptr, first, n, shared_h));
    MOE_ROUTING_TRY(swiglu(first, n, shared_h));
    MOE_ROUTING_TRY(down_projection(w.shared_down[s], first, n, shared_h));
  }

  // 3. the weighted combine, in slot order.
  detail::combine_kernel<<<n, 128, 0, stream>>>(ws.out(), d, plan, ws.row_of_slot(), routed_rows, w.shared_experts, y);
  return cuda_status(cudaGetLastError(), "combine_kernel launch");
}

}  // namespace moe_routing::cuda
