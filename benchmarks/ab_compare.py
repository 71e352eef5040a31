#!/usr/bin/env python3
"""Interleaved A/B of two builds of one Google Benchmark binary, or of one binary under two
environments.

Runs the `before` and `after` binaries alternately `--rounds` times, each run with
`--repetitions` repetitions in random order, and prints a Markdown table of the median real
time of each benchmark for both (in the benchmark's own time unit) and their ratio, with the
median ratio over all cells. Alternating spreads the machine's slow spells over both
binaries; the binary that goes first changes from round to round (before, after; after,
before; ...), because on the development machines whichever ran first in every round was
once slower in every cell (docs/benchmarks/dispatch.md).

Each round's own ratio (the medians of that round's repetitions) is listed too, with how
many rounds came out below 1 and a two-sided sign test: on a machine whose bandwidth swings,
a 5-round run can show +-10% either way where 50 rounds settle a 5% change
(docs/benchmarks/executor_zen4.md, the sixth session).

Benchmarks that report `fraction_of_read` (the executor and layer suites' paired read: the
same bytes read right after each layer) get a second table, their paired fractions, and with
`--fast-read GBPS` those are sorted by the memory's state: a repetition whose paired read drew
more than GBPS counts as fast. Where the read flips between two states from minute to minute,
a time ratio partly says which binary met more of the fast state; the fraction within one
state is the comparison to trust. Per state, the table also says in how many rounds the after
side's median fraction came out higher and in how many lower, with the same sign test.

`--before-env NAME=VALUE` and `--after-env NAME=VALUE` (repeatable) set the environment of
one side, so one binary can be compared with itself under two settings
(`MOE_ROUTING_STREAM_CACHE=l1` against `l2`, `MOE_ROUTING_SWEEP_ORDER`, `MOE_ROUTING_RUN_AHEAD`,
`MOE_ROUTING_CPU_ISA`).
Standard library only (any python3).

  benchmarks/ab_compare.py BEFORE AFTER --filter 'route/seq/.*/n:(1|16|64)/E:(128|256)/k:8$'
  benchmarks/ab_compare.py B B --before-env MOE_ROUTING_STREAM_CACHE=l1 \\
      --after-env MOE_ROUTING_STREAM_CACHE=l2 --filter 'executor/qwen3/' --fast-read 42
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile


def run(binary, args, out, env):
    command = [binary, f"--benchmark_filter={args.filter}", f"--benchmark_repetitions={args.repetitions}",
               "--benchmark_enable_random_interleaving=true", f"--benchmark_min_time={args.min_time}",
               "--benchmark_format=json", f"--benchmark_out={out}", "--benchmark_out_format=json"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    with open(out) as f:
        text = f.read()
    if not text.strip():  # Google Benchmark writes no report when the filter matches nothing
        sys.exit(f"ab_compare.py: {binary} ran no benchmark matching --filter '{args.filter}' "
                 "(--benchmark_list_tests shows the names; most layer benchmarks end in /real_time)")
    report = json.loads(text)
    # Repetitions only (not the aggregates), and none that failed (`SkipWithError`: its time means nothing).
    return report["context"], [b for b in report["benchmarks"] if b.get("run_type") == "iteration" and
                               not b.get("error_occurred") and not b.get("skipped")]


def shown(time):
    """A time with four significant digits, whole numbers from 1,000 on (never an exponent)."""
    return f"{time:,.0f}" if time >= 1000 else f"{time:.4g}"


def environment_of(assignments, option):
    """os.environ with each NAME=VALUE of `assignments` set; exits naming `option` on a malformed one."""
    env = dict(os.environ)
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        if not equals or not name:
            sys.exit(f"ab_compare.py: {option} {assignment!r}: must be NAME=VALUE")
        env[name] = value
    return env


def sign_test(below, rounds):
    """Two-sided sign test: the chance of a split at least as uneven as `below` of `rounds`
    on one side (below 1 for the time ratios, lower for the paired fractions) when each round is
    equally likely to fall either side. Symmetric: `below` or the other side's count gives the
    same chance."""
    if rounds == 0:
        return 1.0
    tail = min(below, rounds - below)
    p = 2 * sum(math.comb(rounds, i) for i in range(tail + 1)) / 2**rounds
    return min(p, 1.0)


def round_ratios(before_rounds, after_rounds):
    """Per round, the median of after's repetitions over the median of before's. Each argument
    holds one list of repetition times per round."""
    return [statistics.median(a) / statistics.median(b) for b, a in zip(before_rounds, after_rounds) if a and b]


def times_by_round(rounds):
    """One benchmark's repetitions (a list of rows per round) as their real times, per round."""
    return [[row["real_time"] for row in rows] for rows in rounds]


def every_repetition(rounds):
    """One benchmark's repetitions of every round, as one list of rows."""
    return [row for rows in rounds for row in rows]


def paired_read_gbps(row):
    """The paired read's rate in GB/s for one repetition: the layer's weight bytes per second over
    the fraction (equal bytes, so read rate = layer rate / fraction), or None without both."""
    fraction, rate = row.get("fraction_of_read"), row.get("weight_bytes_per_second")
    if not fraction or not rate:
        return None
    return rate / fraction / 1e9


def repetitions_by_state(rows, fast_read):
    """The repetitions of `rows` (one benchmark's) that have a paired read, as {state: [rows]}:
    every one under "all" without `fast_read`, else under "fast" (paired read above `fast_read`
    GB/s) or "slow"."""
    states = {}
    for row in rows:
        read = paired_read_gbps(row)
        if read is None:
            continue
        state = "all" if fast_read is None else ("fast" if read > fast_read else "slow")
        states.setdefault(state, []).append(row)
    return states


def median_fraction(rows):
    return statistics.median(row["fraction_of_read"] for row in rows)


def round_fraction_signs(before_rounds, after_rounds):
    """In how many rounds the after side's median paired fraction came out higher than the
    before side's, and in how many lower (a tie counts as neither; a round without rows on both
    sides is left out). Each argument holds one list of rows per round. Why per round: the pooled
    medians hide which side each round favoured, and both sides of a round met the same machine."""
    higher = lower = 0
    for b, a in zip(before_rounds, after_rounds):
        if a and b:
            difference = median_fraction(a) - median_fraction(b)
            higher += difference > 0
            lower += difference < 0
    return higher, lower


def fraction_cell(rows):
    """The median paired fraction of `rows`, how many there were, and the medians of the layer's
    weight rate and of the paired read, or "none". Why both rates: within one state the read
    still ranges (47-61 GB/s in Zen 4's fast one), and a layer capped below it shows a lower
    fraction where the read was faster, so two sides' fractions compare only at like reads."""
    if not rows:
        return "none"
    layer = statistics.median(row["weight_bytes_per_second"] for row in rows) / 1e9
    read = statistics.median(paired_read_gbps(row) for row in rows)
    return f"{median_fraction(rows):.3f} ({len(rows)}; {layer:.1f} of {read:.1f} GB/s)"


def cpu_line(context):
    """Which CPU ran it: the executor and layer suites' own context (model, family) where the
    binary adds it, else Google Benchmark's host fields."""
    model = context.get("cpu_model")
    if model:
        family = context.get("cpu_family_model", "")
        return f"{model}{', ' + family if family else ''}; {context.get('num_cpus', '?')} CPUs"
    return f"{context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs at " \
           f"{context.get('mhz_per_cpu', '?')} MHz"


def natural_key(name):
    """`name` split into text and numbers, so n:4 sorts before n:16."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def print_tables(names, runs, fast_read):
    """The tables for `names`, from `runs[side][name]`: each benchmark's rows, a list per round."""
    ratios = []
    print("| benchmark | unit | before | after | after / before | rounds' ratios | rounds below and above 1 (sign test) |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        before_rounds, after_rounds = times_by_round(runs["before"][name]), times_by_round(runs["after"][name])
        before = statistics.median(t for times in before_rounds for t in times)
        after = statistics.median(t for times in after_rounds for t in times)
        ratios.append(after / before)
        unit = every_repetition(runs["before"][name])[0].get("time_unit", "ns")
        by_round = round_ratios(before_rounds, after_rounds)
        below, above = sum(r < 1 for r in by_round), sum(r > 1 for r in by_round)  # a tie says neither
        spread = f"{min(by_round):.3f}-{max(by_round):.3f}" if by_round else ""
        print(f"| `{name}` | {unit} | {shown(before)} | {shown(after)} | {after / before:.3f} | "
              f"{spread} | {below} below, {above} above (p = {sign_test(below, below + above):.3g}) |")
    print(f"\nMedian ratio over the {len(ratios)} cells: **{statistics.median(ratios):.3f}** "
          f"(lowest {min(ratios):.3f}, highest {max(ratios):.3f}).")
    rows = {side: {name: every_repetition(runs[side][name]) for name in names} for side in runs}
    paired = [name for name in names if any(paired_read_gbps(r) for side in rows for r in rows[side][name])]
    if not paired:
        return
    split = "" if fast_read is None else f", a repetition counted fast where its paired read drew over {fast_read:g} GB/s"
    print(f"\nPaired fractions (the layer's weight bandwidth over the read of the same bytes right after "
          f"it; medians, with the repetitions and the medians of the layer's weight rate and of the "
          f"paired read in brackets{split}):\n")
    print("| benchmark | state | before | after | after - before | rounds higher and lower (sign test) |\n"
          "|---|---|---|---|---|---|")
    for name in paired:
        before, after = repetitions_by_state(rows["before"][name], fast_read), \
            repetitions_by_state(rows["after"][name], fast_read)
        by_round = {side: [repetitions_by_state(round_rows, fast_read) for round_rows in runs[side][name]]
                    for side in runs}
        for state in sorted(set(before) | set(after)):
            b, a = before.get(state, []), after.get(state, [])
            difference = f"{median_fraction(a) - median_fraction(b):+.3f}" if a and b else ""
            higher, lower = round_fraction_signs([r.get(state, []) for r in by_round["before"]],
                                                 [r.get(state, []) for r in by_round["after"]])
            print(f"| `{name}` | {state} | {fraction_cell(b)} | {fraction_cell(a)} | {difference} | "
                  f"{higher} higher, {lower} lower (p = {sign_test(lower, higher + lower):.3g}) |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--filter", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--min-time", default="0.05")
    parser.add_argument("--before-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--after-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--fast-read", type=float, metavar="GBPS",
                        help="sort paired fractions by state: fast where the paired read drew more than GBPS")
    args = parser.parse_args()
    if args.rounds < 1 or args.repetitions < 1:
        sys.exit(f"ab_compare.py: --rounds {args.rounds} and --repetitions {args.repetitions} must be at least 1")
    environments = {"before": environment_of(args.before_env, "--before-env"),
                    "after": environment_of(args.after_env, "--after-env")}
    runs = {"before": {}, "after": {}}  # [side][benchmark]: its rows, a list per round
    contexts = {}
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(args.rounds):
            order = (("before", args.before), ("after", args.after))
            for side, binary in order if round_index % 2 == 0 else reversed(order):
                contexts[side], results = run(binary, args, f"{scratch}/{side}{round_index}.json",
                                              environments[side])
                for row in results:
                    runs[side].setdefault(row["run_name"], [[] for _ in range(args.rounds)])[round_index].append(row)
                print(f"round {round_index + 1}/{args.rounds}: {side} done", file=sys.stderr)
    names = sorted(set(runs["before"]) & set(runs["after"]), key=natural_key)
    for side, other in (("before", "after"), ("after", "before")):
        for name in sorted(set(runs[side]) - set(runs[other]), key=natural_key):
            print(f"ab_compare.py: {name} ran only on the {side} side; left out", file=sys.stderr)
    if not names:
        sys.exit("no benchmark matched the filter in both binaries")
    print(f"CPU: {cpu_line(contexts['before'])}; {args.rounds} rounds x {args.repetitions} repetitions\n")
    # Each side's binary, settings and the kernels it reports (the executor and layer suites):
    # that a setting took effect shows there.
    for side, binary, assignments in (("before", args.before, args.before_env), ("after", args.after, args.after_env)):
        kernels = contexts[side].get("kernels")
        print(f"- {side}: `{binary}`{' with ' + ' '.join(assignments) if assignments else ''}"
              f"{'; kernels: ' + kernels if kernels else ''}")
    print()
    print_tables(names, runs, args.fast_read)


if __name__ == "__main__":
    main()
