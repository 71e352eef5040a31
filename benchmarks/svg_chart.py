"""Small SVG charts for the benchmark reports (no dependencies beyond Python 3):
line charts on linear or log axes, and grouped bar charts with modelled markers."""
import math

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 720, 440, 80, 170, 40, 55


def _ticks(lo, hi, log):
    if log:
        first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        return [10.0 ** e for e in range(first, last + 1)]
    step = 10 ** math.floor(math.log10((hi - lo) / 5 or 1))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= 6:
            step *= m
            break
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2)]


def _label(v):
    if v >= 1000 or (0 < v < 0.01):
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:g}"


def _frame(title, xlabel, ylabel):
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">',
            '<rect width="100%" height="100%" fill="white"/>',
            f'<text x="{LEFT}" y="24" font-size="15" font-weight="bold">{title}</text>',
            f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="#333"/>',
            f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 12}" text-anchor="middle">{xlabel}</text>',
            f'<text transform="translate(20 {(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" text-anchor="middle">{ylabel}</text>']


def _legend(names, markers=()):
    out = []
    for i, name in enumerate(names):
        y = TOP + 12 + 18 * i
        out.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{y - 9}" width="12" height="12" fill="{PALETTE[i % len(PALETTE)]}"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 30}" y="{y + 2}">{name}</text>')
    for j, (name, shape) in enumerate(markers):
        y = TOP + 12 + 18 * (len(names) + j)
        out.append(f'<text x="{WIDTH - RIGHT + 12}" y="{y + 2}">{shape} {name}</text>')
    return out


def line_chart(path, title, xlabel, ylabel, series, log_x=False, log_y=False, line=None, note=None):
    """series: {name: [(x, y), ...]}; line: optional (slope, intercept) drawn dashed."""
    xs = [x for points in series.values() for x, _ in points]
    ys = [y for points in series.values() for _, y in points]
    x_lo, x_hi = (min(xs) / 1.3, max(xs) * 1.3) if log_x else (0, max(xs) * 1.05)
    y_lo, y_hi = (min(ys) / 1.5, max(ys) * 1.5) if log_y else (0, max(ys) * 1.1)
    tx = (lambda v: math.log10(v)) if log_x else (lambda v: v)
    ty = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    sx = lambda v: LEFT + (tx(v) - tx(x_lo)) / (tx(x_hi) - tx(x_lo)) * (WIDTH - LEFT - RIGHT)
    sy = lambda v: HEIGHT - BOTTOM - (ty(v) - ty(y_lo)) / (ty(y_hi) - ty(y_lo)) * (HEIGHT - TOP - BOTTOM)
    out = _frame(title, xlabel, ylabel)
    for v in _ticks(x_lo, x_hi, log_x):
        if x_lo <= v <= x_hi:
            out.append(f'<text x="{sx(v):.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{_label(v)}</text>')
    for v in _ticks(y_lo, y_hi, log_y):
        if y_lo <= v <= y_hi:
            out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{LEFT - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{_label(v)}</text>')
    if line:
        slope, intercept = line
        out.append(f'<line x1="{sx(x_lo):.1f}" y1="{sy(intercept + slope * x_lo):.1f}" x2="{sx(x_hi):.1f}" '
                   f'y2="{sy(intercept + slope * x_hi):.1f}" stroke="#d62728" stroke-dasharray="5 3"/>')
    for i, (name, points) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        points = sorted(points)
        if len(points) > 1:
            out.append('<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>'.format(
                color, " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)))
        out += [f'<circle class="point" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>' for x, y in points]
    if note:
        out.append(f'<text x="{LEFT + 10}" y="{TOP + 18}" fill="#d62728">{note}</text>')
    out += _legend(list(series)) + ["</svg>"]
    open(path, "w").write("\n".join(out) + "\n")


def bar_chart(path, title, ylabel, groups, series, markers=None, marker_name="modelled"):
    """groups: x labels; series: {name: [value per group]}; markers: {name: [value per group]}
    drawn as black ticks on the matching bars."""
    y_hi = max(max(v for values in series.values() for v in values), max((v for values in (markers or {}).values() for v in values), default=0)) * 1.1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    sy = lambda v: HEIGHT - BOTTOM - v / y_hi * plot_h
    out = _frame(title, "", ylabel)
    for v in _ticks(0, y_hi, False):
        if v <= y_hi:
            out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{LEFT - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{_label(v)}</text>')
    group_w = plot_w / len(groups)
    bar_w = group_w * 0.8 / len(series)
    for g, label in enumerate(groups):
        x0 = LEFT + g * group_w + group_w * 0.1
        out.append(f'<text x="{LEFT + (g + 0.5) * group_w:.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{label}</text>')
        for i, (name, values) in enumerate(series.items()):
            x = x0 + i * bar_w
            out.append(f'<rect class="bar" x="{x:.1f}" y="{sy(values[g]):.1f}" width="{bar_w - 1:.1f}" '
                       f'height="{HEIGHT - BOTTOM - sy(values[g]):.1f}" fill="{PALETTE[i % len(PALETTE)]}"/>')
            if markers and name in markers:
                m = sy(markers[name][g])
                out.append(f'<line x1="{x:.1f}" x2="{x + bar_w - 1:.1f}" y1="{m:.1f}" y2="{m:.1f}" stroke="black" stroke-width="2"/>')
    out += _legend(list(series), [(marker_name, "▬")] if markers else []) + ["</svg>"]
    open(path, "w").write("\n".join(out) + "\n")


def medians(path):
    """{run name: benchmark row} from Google Benchmark JSON: the median aggregate when the
    run has repetitions, else the single run."""
    import json
    data = json.load(open(path))
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].split("/min_time")[0].split("/real_time")[0]
        rows[name] = b
    return data["context"], rows


def header(machine, compiler, commit, context, rows):
    repetitions = max((int(b.get("repetitions", 0)) for b in rows.values() if b.get("aggregate_name")), default=0)
    return [f"- **Machine**: {machine}", f"- **Compiler**: {compiler}", f"- **Commit**: {commit}",
            f"- **Run**: {context.get('date', '')}, {context.get('num_cpus')} CPUs, "
            f"{f'{repetitions} repetitions, medians' if repetitions else 'single runs (smoke mode: not figures to quote)'}", ""]
