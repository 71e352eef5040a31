"""moe-routing: batch-aware Mixture-of-Experts routing from Python.

    import moe_routing
    weights, ids, summary = moe_routing.route(router_logits, "oea(k0=4,k=8)")

route() and Router take torch tensors (float32, float16, bfloat16) and NumPy arrays
(float32, float16) and return float32 weights and int32 ids [n, k]; routing_function()
plugs a policy into vLLM's custom_routing_function; torch.ops.moe_routing.route is the
same router as a PyTorch operator (CPU). See docs/python.md.
"""

from . import _core
from .routing import Router, Routing, route
from .routing_function import routing_function
from .summary import Summary
from .torch_ops import load as _load_torch_ops

__version__ = _core.version
has_torch_op = _load_torch_ops()

__all__ = ["Router", "Routing", "Summary", "route", "routing_function", "has_torch_op"]
