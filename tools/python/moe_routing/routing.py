"""route() and Router: the C++ CPU router over torch tensors and NumPy arrays.

Both return float32 weights and int32 ids [n, k] (vLLM's and SGLang's topk_weights and
topk_ids) in the library the scores came from. The options mirror the C++
`routing_batch` and plan: scoring, bias, groups (n_group, topk_group) with group_score,
mask, segments, placement (with devices), phase, padding, sentinel; scale and weights
override the policy's refine(scale=..., weights=...). Bad input raises ValueError naming
the parameter and its value, as the C++ library's messages do.
"""

import numbers
import operator
import threading
from collections import OrderedDict, namedtuple

from . import _arrays, _core
from .summary import summary_of

Routing = namedtuple("Routing", ["weights", "ids", "summary"])


def _integer(value, name, low, high, requirement=None):
    """`value` as an int in [low, high], else ValueError naming `name` and the value (a bool
    is not an int here; a NumPy integer is)."""
    requirement = requirement or f"must be in [{low}, {high}]"
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ValueError(f"{name} = {value!r}: {requirement}, an int (not a bool)")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} = {value!r}: {requirement}, an int") from None
    if not low <= number <= high:
        raise ValueError(f"{name} = {number}: {requirement}")
    return number


def _top_k(top_k):
    """The plan width for _core (0: the policy's k, which only None asks for)."""
    if top_k is None:
        return 0
    return _integer(top_k, "top_k", 1, _core.max_top_k, f"must be in [1, {_core.max_top_k}] (or None)")


def _scale(scale):
    """None (the policy's scale) or a float: the C++ check refuses NaN, infinities and non-positive values."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise ValueError(f"scale = {scale!r}: must be a positive, finite float32 (or None)")
    return float(scale)


def _group_limit(groups):
    if groups is None:
        return 0, 0
    if (
        not isinstance(groups, (tuple, list))
        or len(groups) != 2
        or not all(isinstance(value, int) and not isinstance(value, bool) for value in groups)
    ):
        raise ValueError(f"groups = {groups!r}: must be (n_group, topk_group), two ints, or None")
    high = _core.max_experts
    return (
        _integer(groups[0], "groups[0] (n_group)", 1, high),
        _integer(groups[1], "groups[1] (topk_group)", 1, high),
    )


def _require_inference(scores):
    """The routing is not differentiable: scores that would need a gradient are refused."""
    if _arrays.is_torch(scores) and scores.requires_grad:
        import torch

        if torch.is_grad_enabled():
            raise ValueError(
                "scores.requires_grad = True: the routing is inference-only (not differentiable); "
                "call it under torch.no_grad() or pass scores.detach()"
            )


def _route_into(
    core,
    scores,
    weights_out,
    ids_out,
    *,
    scoring="softmax",
    bias=None,
    groups=None,
    group_score="top2_sum",
    mask=None,
    segments=None,
    placement=None,
    devices=None,
    phase="decode",
    padding="sentinel",
    sentinel=-1,
    scale=None,
    weights=None,
):
    _require_inference(scores)
    n_group, topk_group = _group_limit(groups)
    sentinel = _integer(sentinel, "sentinel", -(2**31), 2**31 - 1, "must fit in int32")
    if devices is None:
        devices = 0  # _core's "one more than the largest placement entry"
    else:
        devices = _integer(devices, "devices", 1, _core.max_experts, f"must be in [1, {_core.max_experts}] (or None)")
    scale = _scale(scale)
    segments = _arrays.index_array(segments, "segments")
    placement = _arrays.index_array(placement, "placement")
    core.route(
        _arrays.describe(scores, "scores"),
        _arrays.describe(weights_out, "weights"),
        _arrays.describe(ids_out, "ids"),
        _arrays.describe(bias, "bias"),
        _arrays.describe(mask, "mask"),
        _arrays.describe(segments, "segments"),
        _arrays.describe(placement, "placement"),
        scoring,
        n_group,
        topk_group,
        group_score,
        phase,
        padding,
        sentinel,
        scale,
        "" if weights is None else weights,
        devices,
    )


def _rows(scores):
    if not hasattr(scores, "shape"):
        _arrays.describe(scores, "scores")  # raises the TypeError that names what was given
    shape = tuple(scores.shape)
    return shape[0] if len(shape) == 2 else 0  # the C++ check names a wrong rank


# route() keeps one router per (policy, top_k) on each thread, so repeating a policy
# reuses its workspace; a sweep over many policies keeps only the latest few.
_routers = threading.local()
_routers_kept = 16


def _cached_router(policy, top_k):
    cache = getattr(_routers, "cache", None)
    if cache is None:
        cache = _routers.cache = OrderedDict()
    key = (policy, top_k)
    core = cache.get(key)
    if core is None:
        core = _core.BufferRouter(policy, top_k)
        cache[key] = core
        if len(cache) > _routers_kept:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return core


def route(scores, policy, *, top_k=None, **options):
    """Routes one batch of router output `scores` [n, E] through `policy` (text, e.g.
    "oea(k0=4,k=8)"). Returns Routing(weights, ids, summary); top_k is the plan width
    (default: the policy's k). Options: see the module's docstring and docs/python.md."""
    if not isinstance(policy, str):
        raise TypeError(f"policy: expected policy text such as 'oea(k0=4,k=8)', got {type(policy).__name__}")
    core = _cached_router(policy, _top_k(top_k))
    weights_out, ids_out = _arrays.empty_outputs(scores, _rows(scores), core.top_k)
    _route_into(core, scores, weights_out, ids_out, **options)
    return Routing(weights_out, ids_out, summary_of(core))


class Router:
    """A policy bound once to a shape (at most `max_tokens` tokens of `experts` experts),
    with its workspace and output buffers sized at construction or on the first call:
    routing allocates nothing after that, and runs with the GIL released.

    route() returns views of the router's own buffers, [n, k] of [max_tokens, k]: they
    hold the plan until the next call (copy them to keep one). summary() describes the
    last call. Use one Router per thread: the outputs are views of the router's buffers,
    overwritten by the next call from any thread (a lock only makes calls take turns, and
    summary() is never torn by another thread's call). Inference only: torch scores that
    need a gradient (requires_grad under grad mode) are refused."""

    def __init__(self, policy, *, max_tokens, experts, top_k=None):
        if not isinstance(policy, str):
            raise TypeError(f"policy: expected policy text such as 'oea(k0=4,k=8)', got {type(policy).__name__}")
        max_tokens = _integer(max_tokens, "max_tokens", 0, _core.max_tokens)
        experts = _integer(experts, "experts", 2, _core.max_experts)
        self._core = _core.BufferRouter(policy, _top_k(top_k), max_tokens, experts)
        self.policy = policy
        self._outputs = {}  # "torch" / "numpy": (weights, ids) [max_tokens, k]

    @property
    def top_k(self):
        return self._core.top_k

    @property
    def max_tokens(self):
        return self._core.max_tokens

    @property
    def experts(self):
        return self._core.experts

    def route(self, scores, **options):
        _require_inference(scores)
        kind = "torch" if _arrays.is_torch(scores) else "numpy"
        outputs = self._outputs.get(kind)
        if outputs is None:
            outputs = self._outputs[kind] = _arrays.empty_outputs(scores, self._core.max_tokens, self._core.top_k)
        rows = _rows(scores)
        if rows > self._core.max_tokens:
            raise ValueError(f"scores.shape[0] = {rows}: must be at most the Router's max_tokens = {self.max_tokens}")
        weights_out, ids_out = outputs[0][:rows], outputs[1][:rows]
        _route_into(self._core, scores, weights_out, ids_out, **options)
        return weights_out, ids_out

    def summary(self):
        """The Summary of the last call."""
        return summary_of(self._core)

    def __repr__(self):
        return f"Router({self.policy!r}, max_tokens={self.max_tokens}, experts={self.experts}, top_k={self.top_k})"
