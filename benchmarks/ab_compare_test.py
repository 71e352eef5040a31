#!/usr/bin/env python3
"""Checks ab_compare.py end to end against a stand-in benchmark binary (a script that writes
Google Benchmark JSON whose times and paired fractions follow its environment and which side
ran), with every expected figure worked by hand below. Standard library only (any python3);
run by ctest as benchmark.ab_compare."""
import os
import re
import stat
import subprocess
import sys
import tempfile

from report_checks import check, finish, load_report, here

compare = load_report("ab_compare")

# The sign test, by hand: 3 of 3 rounds below 1 has chance 2 x 1/8 either way; 2 of 5 is as
# even as 5 rounds can split; 38 of 54 below 1 (the sixth Zen 4 session) has
# 2 x sum_{i<=16} C(54, i) / 2^54 = 0.0038.
check(compare.sign_test(3, 3) == 0.25, f"sign test 3 of 3: {compare.sign_test(3, 3)}")
check(compare.sign_test(0, 3) == 0.25, f"sign test 0 of 3: {compare.sign_test(0, 3)}")
check(compare.sign_test(2, 5) == 1.0, f"sign test 2 of 5: {compare.sign_test(2, 5)}")
check(abs(compare.sign_test(38, 54) - 0.003838) < 1e-5, f"sign test 38 of 54: {compare.sign_test(38, 54)}")

# Per-round ratios are medians within each round, not pooled: round 1 [10, 12, 11] -> 11 and
# [9, 8, 10] -> 9; round 2 [20] -> 20 and [25] -> 25.
ratios = compare.round_ratios([[10, 12, 11], [20]], [[9, 8, 10], [25]])
check([round(r, 6) for r in ratios] == [round(9 / 11, 6), 1.25], f"round ratios: {ratios}")

# The paired read's rate: 30 GB/s of weights at fraction 0.6 means the read drew 50 GB/s.
check(abs(compare.paired_read_gbps({"fraction_of_read": 0.6, "weight_bytes_per_second": 30e9}) - 50) < 1e-9,
      "paired read rate")
check(compare.paired_read_gbps({"real_time": 1.0}) is None, "no paired read without its counters")
fast_row = {"fraction_of_read": 0.6, "weight_bytes_per_second": 30e9}  # read 50 GB/s
slow_row = {"fraction_of_read": 0.9, "weight_bytes_per_second": 27e9}  # read 30 GB/s
by_state = compare.repetitions_by_state([fast_row, slow_row, {"real_time": 1.0}], 42.0)
check(by_state == {"fast": [fast_row], "slow": [slow_row]}, f"repetitions by state: {by_state}")
check(compare.repetitions_by_state([fast_row], None) == {"all": [fast_row]},
      "without --fast-read every repetition counts as one state")
# Medians taken apart: fractions 0.6 and 0.9 -> 0.750, weight rates 30 and 27 -> 28.5 GB/s,
# reads 50 and 30 -> 40.0 GB/s.
cell = compare.fraction_cell([fast_row, slow_row])
check(cell == "0.750 (2; 28.5 of 40.0 GB/s)", f"fraction cell: {cell!r}")
check(compare.fraction_cell([]) == "none", "an empty state's cell")

# Per-round signs of the paired fraction: round 1 median 0.5 before, 0.6 after (higher); round 2
# 0.8 against 0.7 (lower); round 3 0.5 against 0.5 (a tie, neither); round 4 has no after rows
# (left out); round 5 median of [0.4, 0.9, 0.5] = 0.5 against 0.6 (higher).
def fractions(*values):
    return [{"fraction_of_read": v} for v in values]
signs = compare.round_fraction_signs([fractions(0.5), fractions(0.8), fractions(0.5), fractions(0.5),
                                      fractions(0.4, 0.9, 0.5)],
                                     [fractions(0.6), fractions(0.7), fractions(0.5), [], fractions(0.6)])
check(signs == (2, 1), f"per-round fraction signs: {signs}")

# End to end. The stand-in's layer takes 10 ms times AB_SCALE and moves a quarter of a GB of
# weights; its paired read draws 50 GB/s in rounds 1 and 3 and 30 GB/s in rounds 2 and 4 (a
# counter file of its runs, so both sides of a round meet the same state). Two routing cells
# beside it take 500 ns on both sides and report no paired read. A "swing" cell takes 10 ms
# before, and after 8 ms in rounds 1 and 2 but 12 ms in rounds 3 and 4: pooled, both sides'
# medians are 10 ms, while each round's own ratio is 0.8 or 1.2. Each run also writes what Google
# Benchmark adds that is not a repetition (an aggregate, a failed run with time 0), which the
# tables must leave out, and appends its scale to a log (which side ran when). Its kernels line
# names the scale it ran with, as the executor's names the settings it read.
stand_in = r'''#!{python}
import json, os, sys
scale = float(os.environ.get("AB_SCALE", "1"))
counter_file = os.environ["AB_STATE_FILE"]
count = int(open(counter_file).read()) if os.path.exists(counter_file) else 0
open(counter_file, "w").write(str(count + 1))
with open(counter_file + ".order", "a") as order:
    order.write(os.environ.get("AB_SCALE", "unset") + "\n")
read_gbps = 50.0 if (count // 2) % 2 == 0 else 30.0  # both sides of a round meet the same state
out = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark_out="))
repetitions = int(next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark_repetitions=")))
layer_ms = 10.0 * scale
weight_rate = 1e9 / (layer_ms / 1e3) / 4  # a quarter of a GB per layer
rows = []
for _ in range(repetitions):
    rows.append({{"name": "layer/real_time", "run_name": "layer/real_time", "run_type": "iteration",
                 "real_time": layer_ms, "time_unit": "ms", "weight_bytes_per_second": weight_rate,
                 "fraction_of_read": weight_rate / (read_gbps * 1e9)}})
    for route in ("route/n:16", "route/n:4"):
        rows.append({{"name": route, "run_name": route, "run_type": "iteration", "real_time": 500.0,
                     "time_unit": "ns"}})
    swing_ms = 10.0 if scale == 1.0 else (8.0 if count // 2 < 2 else 12.0)
    rows.append({{"name": "swing/real_time", "run_name": "swing/real_time", "run_type": "iteration",
                 "real_time": swing_ms, "time_unit": "ms"}})
    rows.append({{"name": "swing/real_time", "run_name": "swing/real_time", "run_type": "iteration",
                 "real_time": 0.0, "time_unit": "ms", "error_occurred": True, "error_message": "skipped"}})
rows.append({{"name": "layer/real_time_median", "run_name": "layer/real_time", "run_type": "aggregate",
             "aggregate_name": "median", "real_time": 1000.0, "time_unit": "ms"}})
context = {{"cpu_model": "Stand-in CPU", "cpu_family_model": "family 1, model 2", "num_cpus": 2,
           "kernels": "cpu: portable, scale " + os.environ.get("AB_SCALE", "unset")}}
json.dump({{"context": context, "benchmarks": rows}}, open(out, "w"))
'''.format(python=sys.executable)

with tempfile.TemporaryDirectory() as scratch:
    binary = os.path.join(scratch, "fake_benchmark")
    with open(binary, "w") as f:
        f.write(stand_in)
    os.chmod(binary, os.stat(binary).st_mode | stat.S_IXUSR)
    env = dict(os.environ, AB_STATE_FILE=os.path.join(scratch, "count"))
    result = subprocess.run(
        [sys.executable, os.path.join(here, "ab_compare.py"), binary, binary, "--filter", ".", "--rounds", "4",
         "--before-env", "AB_SCALE=1.0", "--after-env", "AB_SCALE=0.8", "--fast-read", "42"],
        capture_output=True, text=True, env=env)
    check(result.returncode == 0, f"ab_compare.py exited {result.returncode}: {result.stderr}")
    out = result.stdout
    check("CPU: Stand-in CPU, family 1, model 2; 2 CPUs; 4 rounds x 3 repetitions" in out, f"CPU line:\n{out}")
    check(f"- before: `{binary}` with AB_SCALE=1.0; kernels: cpu: portable, scale 1.0" in out and
          f"- after: `{binary}` with AB_SCALE=0.8; kernels: cpu: portable, scale 0.8" in out,
          f"each side's settings and the kernels it reported:\n{out}")
    # 10 ms against 8 ms in all 4 rounds: 4 below 1, none above, p = 2/16.
    check(re.search(r"\| `layer/real_time` \| ms \| 10 \| 8 \| 0\.800 \| 0\.800-0\.800 \| 4 below, 0 above \(p = 0\.125\) \|",
                    out), f"layer row:\n{out}")
    # Pooled medians hide the swing; the rounds' own ratios show it, 2 below 1 and 2 above.
    check(re.search(r"\| `swing/real_time` \| ms \| 10 \| 10 \| 1\.000 \| 0\.800-1\.200 \| 2 below, 2 above \(p = 1\) \|",
                    out), f"swing row:\n{out}")
    # Which side went first alternates: before, after; after, before; ...
    order = open(os.path.join(scratch, "count.order")).read().split()
    check(order == ["1.0", "0.8", "0.8", "1.0", "1.0", "0.8", "0.8", "1.0"], f"order of the runs: {order}")
    # The routing cells do not change: 500 ns both, every round a tie, which the sign test drops;
    # n:4 is listed before n:16.
    check(out.index("`route/n:4`") < out.index("`route/n:16`"), f"cells in natural order:\n{out}")
    check(re.search(r"\| `route/n:16` \| ns \| 500 \| 500 \| 1\.000 \| 1\.000-1\.000 \| 0 below, 0 above \(p = 1\) \|", out),
          f"route row:\n{out}")
    # Fractions: a quarter GB in 10 ms is 25 GB/s (before), in 8 ms 31.25 GB/s (after); over a
    # 50 GB/s read 0.500 and 0.625, over 30 GB/s 0.833 and 1.042. Rounds 1 and 3 fast, 2 and 4
    # slow: 6 repetitions of each side in each state.
    # Each state's two rounds both favour after: 2 higher, 0 lower, p = 2 x 1/4.
    check("| `layer/real_time` | fast | 0.500 (6; 25.0 of 50.0 GB/s) | 0.625 (6; 31.2 of 50.0 GB/s) | +0.125 | "
          "2 higher, 0 lower (p = 0.5) |" in out, f"fast-state fractions:\n{out}")
    check("| `layer/real_time` | slow | 0.833 (6; 25.0 of 30.0 GB/s) | 1.042 (6; 31.2 of 30.0 GB/s) | +0.208 | "
          "2 higher, 0 lower (p = 0.5) |" in out, f"slow-state fractions:\n{out}")
    check("`route/n:16` | fast" not in out and "`route/n:16` | all" not in out,
          "a benchmark without a paired read gets no fraction row")

    bad = subprocess.run([sys.executable, os.path.join(here, "ab_compare.py"), binary, binary, "--filter", ".",
                          "--after-env", "AB_SCALE"], capture_output=True, text=True, env=env)
    check(bad.returncode != 0 and "--after-env 'AB_SCALE': must be NAME=VALUE" in bad.stderr,
          f"a malformed --after-env: rc {bad.returncode}, {bad.stderr!r}")

finish("benchmark.ab_compare")
