"""The module's plans equal the C++ router's (cpu::router, tests/python/reference_router.cpp)
and `moe-route route`'s on the same .npy inputs, bit for bit."""

import os
import subprocess

import pytest

numpy = pytest.importorskip("numpy")

import moe_routing  # noqa: E402

TOOL = os.environ.get("MOE_ROUTE_BINARY")
REFERENCE = os.environ.get("MOE_ROUTING_REFERENCE_ROUTER")

POLICIES = ["topk(k=8)", "oea(k0=4,k=8)", "xshare(k0=1,m=16,k=8)", "lynx_lat(d=12,k=8)", "prune(k0=2) | refine(k=6)"]


def logits(tokens, experts, seed, dtype=numpy.float32):
    generator = numpy.random.default_rng(seed)
    return (generator.standard_normal((tokens, experts)) * 2).astype(dtype)


def run(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{command[0]} exited {result.returncode}: {result.stderr}"
    return result.stdout


@pytest.mark.skipif(not REFERENCE, reason="MOE_ROUTING_REFERENCE_ROUTER not set (CTest sets it)")
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float16])
@pytest.mark.parametrize("scoring", ["softmax", "sigmoid"])
def test_equal_to_the_cpp_router(tmp_path, policy, dtype, scoring):
    scores = logits(24, 128, seed=len(policy), dtype=dtype)
    numpy.save(tmp_path / "scores.npy", scores)
    top_k = moe_routing._core.preferred_top_k(policy)
    out = run([REFERENCE, str(tmp_path / "scores.npy"), policy, str(top_k), scoring, str(tmp_path / "ids.npy"),
               str(tmp_path / "weights.npy")])
    weights, ids, summary = moe_routing.route(scores, policy, scoring=scoring)
    assert numpy.array_equal(ids, numpy.load(tmp_path / "ids.npy"))
    assert numpy.array_equal(weights, numpy.load(tmp_path / "weights.npy"))
    assert out.strip() == f"active {summary.active_count} selected {summary.selected_count}"


TOOL_CASES = [
    ({}, []),
    ({"scoring": "sigmoid", "bias": "bias", "groups": (8, 4)}, ["--scoring", "sigmoid", "--bias", "bias", "--groups", "8:4"]),
    ({"groups": (8, 2), "group_score": "max"}, ["--groups", "8:2", "--group-score", "max"]),
    ({"mask": "mask", "padding": "repeat"}, ["--mask", "mask", "--padding", "repeat"]),
    ({"segments": "segments", "sentinel": 128, "scale": 2.5}, ["--segments", "segments", "--sentinel", "128", "--scale", "2.5"]),
    ({"placement": "placement"}, ["--placement", "placement"]),
    ({"phase": "prefill", "top_k": 10}, ["--phase", "prefill", "--top-k", "10"]),
    ({"scoring": "sqrtsoftplus"}, ["--scoring", "sqrtsoftplus"]),
]


@pytest.mark.skipif(not TOOL, reason="MOE_ROUTE_BINARY not set (CTest sets it where the tool is built)")
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", range(len(TOOL_CASES)))
def test_equal_to_moe_route(tmp_path, policy, case):
    options, flags = TOOL_CASES[case]
    tokens, experts = 24, 128
    scores = logits(tokens, experts, seed=case)
    generator = numpy.random.default_rng(100 + case)
    inputs = {
        "bias": generator.uniform(-0.1, 0.1, experts).astype(numpy.float32),
        "mask": generator.uniform(size=tokens) > 0.2,
        "segments": numpy.array([0, 5, 5, 13, tokens], dtype=numpy.int64),
        "placement": (numpy.arange(experts) % 4).astype(numpy.int32),
    }
    numpy.save(tmp_path / "scores.npy", scores)
    for name, array in inputs.items():
        numpy.save(tmp_path / f"{name}.npy", array)
    flags = [str(tmp_path / f"{flag}.npy") if flag in inputs else flag for flag in flags]
    options = {name: inputs[value] if isinstance(value, str) and value in inputs else value
               for name, value in options.items()}
    run([TOOL, "route", "--scores", str(tmp_path / "scores.npy"), "--policy", policy, "--ids",
         str(tmp_path / "ids.npy"), "--weights", str(tmp_path / "weights.npy"), *flags])
    weights, ids, _ = moe_routing.route(scores, policy, **options)
    assert numpy.array_equal(ids, numpy.load(tmp_path / "ids.npy"))
    assert numpy.array_equal(weights, numpy.load(tmp_path / "weights.npy"))
