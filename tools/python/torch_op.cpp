// `torch.ops.moe_routing.route`: the router registered with PyTorch's dispatcher, so
// that TorchScript and engines' custom-op hooks can call it like any ATen operator
// (torch 1.13, Debian's, has no torch.compile; nothing here is tested with it). The
// routing is inference-only: scores that need a gradient are refused. A CPU kernel only: Debian's torch is a CPU build;
// a CUDA kernel over backends/cuda would be registered here for a CUDA build (docs/python.md). Loaded by the
// moe_routing package with torch.ops.load_library.

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "array_argument.hpp"
#include "buffer_router.hpp"
#include "routing_arguments.hpp"

namespace mr = moe_routing;
using mr::python::array_argument;
using mr::python::element_kind;

namespace {

struct dtype_name {
  c10::ScalarType type;
  element_kind kind;
  std::string_view name;
};
constexpr dtype_name dtype_names[] = {
    {c10::ScalarType::Float, element_kind::float32, "torch.float32"},
    {c10::ScalarType::Half, element_kind::float16, "torch.float16"},
    {c10::ScalarType::BFloat16, element_kind::bfloat16, "torch.bfloat16"},
    {c10::ScalarType::Int, element_kind::int32, "torch.int32"},
    {c10::ScalarType::Long, element_kind::int64, "torch.int64"},
    {c10::ScalarType::Bool, element_kind::boolean, "torch.bool"},
    {c10::ScalarType::Byte, element_kind::uint8, "torch.uint8"},
};

array_argument argument_of(const at::Tensor& tensor) {
  array_argument array;
  array.given = true;
  array.kind = element_kind::other;
  array.type_name = c10::toString(tensor.scalar_type());
  for (const dtype_name& known : dtype_names) {
    if (known.type == tensor.scalar_type()) array.kind = known.kind, array.type_name = known.name;
  }
  array.rank = static_cast<int>(tensor.dim());
  for (int d = 0; d < array.rank && d < 2; ++d) {
    array.shape[d] = tensor.size(d);
    array.strides[d] = tensor.stride(d);
  }
  array.device = tensor.device().is_cpu() ? "cpu" : tensor.device().is_cuda() ? "cuda" : "another device";
  array.data = tensor.device().is_cpu() ? tensor.data_ptr() : nullptr;
  return array;
}

array_argument argument_of(const c10::optional<at::Tensor>& tensor) {
  return tensor.has_value() ? argument_of(*tensor) : array_argument{};
}

/// This thread's routers, one per policy text and plan width: each keeps its workspace,
/// so a caller that repeats a policy routes without allocating after its first call.
mr::python::buffer_router& router_for(std::string_view policy, std::int64_t top_k) {
  struct entry {
    std::string policy;
    std::int64_t top_k;
    std::unique_ptr<mr::python::buffer_router> router;
  };
  thread_local std::vector<entry> routers;
  for (entry& known : routers) {
    if (known.policy == policy && known.top_k == top_k) return *known.router;
  }
  constexpr std::size_t most_policies = 16;  // a sweep of many texts must not hold a workspace for each
  if (routers.size() == most_policies) routers.erase(routers.begin());
  auto router = std::make_unique<mr::python::buffer_router>(policy, top_k);
  routers.push_back({std::string(policy), top_k, std::move(router)});
  return *routers.back().router;
}

std::tuple<at::Tensor, at::Tensor> route(const at::Tensor& scores, c10::string_view policy, c10::string_view scoring,
                                         const c10::optional<at::Tensor>& bias, c10::OptionalIntArrayRef groups,
                                         c10::string_view group_score, const c10::optional<at::Tensor>& mask,
                                         const c10::optional<at::Tensor>& segments,
                                         const c10::optional<at::Tensor>& placement, c10::string_view phase,
                                         c10::string_view padding, std::int64_t sentinel, c10::optional<double> scale,
                                         c10::optional<c10::string_view> weights, c10::optional<std::int64_t> top_k,
                                         c10::optional<std::int64_t> devices) {
  const auto view = [](c10::string_view text) { return std::string_view(text.data(), text.size()); };
  try {
    mr::python::routing_arguments arguments;
    arguments.scores = argument_of(scores);
    arguments.bias = argument_of(bias);
    arguments.mask = argument_of(mask);
    arguments.segments = argument_of(segments);
    arguments.placement = argument_of(placement);
    arguments.scoring = view(scoring);
    if (groups.has_value()) {
      if (groups->size() != 2) {
        throw mr::python::argument_error("groups has " + std::to_string(groups->size()) +
                                         " entries: must be [n_group, topk_group]");
      }
      arguments.n_group = (*groups)[0];
      arguments.topk_group = (*groups)[1];
    }
    arguments.group_score = view(group_score);
    arguments.phase = view(phase);
    arguments.padding = view(padding);
    arguments.sentinel = sentinel;
    if (scale.has_value()) arguments.scale = *scale;  // NaN is refused, not read as "not given"
    if (weights.has_value()) arguments.weights = view(*weights);
    if (devices.has_value() && *devices < 1) {
      throw mr::python::argument_error("devices = " + std::to_string(*devices) + ": must be in [1, " +
                                       std::to_string(mr::max_experts) + "] (or None)");
    }
    arguments.devices = devices.value_or(0);
    if (top_k.has_value() && *top_k < 1) {  // 0 would read as "the policy's k": only None means that
      throw mr::python::argument_error("top_k = " + std::to_string(*top_k) + ": must be in [1, " +
                                       std::to_string(mr::max_top_k) + "] (or None)");
    }
    if (scores.requires_grad() && c10::GradMode::is_enabled()) {
      throw mr::python::argument_error(
          "scores.requires_grad = True: the routing is inference-only (not differentiable); call it under "
          "torch.no_grad() or pass scores.detach()");
    }
    mr::python::buffer_router& router = router_for(view(policy), top_k.value_or(0));
    mr::python::require_cpu(arguments.scores, "scores");
    const std::int64_t n = scores.dim() == 2 ? scores.size(0) : 0;
    at::Tensor weights_out = at::empty({n, router.top_k()}, scores.options().dtype(at::kFloat));
    at::Tensor ids_out = at::empty({n, router.top_k()}, scores.options().dtype(at::kInt));
    router.route(arguments, argument_of(weights_out), argument_of(ids_out));
    return {weights_out, ids_out};
  } catch (const std::invalid_argument& error) {
    TORCH_CHECK_VALUE(false, error.what());  // ValueError in Python, as the module raises
  }
}

}  // namespace

TORCH_LIBRARY(moe_routing, library) {
  library.def(
      "route(Tensor scores, str policy, *, str scoring=\"softmax\", Tensor? bias=None, int[]? groups=None, "
      "str group_score=\"top2_sum\", Tensor? mask=None, Tensor? segments=None, Tensor? placement=None, "
      "str phase=\"decode\", str padding=\"sentinel\", int sentinel=-1, float? scale=None, str? weights=None, "
      "int? top_k=None, int? devices=None) -> (Tensor weights, Tensor ids)");
}

TORCH_LIBRARY_IMPL(moe_routing, CPU, library) { library.impl("route", route); }
