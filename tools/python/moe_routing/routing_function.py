"""routing_function(): a policy as vLLM's `custom_routing_function`.

vLLM's FusedMoE calls custom_routing_function(hidden_states=..., gating_output=...,
topk=..., renormalize=...) and expects (topk_weights float32 [n, topk], topk_ids int32
[n, topk]); SGLang's TopK takes the same callable. The engine's `topk` is the plan width
and its `renormalize` chooses the weighting (refine's weights=renormalize or raw).
"""

from .routing import route


class RoutingFunction:
    """Callable with vLLM's custom_routing_function signature; `last_summary` holds the
    Summary of the latest call (|active|, |S|, per-expert tokens, device loads)."""

    def __init__(self, policy, options):
        self.policy = policy
        self.options = dict(options)
        self.last_summary = None

    def __call__(self, hidden_states, gating_output, topk, renormalize, global_num_experts=None):
        tokens = tuple(gating_output.shape)[0] if len(tuple(gating_output.shape)) == 2 else None
        if hidden_states is not None and tokens is not None and tuple(hidden_states.shape)[0] != tokens:
            raise ValueError(
                f"hidden_states.shape[0] = {tuple(hidden_states.shape)[0]}: must equal gating_output.shape[0] = {tokens}"
            )
        # Some engines pass the model's expert count; it must be the router output's width.
        if global_num_experts is not None and global_num_experts != tuple(gating_output.shape)[-1]:
            raise ValueError(
                f"global_num_experts = {global_num_experts}: must equal gating_output.shape[1] = "
                f"{tuple(gating_output.shape)[-1]} (routing over a shard of the experts is not supported)"
            )
        weights, ids, summary = route(
            gating_output,
            self.policy,
            top_k=topk,
            weights="renormalize" if renormalize else "raw",
            **self.options,
        )
        self.last_summary = summary
        return weights, ids

    def __repr__(self):
        return f"routing_function({self.policy!r})"


def routing_function(policy, **options):
    """A callable for vLLM's `custom_routing_function` (and SGLang's) that routes through
    `policy`, e.g. routing_function("oea(k0=4,k=8)"). `options` are route()'s: scoring,
    bias, groups, group_score, mask, segments, placement, devices, phase, padding,
    sentinel, scale. Give phase="prefill" for prompt batches (see README)."""
    for reserved in ("top_k", "weights"):
        if reserved in options:
            raise ValueError(f"{reserved}: set by the engine on each call (topk, renormalize), not here")
    return RoutingFunction(policy, options)
