#!/usr/bin/env python3
"""Interleaved A/B of two builds of one Google Benchmark binary.

Runs the `before` and `after` binaries alternately `--rounds` times, each run with
`--repetitions` repetitions in random order, and prints a Markdown table of the median real
time of each benchmark for both (in the benchmark's own time unit) and their ratio, with the
median ratio over all cells. Alternating spreads the machine's slow spells over both
binaries; the binary that goes first changes from round to round (before, after; after,
before; ...), because on the development machines whichever ran first in every round was
once slower in every cell (docs/benchmarks/dispatch.md). Standard library only (any python3).

  benchmarks/ab_compare.py BEFORE AFTER --filter 'route/seq/.*/n:(1|16|64)/E:(128|256)/k:8$'
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile


def run(binary, args, out):
    command = [binary, f"--benchmark_filter={args.filter}", f"--benchmark_repetitions={args.repetitions}",
               "--benchmark_enable_random_interleaving=true", f"--benchmark_min_time={args.min_time}",
               "--benchmark_format=json", f"--benchmark_out={out}", "--benchmark_out_format=json"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        text = f.read()
    if not text.strip():  # Google Benchmark writes no report when the filter matches nothing
        sys.exit(f"ab_compare.py: {binary} ran no benchmark matching --filter '{args.filter}' "
                 "(--benchmark_list_tests shows the names; most layer benchmarks end in /real_time)")
    report = json.loads(text)
    return report["context"], [b for b in report["benchmarks"] if b.get("run_type") == "iteration"]


def shown(time):
    """A time with four significant digits, whole numbers from 1,000 on (never an exponent)."""
    return f"{time:,.0f}" if time >= 1000 else f"{time:.4g}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--filter", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--min-time", default="0.05")
    args = parser.parse_args()
    times = {"before": {}, "after": {}}
    units = {}
    context = None
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(args.rounds):
            order = (("before", args.before), ("after", args.after))
            for side, binary in order if round_index % 2 == 0 else reversed(order):
                context, rows = run(binary, args, f"{scratch}/{side}{round_index}.json")
                for row in rows:
                    times[side].setdefault(row["run_name"], []).append(row["real_time"])
                    units[row["run_name"]] = row.get("time_unit", "ns")
                print(f"round {round_index + 1}/{args.rounds}: {side} done", file=sys.stderr)
    names = sorted(set(times["before"]) & set(times["after"]))
    if not names:
        sys.exit("no benchmark matched the filter in both binaries")
    ratios = []
    print(f"CPU: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs at "
          f"{context.get('mhz_per_cpu', '?')} MHz; {args.rounds} rounds x {args.repetitions} repetitions\n")
    print("| benchmark | unit | before | after | after / before |\n|---|---|---|---|---|")
    for name in names:
        before = statistics.median(times["before"][name])
        after = statistics.median(times["after"][name])
        ratios.append(after / before)
        print(f"| `{name}` | {units[name]} | {shown(before)} | {shown(after)} | {after / before:.3f} |")
    print(f"\nMedian ratio over the {len(ratios)} cells: **{statistics.median(ratios):.3f}** "
          f"(lowest {min(ratios):.3f}, highest {max(ratios):.3f}).")


if __name__ == "__main__":
    main()
