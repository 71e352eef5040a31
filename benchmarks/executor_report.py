#!/usr/bin/env python3
"""Executor benchmark JSON -> docs/benchmarks/executor.md (read bandwidth, effective weight
bandwidth at decode batch sizes, each layer beside its compute alone and its paired read,
latency against |active| with its least-squares fit) and executor_linearity.svg.

usage: executor_report.py executor.json OUT_DIR "machine" "compiler" "commit"
The fit is also written to executor_fit.json for layer_report.py's two-term model."""
import json
import os
import sys

from svg_chart import header, line_chart, medians

EXPERT_MIB = 3 * 768 * 2048 * 2 / 2**20


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return slope, intercept, 1 - ss_res / ss_tot if ss_tot > 0 else 1.0


def overlap_table(rows):
    """Each batch size's layer beside its compute alone (executor/qwen3-compute: every expert
    using one expert's weights, in the caches) and its paired read (the layer's time times its
    paired fraction). Hidden = how much of the shorter of the two the layer overlapped:
    1 when it took the longer of them, 0 when it took their sum."""
    table = []
    for n in sorted(int(name.split(":")[-1]) for name in rows if name.startswith("executor/qwen3-compute/n:")):
        layer, compute = rows.get(f"executor/qwen3/n:{n}"), rows[f"executor/qwen3-compute/n:{n}"]
        if layer is None or "fraction_of_read" not in layer:
            continue
        # The read's time from two medians (the layer's time and its fraction), not the median
        # of each layer's own read: close enough at the repetitions this suite runs.
        total, alone = layer["real_time"], compute["real_time"]
        read = total * layer["fraction_of_read"]
        if read <= 0 or alone <= 0:
            continue
        if total <= max(alone, read):  # no longer than the longer one: nothing left unhidden
            hidden = "all"
        elif total >= alone + read:
            hidden = "none"
        else:
            hidden = f"{(alone + read - total) / min(alone, read):.0%}"
        table.append(f"| {n} | {total:.2f} | {alone:.2f} | {read:.2f} | {hidden} | {read / max(alone, read):.0%} |")
    if not table:
        return []
    return ["", "## Compute and memory: how much of one the other hides", "",
            "The same plans with every expert using one expert's weights (`executor/qwen3-compute`, in the caches) "
            "take the executor's compute alone; the paired read is the layer's memory traffic alone. A layer "
            "that overlapped them fully takes the longer; one that overlapped nothing, their sum. The last "
            "column is the paired fraction full overlap would reach.", "",
            "| n | layer ms | compute alone ms | paired read ms | shorter one hidden | paired fraction at full overlap |",
            "|---|---|---|---|---|---|"] + table


def huge_pages_table(rows):
    """Each batch size's layer with its weights in the default pages beside the same layer with
    them in huge pages (executor/qwen3-huge-pages), with the share of each pool the kernel put
    in huge pages."""
    table = []
    for n in sorted(int(name.split(":")[-1]) for name in rows if name.startswith("executor/qwen3-huge-pages/n:")):
        default, huge = rows.get(f"executor/qwen3/n:{n}"), rows[f"executor/qwen3-huge-pages/n:{n}"]
        if default is None:
            continue
        paired = [f"{b['fraction_of_read']:.0%}" if "fraction_of_read" in b else "n/a" for b in (default, huge)]
        shares = [f"{b['huge_page_fraction']:.0%}" if "huge_page_fraction" in b else "n/a" for b in (default, huge)]
        table.append(f"| {n} | {default['real_time']:.2f} | {huge['real_time']:.2f} | "
                     f"{huge['real_time'] / default['real_time']:.3f} | {paired[0]} | {paired[1]} | "
                     f"{shares[0]} | {shares[1]} |")
    if not table:
        return []
    return ["", "## Weights in huge pages", "",
            "The same layers with the weights in transparent huge pages (`executor/qwen3-huge-pages`: "
            "madvise(MADV_HUGEPAGE) before the first write). Both paired fractions are against a read of "
            "default-page memory. The last two columns are the share of each pool the kernel actually holds in "
            "huge pages: the system setting decides.", "",
            "| n | default pages ms | huge pages ms | huge / default | paired fraction, default | paired fraction, huge "
            "| in huge pages, default | in huge pages, huge |",
            "|---|---|---|---|---|---|---|---|"] + table


def main():
    path, out, machine, compiler, commit = sys.argv[1:6]
    context, rows = medians(path)
    bandwidth = rows["bandwidth/read"]["bytes_per_second"]
    lines = ["# Reference executor against memory bandwidth", ""] + header(machine, compiler, commit, context, rows)
    lines += ["Generated by `benchmarks/run_benchmarks.sh` from `benchmarks/executor_benchmark.cpp`.", "",
              "## Memory-read bandwidth (same binary)", "",
              f"STREAM-like read of a {rows['bandwidth/read']['working_set_MiB']:.0f} MiB buffer with every core: "
              f"**{bandwidth / 1e9:.1f} GB/s**.", "",
              "## Executor at decode batch sizes (Qwen3-30B-A3B shapes, bfloat16 weights)", "",
              "E = 128, d = 2048, h = 768, k = 8; vanilla plans of a `qwen3-30b-a3b` synthetic trace, a fresh step and the "
              "next of three layers each iteration: 3.4 GiB of distinct weights, beyond the last-level cache.", "",
              "Two fractions: over the reference above, and over a paired read: each layer is followed (untimed) by "
              "a plain read of as many bytes as its active experts hold, measured milliseconds after the layer. This "
              "machine's bandwidth drifts by 20% and more between moments (other tenants), which moves the first "
              "ratio; the paired one cancels the drift. The goal (80%) is met only where both are at or above it.", "",
              "| n | mean active experts | ms per layer | effective weight bandwidth | over the reference | over the paired read |",
              "|---|---|---|---|---|---|"]
    for name, b in sorted(rows.items(), key=lambda item: int(item[0].split(":")[-1]) if item[0].startswith("executor/qwen3/") else 0):
        if name.startswith("executor/qwen3/"):
            frac = b["weight_bytes_per_second"] / bandwidth
            paired = f"{b['fraction_of_read']:.0%}" if "fraction_of_read" in b else "n/a"
            lines.append(f"| {name.split(':')[-1]} | {b['active']:.1f} | {b['real_time']:.2f} | "
                         f"{b['weight_bytes_per_second'] / 1e9:.1f} GB/s | {frac:.0%} | {paired} |")
    lines += overlap_table(rows)
    lines += huge_pages_table(rows)
    points = sorted((b["active"], b["real_time"]) for name, b in rows.items() if name.startswith("executor/active:"))
    if len(points) >= 2:
        slope, intercept, r2 = fit([p[0] for p in points], [p[1] for p in points])
        lines += ["", "## Latency is linear in the number of active experts (n = 16)", "",
                  "| active experts | ms per layer |", "|---|---|"]
        lines += [f"| {a:.0f} | {t:.2f} |" for a, t in points]
        lines += ["", f"Least-squares fit: **{slope:.3f} ms per active expert + {intercept:.2f} ms, R² = {r2:.4f}** "
                  f"(the OEA paper measured R² = 0.99 on an H100). One expert's weights are {EXPERT_MIB:.1f} MiB, so the "
                  f"slope corresponds to {EXPERT_MIB * 2**20 / (slope / 1e3) / 1e9:.1f} GB/s.", "",
                  "![latency against active experts](executor_linearity.svg)", ""]
        line_chart(os.path.join(out, "executor_linearity.svg"), "MoE layer latency against active experts (n = 16)",
                   "active experts", "ms per layer", {"measured (median)": points}, line=(slope, intercept),
                   note=f"fit: {slope:.3f} ms per expert + {intercept:.2f} ms, R² = {r2:.4f}")
        # Every sweep point holds 16 x 8 = 128 assignments, so the intercept is their compute.
        json.dump({"t_fetch_ms": slope, "t_assignment_ms": intercept / 128.0, "r2": r2},
                  open(os.path.join(out, "executor_fit.json"), "w"))
    open(os.path.join(out, "executor.md"), "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
