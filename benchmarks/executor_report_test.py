#!/usr/bin/env python3
"""Checks executor_report.py's one-section-per-CPU-kind executor.md: which kind a run is, that
a run replaces only its own kind's section, and that the committed docs/benchmarks/executor.md
parses into the sections it shows (so the next run keeps them). Standard library only (any
python3); run by ctest as benchmark.executor_report."""
import json
import os
import tempfile

from report_checks import check, finish, load_report, here

report = load_report("executor_report")


def run_json(path, kernels, model="AMD EPYC", family="family 25, model 1", layer_ms=3.0):
    """A minimal Google Benchmark JSON of the executor suite: the read reference and one layer."""
    context = {"date": "2026-11-27T00:00:00+00:00", "num_cpus": 2, "cpu_model": model,
               "cpu_family_model": family, "cpu_flags": "avx2 fma f16c", "kernels": kernels}
    benchmarks = [
        {"name": "bandwidth/read/real_time", "run_name": "bandwidth/read/real_time", "run_type": "iteration",
         "real_time": 70.0, "bytes_per_second": 30e9, "working_set_MiB": 2048.0},
        {"name": "executor/qwen3/n:1/real_time", "run_name": "executor/qwen3/n:1/real_time", "run_type": "iteration",
         "real_time": layer_ms, "active": 8.0, "weight_bytes_per_second": 24e9, "fraction_of_read": 0.9},
    ]
    json.dump({"context": context, "benchmarks": benchmarks}, open(path, "w"))


# Which kind: the model and the first kernel kernel_report() names, in both of its forms.
key, title = report.cpu_kind({"cpu_model": "AMD EPYC", "cpu_family_model": "family 25, model 1",
                              "kernels": "cpu: avx2; executor: avx2_bf16 for bfloat16 weights, avx2 otherwise; x"})
check(key == "AMD EPYC, family 25 / avx2_bf16", f"kind of an AVX2 run: {key!r}")
check("family 25, model 1" in title and "`avx2_bf16`" in title, f"title of an AVX2 run: {title!r}")
key, _ = report.cpu_kind({"cpu_model": "X", "kernels": "cpu: portable; executor: portable for every weight type; x"})
check(key == "X / portable", f"kind of a portable run without a family: {key!r}")
key, _ = report.cpu_kind({"cpu_model": "AMD EPYC", "cpu_family_model": "family 26, model 2",
                          "kernels": "cpu: avx512_bf16; executor: avx512_bf16 for bfloat16 weights, avx512 otherwise"})
check(key == "AMD EPYC, family 26 / avx512_bf16", f"kind of a Zen 5 run: {key!r}")

# The multiply-add floor: each kernel family against its own peak, worked by hand. At n = 64,
# 512 pairs of 3 x 768 x 2048 = 4,718,592 multiply-adds are 2.416 G; at 100 G per second on each
# of 2 cores they take 12.08 ms. The read of 80 experts of 9 MiB at 30 GB/s takes 25.17 ms.
def floor_rows(peaks):
    rows = {"executor/qwen3/n:64": {"active": 80.0}}
    rows.update({name: {"multiply_adds_per_s": rate} for name, rate in peaks.items()})
    return rows


bf16_context = {"num_cpus": 2, "kernels": "cpu: avx512_bf16; executor: avx512_bf16 for bfloat16 weights, avx512 otherwise"}
lines, per_pair = report.multiply_add_floor(bf16_context, floor_rows({"compute/bf16_dot_peak_one_core": 100e9,
                                                                     "compute/fma_peak_one_core": 50e9}), 30e9)
check(per_pair is not None and abs(per_pair - 4718592 / 2e11 * 1e3) < 1e-12, f"avx512_bf16 floor per pair: {per_pair}")
check("| 64 | 512 | 2.42 G | 12.08 | 25.17 | 100% |" in lines, f"avx512_bf16 floor row: {lines[-1:]}")
check(any("vdpbf16ps" in line and "`compute/bf16_dot_peak_one_core`" in line for line in lines),
      "the avx512_bf16 floor names its peak")
_, per_pair = report.multiply_add_floor(bf16_context, floor_rows({"compute/fma_peak_one_core": 50e9}), 30e9)
check(per_pair is None, "avx512_bf16 without its own peak: no floor (never the 256-bit FMA peak)")
avx2_context = {"num_cpus": 2, "kernels": "cpu: avx2; executor: avx2_bf16 for bfloat16 weights, avx2 otherwise"}
lines, per_pair = report.multiply_add_floor(avx2_context, floor_rows({"compute/fma_peak_one_core": 25e9}), 30e9)
check("| 64 | 512 | 2.42 G | 48.32 | 25.17 | 52% |" in lines, f"avx2 floor row at a quarter of the rate: {lines[-1:]}")
# An AVX-512 CPU without bfloat16 instructions (Ice Lake) reads its floor against the 512-bit
# FMA peak, not the 256-bit one beside it: 2.416 G at 40 G on each of 2 cores is 30.20 ms.
icelake_context = {"num_cpus": 2, "kernels": "cpu: avx512; executor: avx512_pairs for bfloat16 weights, avx512 otherwise"}
lines, per_pair = report.multiply_add_floor(icelake_context, floor_rows({"compute/fma512_peak_one_core": 40e9,
                                                                        "compute/fma_peak_one_core": 25e9}), 30e9)
check("| 64 | 512 | 2.42 G | 30.20 | 25.17 | 83% |" in lines, f"avx512_pairs floor row: {lines[-1:]}")
amx_context = {"num_cpus": 2, "kernels": "cpu: amx; executor: amx for bfloat16 weights, avx512 otherwise"}
_, per_pair = report.multiply_add_floor(amx_context, floor_rows({"compute/bf16_dot_peak_one_core": 100e9}), 30e9)
check(per_pair is None, "AMX: no row-kernel floor")

with tempfile.TemporaryDirectory() as out:
    target = os.path.join(out, "executor.md")
    run_json(os.path.join(out, "zen3.json"), "cpu: avx2; executor: avx2_bf16 for bfloat16 weights, avx2 otherwise")
    run_json(os.path.join(out, "xeon.json"), "cpu: amx; executor: amx for bfloat16 weights, avx512 otherwise",
             model="Intel(R) Xeon(R) Processor", family="family 6, model 143")

    def generate(name):
        key, section = report.kind_section(os.path.join(out, name), out, "m", "c", "abc1234")
        existing = open(target, encoding="utf-8").read() if os.path.exists(target) else ""
        text = report.merged(existing, key, section)  # before opening for writing, as main() does
        open(target, "w", encoding="utf-8").write(text)
        return text

    first = generate("zen3.json")
    check([k for k, _ in report.sections_of(first)] == ["AMD EPYC, family 25 / avx2_bf16"], "a first run: one section")
    check(first.startswith(report.TITLE), "the file starts with its title")
    check("| 1 | 8.0 | 3.00 | 24.0 GB/s | 80% | 90% |" in first, "the layer row: 24 GB/s over a 30 GB/s read is 80%")
    both = generate("xeon.json")
    check([k for k, _ in report.sections_of(both)] == ["AMD EPYC, family 25 / avx2_bf16", "Intel(R) Xeon(R) Processor, family 6 / amx"],
          "another kind's run is added after the first")
    run_json(os.path.join(out, "zen3.json"), "cpu: avx2; executor: avx2_bf16 for bfloat16 weights, avx2 otherwise",
             layer_ms=4.0)
    again = generate("zen3.json")
    check([k for k, _ in report.sections_of(again)] == ["AMD EPYC, family 25 / avx2_bf16", "Intel(R) Xeon(R) Processor, family 6 / amx"],
          "a rerun keeps one section per kind, in their order")
    sections = dict(report.sections_of(again))
    check("| 4.00 |" in sections["AMD EPYC, family 25 / avx2_bf16"] and "| 3.00 |" not in sections["AMD EPYC, family 25 / avx2_bf16"],
          "a rerun replaces its own kind's figures")
    check(sections["Intel(R) Xeon(R) Processor, family 6 / amx"] == dict(report.sections_of(both))["Intel(R) Xeon(R) Processor, family 6 / amx"],
          "a rerun leaves the other kind's section as it was")
    check(again.count(report.TITLE) == 1, "the title once")

    # Text outside the sections (a note between them) is kept, and so is a last section without
    # a final newline.
    zen3, xeon = "AMD EPYC, family 25 / avx2_bf16", "Intel(R) Xeon(R) Processor, family 6 / amx"
    noted = again.replace(sections[xeon], "A note by hand.\n\n" + sections[xeon]).rstrip("\n")
    open(target, "w", encoding="utf-8").write(noted)
    kept = generate("zen3.json")
    check("A note by hand." in kept and [k for k, _ in report.sections_of(kept)] == [zen3, xeon],
          "a note between sections and an unterminated last section survive a rerun")
    # Markers that do not pair up: refused, the file left alone.
    broken = kept.replace(report.section_markers(xeon)[1], "<!-- end of cpu kind: something else -->")
    open(target, "w", encoding="utf-8").write(broken)
    try:
        generate("zen3.json")
        check(False, "a file with an unpaired marker is refused")
    except SystemExit as refusal:
        check("start markers" in str(refusal), f"the refusal says why: {refusal}")
    check(open(target, encoding="utf-8").read() == broken, "a refused file is left as it was")
    # The format before sections (one machine's report, no markers) is replaced whole.
    open(target, "w", encoding="utf-8").write(report.TITLE + "\n\n- **Machine**: of the format before sections\n")
    fresh = generate("xeon.json")
    check("format before sections" not in fresh and [k for k, _ in report.sections_of(fresh)] == [xeon], "an old-format report is replaced")

committed = open(os.path.join(here, "..", "docs", "benchmarks", "executor.md"), encoding="utf-8").read()
kinds = [k for k, _ in report.sections_of(committed)]
check(kinds[:2] == ["Intel(R) Xeon(R) Processor, family 6 / amx", "AMD EPYC, family 26 / avx512_bf16"]
      and "AMD EPYC, family 25 / avx2_bf16" in kinds, f"docs/benchmarks/executor.md's sections: {kinds}")
check(committed.count("## ") - committed.count("### ") == len(kinds),
      "docs/benchmarks/executor.md: one level-2 heading per CPU kind section")
# A rerun of any kind there, with the same figures, leaves the file exactly as it is.
check(all(report.merged(committed, k, text) == committed for k, text in report.sections_of(committed)),
      "docs/benchmarks/executor.md comes back unchanged when each section is replaced by itself")

finish("executor_report_test")
