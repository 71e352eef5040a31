// The `moe_routing._core` extension module: `buffer_router` for Python. Arrays arrive as
// plain tuples (address, dtype name, shape, strides in elements, device) that the Python
// package makes from torch tensors and NumPy arrays, so this module needs neither
// library's headers; the routing itself runs with the GIL released.

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>
#include <moe_routing/version.hpp>

#include "array_argument.hpp"
#include "buffer_router.hpp"
#include "routing_arguments.hpp"

namespace py = pybind11;
namespace mr = moe_routing;
using mr::python::array_argument;
using mr::python::element_kind;

namespace {

element_kind kind_of(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  if (name == "float32") return element_kind::float32;
  if (name == "float16") return element_kind::float16;
  if (name == "bfloat16") return element_kind::bfloat16;
  if (name == "int32") return element_kind::int32;
  if (name == "int64") return element_kind::int64;
  if (name == "bool") return element_kind::boolean;
  if (name == "uint8") return element_kind::uint8;
  return element_kind::other;
}

/// The view of one array described by the package's `_describe` (None: not given). The
/// tuple's strings stay alive in `described` for the call.
array_argument argument_of(const py::handle& described) {
  array_argument array;
  if (described.is_none()) return array;
  const auto fields = py::reinterpret_borrow<py::tuple>(described);
  array.given = true;
  array.data = reinterpret_cast<const void*>(fields[0].cast<std::uintptr_t>());
  array.type_name = fields[1].cast<std::string_view>();
  array.kind = kind_of(array.type_name);
  const auto shape = py::reinterpret_borrow<py::tuple>(fields[2]);
  const auto strides = py::reinterpret_borrow<py::tuple>(fields[3]);
  array.rank = static_cast<int>(shape.size());
  for (int d = 0; d < array.rank && d < 2; ++d) {
    array.shape[d] = shape[static_cast<std::size_t>(d)].cast<std::int64_t>();
    array.strides[d] = strides[static_cast<std::size_t>(d)].cast<std::int64_t>();
  }
  array.device = fields[4].cast<std::string_view>();
  return array;
}

/// Routes with the GIL released: every Python object was read before, and the caller
/// keeps the arrays alive for the call.
void route(mr::python::buffer_router& router, const py::tuple& scores, const py::tuple& weights, const py::tuple& ids,
           const py::object& bias, const py::object& mask, const py::object& segments, const py::object& placement,
           std::string_view scoring, std::int64_t n_group, std::int64_t topk_group, std::string_view group_score,
           std::string_view phase, std::string_view padding, std::int64_t sentinel, std::optional<double> scale,
           std::string_view weighting, std::int64_t devices) {
  mr::python::routing_arguments arguments;
  arguments.scores = argument_of(scores);
  arguments.bias = argument_of(bias);
  arguments.mask = argument_of(mask);
  arguments.segments = argument_of(segments);
  arguments.placement = argument_of(placement);
  arguments.scoring = scoring;
  arguments.n_group = n_group;
  arguments.topk_group = topk_group;
  arguments.group_score = group_score;
  arguments.phase = phase;
  arguments.padding = padding;
  arguments.sentinel = sentinel;
  arguments.scale = scale;
  arguments.weights = weighting;
  arguments.devices = devices;
  const array_argument weights_out = argument_of(weights);
  const array_argument ids_out = argument_of(ids);
  const py::gil_scoped_release unlocked;
  router.route(arguments, weights_out, ids_out);
}

/// The last call's summary as a dict, copied under the router's lock (with the GIL
/// released while waiting for it), so a call on another thread never tears it.
py::dict summary_of(const mr::python::buffer_router& router) {
  mr::python::buffer_router::summary_copy copy;
  {
    const py::gil_scoped_release unlocked;
    copy = router.copy_summary();
  }
  py::dict summary;
  summary["active_count"] = copy.active_count;
  summary["selected_count"] = copy.selected_count;
  summary["active_experts"] = copy.active_experts;
  summary["expert_tokens"] = copy.expert_tokens;
  summary["device_loads"] = copy.device_loads;
  summary["max_device_load"] = copy.max_device_load;
  summary["counts"] = copy.counts;
  return summary;
}

}  // namespace

PYBIND11_MODULE(_core, module) {
  module.doc() = "moe-routing's CPU router over caller-owned buffers (use the moe_routing package, not this module)";
  module.attr("version") = MOE_ROUTING_VERSION_STRING;
  module.attr("max_tokens") = mr::max_tokens;
  module.attr("max_experts") = mr::max_experts;
  module.attr("max_top_k") = mr::max_top_k;
  // routing_error and argument_error derive from std::invalid_argument, which pybind11
  // raises as ValueError with the C++ message (parameter, value and requirement).

  py::class_<mr::python::buffer_router>(module, "BufferRouter")
      .def(py::init([](std::string_view policy, std::int64_t top_k, std::optional<std::int64_t> max_tokens,
                       std::int64_t experts) {
             if (!max_tokens.has_value()) return new mr::python::buffer_router(policy, top_k);  // grows
             // Sizes checked before the workspace is allocated for them.
             if (*max_tokens < 0 || *max_tokens > mr::max_tokens) {
               throw mr::python::argument_error("max_tokens = " + std::to_string(*max_tokens) + ": must be in [0, " +
                                                std::to_string(mr::max_tokens) + "]");
             }
             if (experts < 2 || experts > mr::max_experts) {
               throw mr::python::argument_error("experts = " + std::to_string(experts) + ": must be in [2, " +
                                                std::to_string(mr::max_experts) + "]");
             }
             const mr::workspace_shape bound{static_cast<int>(*max_tokens), static_cast<int>(experts), 1};
             return new mr::python::buffer_router(policy, top_k, &bound);
           }),
           py::arg("policy"), py::arg("top_k") = 0, py::arg("max_tokens") = py::none(), py::arg("experts") = 0)
      .def("route", &route, py::arg("scores"), py::arg("weights"), py::arg("ids"), py::arg("bias"), py::arg("mask"),
           py::arg("segments"), py::arg("placement"), py::arg("scoring"), py::arg("n_group"), py::arg("topk_group"),
           py::arg("group_score"), py::arg("phase"), py::arg("padding"), py::arg("sentinel"), py::arg("scale"),
           py::arg("weighting"), py::arg("devices"))
      .def_property_readonly("top_k", &mr::python::buffer_router::top_k)
      .def_property_readonly("max_tokens",
                             [](const mr::python::buffer_router& r) { return r.fixed() ? r.bound().max_tokens : -1; })
      .def_property_readonly("experts",
                             [](const mr::python::buffer_router& r) { return r.fixed() ? r.bound().experts : 0; })
      .def("summary", &summary_of);

  module.def(
      "preferred_top_k", [](std::string_view policy) { return mr::preferred_top_k(mr::parse_policy_or_throw(policy)); },
      py::arg("policy"), "The plan width a policy implies when no top_k is given (0 when it does not say).");
}
