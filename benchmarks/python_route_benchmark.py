"""Routing from Python: moe_routing against torch.topk + softmax routing, in one run.

    PYTHONPATH=build/python /usr/bin/python3 benchmarks/python_route_benchmark.py [--out docs/benchmarks/python.md]

For each shape (n tokens of E = 128 experts, k = 8, float32 and bfloat16 router logits),
times per call, on fresh logits each call (as in decode):
  torch      softmax in float32, torch.topk, renormalise, ids cast to int32 (what vLLM's
             CPU path and transformers' Qwen3-MoE block compute)
  route      moe_routing.route(logits, "topk(k=8)"): one-shot, outputs allocated per call
  Router     moe_routing.Router(...).route(logits): bound once, buffers reused
  op         torch.ops.moe_routing.route(logits, "topk(k=8)")
  Router oea the same Router with oea(k0=4,k=8), the batch-aware policy
The methods are interleaved within every repetition (a block of calls each) and each
figure is the median over repetitions, so drift of a shared machine hits them alike.
"""

import argparse
import os
import platform
import random
import statistics
import subprocess
import time

import torch

import moe_routing


def torch_routing(logits, top_k):
    probabilities = torch.softmax(logits, dim=-1, dtype=torch.float32)
    weights, ids = torch.topk(probabilities, top_k, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), ids.to(torch.int32)


def methods(tokens, experts, top_k):
    vanilla = moe_routing.Router("topk(k=8)", max_tokens=tokens, experts=experts, top_k=top_k)
    oea = moe_routing.Router("oea(k0=4,k=8)", max_tokens=tokens, experts=experts, top_k=top_k)
    chosen = {
        "torch": lambda logits: torch_routing(logits, top_k),
        "route": lambda logits: moe_routing.route(logits, "topk(k=8)", top_k=top_k),
        "Router": vanilla.route,
        "Router oea": oea.route,
    }
    if moe_routing.has_torch_op:
        chosen["op"] = lambda logits: torch.ops.moe_routing.route(logits, "topk(k=8)", top_k=top_k)
    return chosen


def per_call_seconds(function, inputs):
    start = time.perf_counter()
    for logits in inputs:
        function(logits)
    return (time.perf_counter() - start) / len(inputs)


def machine_lines():
    def command(*words):
        try:
            return subprocess.run(words, capture_output=True, text=True, timeout=10).stdout.strip()
        except OSError:
            return ""

    cpu = next((line.split(":", 1)[1].strip() for line in command("lscpu").splitlines() if "Model name" in line), "")
    here = os.path.dirname(os.path.abspath(__file__))
    commit = command("git", "-C", here, "rev-parse", "HEAD")
    dirty = command("git", "-C", here, "status", "--porcelain", "--untracked-files=no")
    compiler = command("c++", "--version").splitlines()
    return [
        f"- CPU: {cpu} ({os.cpu_count()} logical CPUs), torch threads: {torch.get_num_threads()}",
        f"- Python {platform.python_version()}, torch {torch.__version__}, moe_routing {moe_routing.__version__}",
        f"- compiler of the module: {compiler[0] if compiler else 'unknown'} (Release, CMake)",
        f"- commit: {commit}" + (" + uncommitted working tree" if dirty else ""),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--experts", type=int, default=128)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200, help="calls per method in each repetition")
    parser.add_argument("--out", help="also write the Markdown table to this file")
    args = parser.parse_args()

    generator = torch.Generator().manual_seed(0)
    rows = []
    names = None
    for dtype in (torch.float32, torch.bfloat16):
        for tokens in args.tokens:
            inputs = [torch.randn(tokens, args.experts, generator=generator).to(dtype) for _ in range(args.calls)]
            chosen = methods(tokens, args.experts, args.top_k)
            names = list(chosen)
            for function in chosen.values():  # warm-up: first calls size buffers
                per_call_seconds(function, inputs[:10])
            samples = {name: [] for name in chosen}
            for _ in range(args.repeats):
                order = list(chosen)
                random.shuffle(order)
                for name in order:
                    samples[name].append(per_call_seconds(chosen[name], inputs))
            medians = {name: statistics.median(values) * 1e6 for name, values in samples.items()}
            rows.append((str(dtype).replace("torch.", ""), tokens, medians))
            print(f"{rows[-1][0]:>8} n={tokens:<4} " + "  ".join(f"{n} {m:.1f} us" for n, m in medians.items()))

    lines = [
        f"Median time per call in microseconds (E = {args.experts}, k = {args.top_k}, fresh logits each call; "
        f"{args.repeats} interleaved repetitions of {args.calls} calls). `x torch`: Router's time over torch's.",
        "",
        "| dtype | n | " + " | ".join(names) + " | Router x torch |",
        "|---|---:|" + "---:|" * len(names) + "---:|",
    ]
    for dtype, tokens, medians in rows:
        cells = " | ".join(f"{medians[name]:.1f}" for name in names)
        lines.append(f"| {dtype} | {tokens} | {cells} | {medians['Router'] / medians['torch']:.2f}x |")
    lines += ["", *machine_lines()]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)


if __name__ == "__main__":
    main()
