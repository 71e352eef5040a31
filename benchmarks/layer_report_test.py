#!/usr/bin/env python3
"""Checks layer_report.py's columns against figures worked by hand: the measured ratio, the
|active| model, and the least ratio a CPU's multiply-adds allow (from executor_fit.json's floor
per pair), which appears only when the executor report of the same run measured a floor.
Standard library only (any python3); run by ctest as benchmark.layer_report."""
import json
import os
import sys
import tempfile

from report_checks import check, finish, load_report

report = load_report("layer_report")


def layer_row(policy, ms, active, assignments):
    name = f"layer/qwen3-30b-a3b/n:64/{policy}/real_time"
    return {"name": name, "run_name": name, "run_type": "iteration", "real_time": ms, "active": active,
            "assignments": assignments, "route_us": 10.0}


def generate(out, fit):
    path = os.path.join(out, "layer.json")
    json.dump({"context": {"date": "2026-11-28", "num_cpus": 2},
               "benchmarks": [layer_row("vanilla", 24.0, 80.0, 512), layer_row("lynx_acc", 15.0, 23.0, 512)]},
              open(path, "w"))
    fit_path = os.path.join(out, "executor_fit.json")
    if fit is None:
        if os.path.exists(fit_path):
            os.remove(fit_path)
    else:
        json.dump(fit, open(fit_path, "w"))
    sys.argv = ["layer_report.py", path, out, "m", "c", "abc1234"]
    report.main()
    return open(os.path.join(out, "layer.md"), encoding="utf-8").read()


with tempfile.TemporaryDirectory() as out:
    # Lynx-Acc: 15 / 24 = 0.62 measured, 23 / 80 = 0.29 by |active| (+117%). Its 512 pairs at
    # 0.02 ms each take 10.24 ms, 0.43 of vanilla's 24 ms: above 0.29, so that model is out of reach.
    text = generate(out, {"t_fetch_ms": 0.25, "t_assignment_ms": 0.01, "r2": 0.99, "floor_ms_per_pair": 0.02})
    check("| n:64 | lynx_acc | 23.0 | 15.00 | 0.62 | 0.29 | +117% | 0.43 |" in text,
          "Lynx-Acc's row: measured, |active| model, gap and least ratio")
    check("| n:64 | vanilla | 80.0 | 24.00 | 1.00 | 1.00 | +0% | 0.43 |" in text, "vanilla's row: the same pairs, the same least ratio")
    check("least by multiply-adds" in text and "20.0 us" in text, "the column is explained with the floor per pair")
    # A fit without a floor (an AMX run, or one from before the floor): no such column.
    text = generate(out, {"t_fetch_ms": 0.25, "t_assignment_ms": 0.01, "r2": 0.99})
    check("least by multiply-adds" not in text and "| n:64 | lynx_acc | 23.0 | 15.00 | 0.62 | 0.29 | +117% | " in text,
          "without a floor: the table as before")
    text = generate(out, None)
    check("least by multiply-adds" not in text, "without a fit: no least ratios")

finish("layer_report_test")
