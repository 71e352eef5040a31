"""A plain-PyTorch Qwen3-MoE-style sparse block whose routing moe_routing replaces.

The block follows the structure of Qwen3-MoE's sparse MoE layer (a linear gate over E
experts, softmax top-k routing with renormalised weights, SwiGLU experts), written here
from that description. Its `routing` is a callable with vLLM's custom_routing_function
signature, so moe_routing.routing_function(policy) drops in for the default top-k. The
block runs each expert once on the tokens routed to it, so its time follows the number
of distinct experts the batch loads (|active|): batch-aware policies lower both.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/qwen3_moe_block.py

Prints, per policy, the mean |active| and the median block time over interleaved
repetitions, and the share of vanilla top-k's gate mass the policy keeps.
"""

import argparse
import statistics
import time

import torch

import moe_routing


def vanilla_routing(hidden_states, gating_output, topk, renormalize):
    """What the block does without moe_routing: softmax in float32, top-k, renormalise."""
    probabilities = torch.softmax(gating_output, dim=-1, dtype=torch.float32)
    weights, ids = torch.topk(probabilities, topk, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)


class SwiGLUExpert(torch.nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = torch.nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class SparseMoEBlock(torch.nn.Module):
    """Qwen3-MoE's shape: E experts, top-k with norm_topk_prob, no shared expert."""

    def __init__(self, hidden, intermediate, experts, top_k, routing=vanilla_routing):
        super().__init__()
        self.top_k = top_k
        self.gate = torch.nn.Linear(hidden, experts, bias=False)
        self.experts = torch.nn.ModuleList(SwiGLUExpert(hidden, intermediate) for _ in range(experts))
        self.routing = routing

    def forward(self, hidden_states):
        router_logits = self.gate(hidden_states)
        weights, ids = self.routing(hidden_states, router_logits, self.top_k, True)
        output = torch.zeros_like(hidden_states)
        # One pass per distinct expert: its weights are read once for all of its tokens.
        # Padding ids (-1, a token given fewer than k experts) are skipped.
        for expert in torch.unique(ids[ids >= 0]).tolist():
            tokens, slots = torch.nonzero(ids == expert, as_tuple=True)
            contribution = self.experts[expert](hidden_states[tokens]) * weights[tokens, slots, None]
            output.index_add_(0, tokens, contribution.to(output.dtype))
        return output, router_logits


def correlated_batch(tokens, hidden, topics, generator):
    """Decode tokens from a few requests on a few topics: their routing overlaps, as in serving."""
    centres = torch.randn(topics, hidden, generator=generator)
    which = torch.randint(0, topics, (tokens,), generator=generator)
    return centres[which] + 0.5 * torch.randn(tokens, hidden, generator=generator)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=16, help="decode batch size")
    parser.add_argument("--hidden", type=int, default=1024, help="Qwen3-30B-A3B: 2048")
    parser.add_argument("--intermediate", type=int, default=384, help="Qwen3-30B-A3B: 768")
    parser.add_argument("--experts", type=int, default=128)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--policy",
        action="append",
        help="policy text (repeatable); default: topk, oea(k0=4), oea(k0=2), xshare(k0=1,m=16)",
    )
    args = parser.parse_args()
    policies = args.policy or ["topk(k=8)", "oea(k0=4,k=8)", "oea(k0=2,k=8)", "xshare(k0=1,m=16,k=8)"]

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    block = SparseMoEBlock(args.hidden, args.intermediate, args.experts, args.top_k).eval()
    functions = {policy: moe_routing.routing_function(policy) for policy in policies}
    batches = [correlated_batch(args.tokens, args.hidden, 4, generator) for _ in range(args.repeats)]

    times = {policy: [] for policy in policies}
    active = {policy: [] for policy in policies}
    kept_mass = {policy: [] for policy in policies}
    with torch.no_grad():
        for batch in batches:  # policies interleaved within each repetition
            logits = block.gate(batch)
            probabilities = torch.softmax(logits, dim=-1, dtype=torch.float32)
            vanilla_mass = torch.topk(probabilities, args.top_k, dim=-1).values.sum()
            for policy, function in functions.items():
                block.routing = function
                start = time.perf_counter()
                block(batch)
                times[policy].append(time.perf_counter() - start)
                active[policy].append(function.last_summary.active_count)
                _, ids = function(batch, logits, args.top_k, True)
                valid = ids >= 0
                kept = probabilities.gather(1, ids.clamp(min=0).long())[valid].sum()
                kept_mass[policy].append(float(kept / vanilla_mass))

    print(
        f"Qwen3-style MoE block: n = {args.tokens}, hidden {args.hidden}, intermediate {args.intermediate}, "
        f"E = {args.experts}, k = {args.top_k}, {args.repeats} repetitions, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    print(f"{'policy':<26} {'|active|':>9} {'block ms':>9} {'vs topk':>8} {'gate mass kept':>15}")
    baseline = statistics.median(times[policies[0]])
    for policy in policies:
        median = statistics.median(times[policy])
        print(
            f"{policy:<26} {statistics.mean(active[policy]):>9.1f} {median * 1e3:>9.2f} "
            f"{median / baseline:>7.2f}x {statistics.mean(kept_mass[policy]):>15.3f}"
        )


if __name__ == "__main__":
    main()
