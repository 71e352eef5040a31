#!/usr/bin/env python3
"""Turns Google Benchmark JSON from the executor benchmark into the Markdown tables of
docs/benchmarks/executor.md and an SVG of latency against |active| with the fitted line.

usage: report.py executor.json OUT.md OUT.svg "machine" "compiler" "commit"
Medians are used when the JSON holds repetitions (aggregate_name == "median")."""
import json
import sys


def medians(path):
    data = json.load(open(path))
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].split("/min_time")[0].split("/real_time")[0]
        rows[name] = b
    return data["context"], rows


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    intercept = my - slope * mx
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return slope, intercept, 1 - ss_res / ss_tot


def svg_plot(points, slope, intercept, r2, path):
    width, height, left, bottom, top, right = 640, 400, 70, 50, 40, 30
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x_hi, y_hi = max(xs) * 1.05, max(ys) * 1.1
    sx = lambda x: left + x / x_hi * (width - left - right)
    sy = lambda y: height - bottom - y / y_hi * (height - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="24" font-size="15" font-weight="bold">MoE layer latency against active experts (n = 16)</text>',
           f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" fill="none" stroke="#333"/>']
    for i in range(0, 6):
        x = x_hi * i / 5
        out.append(f'<text x="{sx(x):.1f}" y="{height - bottom + 18}" text-anchor="middle">{x:.0f}</text>')
        y = y_hi * i / 5
        out.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.0f}</text>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">active experts</text>')
    out.append(f'<text transform="translate(18 {(top + height - bottom) / 2}) rotate(-90)" text-anchor="middle">ms per layer</text>')
    out.append(f'<line x1="{sx(0):.1f}" y1="{sy(intercept):.1f}" x2="{sx(x_hi):.1f}" y2="{sy(intercept + slope * x_hi):.1f}" stroke="#d62728" stroke-dasharray="5 3"/>')
    for x, y in points:
        out.append(f'<circle class="point" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="#1f77b4"/>')
    out.append(f'<text x="{left + 10}" y="{top + 18}" fill="#d62728">fit: {slope:.3f} ms per expert + {intercept:.2f} ms, R² = {r2:.4f}</text>')
    out.append('</svg>')
    open(path, "w").write("\n".join(out) + "\n")


def main():
    path, md_path, svg_path, machine, compiler, commit = sys.argv[1:7]
    context, rows = medians(path)
    bandwidth = rows["bandwidth/read"]["bytes_per_second"]
    lines = [f"- **Machine**: {machine}", f"- **Compiler**: {compiler}", f"- **Commit**: {commit}",
             f"- **Run**: {context.get('date', '')}, {context.get('num_cpus')} CPUs, "
             f"{'repetitions, medians' if any(b.get('aggregate_name') for b in rows.values()) else 'single runs'}", ""]
    ws = rows["bandwidth/read"]["working_set_MiB"]
    lines += ["## Memory-read bandwidth (same binary)", "",
              f"STREAM-like read of a {ws:.0f} MiB buffer with both cores: **{bandwidth / 1e9:.1f} GB/s**.", "",
              "## Executor at decode batch sizes (Qwen3-30B-A3B shapes, bfloat16 weights)", "",
              "| n | mean active experts | ms per layer | effective weight bandwidth | fraction of read bandwidth |",
              "|---|---|---|---|---|"]
    for n in (1, 4, 16, 64):
        b = rows[f"executor/qwen3/n:{n}"]
        frac = b["weight_bytes_per_second"] / bandwidth
        lines.append(f"| {n} | {b['active']:.1f} | {b['real_time']:.2f} | {b['weight_bytes_per_second'] / 1e9:.1f} GB/s | {frac:.0%} |")
    points = []
    for name, b in rows.items():
        if name.startswith("executor/active:"):
            points.append((b["active"], b["real_time"]))
    points.sort()
    slope, intercept, r2 = fit([p[0] for p in points], [p[1] for p in points])
    lines += ["", "## Latency is linear in the number of active experts (n = 16)", "",
              "| active experts | ms per layer |", "|---|---|"]
    lines += [f"| {a:.0f} | {t:.2f} |" for a, t in points]
    lines += ["", f"Least-squares fit: **{slope:.3f} ms per active expert + {intercept:.2f} ms, R² = {r2:.4f}** "
              f"(the OEA paper measured R² = 0.99 on an H100). One expert's weights are "
              f"{3 * 768 * 2048 * 2 / 2**20:.1f} MiB, so the slope corresponds to "
              f"{3 * 768 * 2048 * 2 / (slope / 1e3) / 1e9:.1f} GB/s.", "", "![latency against active experts](executor_linearity.svg)", ""]
    # The sweep holds 16 x 8 = 128 assignments at every point, so its intercept is the
    # per-assignment compute of 128 of them: t_token = intercept / 128, t_fetch = slope.
    t_fetch, t_token = slope, intercept / 128.0
    lines += ["## The headline: one MoE layer (routing + executor) per preset, n = 16", "",
              f"Two models of each preset's time, as ratios to vanilla: |active| alone, and the OEA paper's "
              f"`T = N_active t_fetch + assignments t_token` with t_fetch = {t_fetch:.3f} ms and t_token = "
              f"{t_token * 1e3:.1f} us taken from the fit above.", "",
              "| preset | mean active | mean assignments | ms per layer | measured ratio | modelled by active | modelled by T | measured vs T |",
              "|---|---|---|---|---|---|---|---|"]
    vanilla = rows["layer/vanilla/n:16"]
    model = lambda b: t_fetch * b["active"] + t_token * b["assignments"]
    for name, b in rows.items():
        if not name.startswith("layer/"):
            continue
        preset = name.split("/")[1]
        measured = b["real_time"] / vanilla["real_time"]
        by_active = b["active"] / vanilla["active"]
        by_t = model(b) / model(vanilla)
        lines.append(f"| {preset} | {b['active']:.1f} | {b['assignments']:.0f} | {b['real_time']:.2f} | {measured:.2f} | "
                     f"{by_active:.2f} | {by_t:.2f} | {(measured - by_t) / by_t:+.0%} |")
    open(md_path, "w").write("\n".join(lines) + "\n")
    svg_plot(points, slope, intercept, r2, svg_path)


if __name__ == "__main__":
    main()
