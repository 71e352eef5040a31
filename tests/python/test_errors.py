"""Bad input raises ValueError naming the parameter and its value (TypeError for what is
not an array at all), from route(), Router and the operator alike."""

import re

import pytest

torch = pytest.importorskip("torch")
numpy = pytest.importorskip("numpy")

import moe_routing  # noqa: E402


def raises(message, call, *args, **kwargs):
    with pytest.raises(ValueError, match=re.escape(message)):
        call(*args, **kwargs)


SCORES = torch.randn(4, 16)


@pytest.mark.parametrize(
    "scores, message",
    [
        (torch.zeros(4, 16, dtype=torch.int64), "scores.dtype = torch.int64: must be float32, float16 or bfloat16"),
        (numpy.zeros((4, 16)), "scores.dtype = float64: must be float32, float16 or bfloat16"),
        (torch.zeros(16), "scores.shape = [16]: must be 2-D [n, E]"),
        (torch.zeros(2, 4, 16), "scores.shape = [2, 4, ...]: must be 2-D [n, E]"),
        (torch.zeros(4, 1), "scores.shape[1] = 1: (E) must be in [2, 1024]"),
        (torch.zeros(4, 2048), "scores.shape[1] = 2048: (E) must be in [2, 1024]"),
        (torch.zeros(16, 4).t(), "scores.stride(1) = 4: must be 1"),
        (torch.zeros(1, 16).expand(4, 16), "scores.stride(0) = 0: must be at least E = 16"),
        (numpy.zeros((4, 16), dtype=numpy.float32)[::-1], "scores.stride(0) = -16: must be at least E = 16"),
        (torch.zeros(4, 16, device="meta"), "scores.device = meta: must be cpu"),
        (numpy.zeros((4, 16), dtype=">f4"), "scores.dtype = >f4: must be in this machine's byte order"),
    ],
)
def test_array_errors_name_the_parameter_and_value(scores, message):
    raises(message, moe_routing.route, scores, "topk(k=2)")
    raises(message, moe_routing.Router("topk(k=2)", max_tokens=8, experts=16).route, scores)


def test_non_arrays_are_type_errors():
    with pytest.raises(TypeError, match="scores: expected a torch.Tensor or a numpy.ndarray, got list"):
        moe_routing.route([[0.0, 1.0]], "topk(k=1)")
    with pytest.raises(TypeError, match="policy: expected policy text"):
        moe_routing.route(SCORES, 8)


@pytest.mark.parametrize(
    "policy, options, message",
    [
        ("topk(k=2", {}, "syntax error"),
        ("oea(k0=9,k=8)", {}, "prune.k0 = 9"),
        ("topk(k=17)", {}, "k = 17: must be at most the expert count E = 16"),
        ("topk(k=2)", {"top_k": 33}, "top_k = 33: must be in [1, 32]"),
        ("topk(k=2)", {"scoring": "tanh"}, "scoring = 'tanh': must be one of softmax, sigmoid, sqrtsoftplus"),
        ("topk(k=2)", {"phase": "train"}, "phase = 'train': must be one of decode, prefill"),
        ("topk(k=2)", {"padding": "zero"}, "padding = 'zero': must be one of sentinel, repeat"),
        ("topk(k=2)", {"weights": "softmax"}, "weights = 'softmax': must be one of renormalize, raw"),
        ("topk(k=2)", {"scale": -1.0}, "scale = -1.000000: must be a positive, finite float32"),
        ("topk(k=2)", {"sentinel": 2**40}, "sentinel = 1099511627776: must fit in int32"),
        ("topk(k=2)", {"bias": torch.zeros(3)}, "bias.shape = [3]: must be [16]"),
        ("topk(k=2)", {"bias": torch.zeros(16, dtype=torch.float64)}, "bias.dtype = torch.float64: must be float32"),
        ("topk(k=2)", {"bias": torch.zeros(32)[::2]}, "bias.stride(0) = 2: must be 1"),
        ("topk(k=2)", {"scoring": "probabilities", "bias": torch.zeros(16)}, "batch.bias"),
        ("topk(k=2)", {"mask": torch.ones(3, dtype=torch.bool)}, "mask.shape = [3]: must be [4]"),
        ("topk(k=2)", {"mask": torch.ones(4)}, "mask.dtype = torch.float32: must be bool or uint8"),
        ("topk(k=2)", {"groups": (3, 1)}, "groups.n_group = 3: must divide the expert count batch.E = 16"),
        ("topk(k=8)", {"groups": (8, 1)}, "groups.topk_group = 1: leaves topk_group * E / n_group candidate experts"),
        ("topk(k=2)", {"groups": (4,)}, "groups = (4,): must be (n_group, topk_group)"),
        ("topk(k=2)", {"groups": (4, 2), "group_score": "sum"}, "group_score = 'sum': must be one of top2_sum, max"),
        ("topk(k=2)", {"segments": [0, 2, 3]}, "segments[R] = 3: must equal batch.n = 4"),
        ("topk(k=2)", {"segments": [0, 3, 2, 4]}, "segments[2] = 2: must not be below the previous offset segments[1] = 3"),
        ("topk(k=2)", {"segments": [0, 9]}, "segments[1] = 9: must be in [0, 4]"),
        ("topk(k=2)", {"placement": [0] * 15 + [-1]}, "placement[15] = -1: must be in [0, 1023]"),
        ("topk(k=2)", {"placement": [0] * 15 + [5], "devices": 4}, "placement[15] = 5: must be in [0, device_count)"),
        ("topk(k=2)", {"placement": torch.zeros(16)}, "placement.dtype = torch.float32: must be int32 or int64"),
        ("topk(k=2)", {"devices": 2}, "devices = 2: needs a placement"),
    ],
)
def test_option_errors_name_the_parameter_and_value(policy, options, message):
    raises(message, moe_routing.route, SCORES, policy, **options)


def test_router_shape_errors():
    raises("max_tokens = 20000: must be in [0, 16384]", moe_routing.Router, "topk(k=2)", max_tokens=20000, experts=16)
    raises("experts = 1: must be in [2, 1024]", moe_routing.Router, "topk(k=2)", max_tokens=8, experts=1)
    raises("k = 4: must be at most the expert count E = 2", moe_routing.Router, "topk(k=4)", max_tokens=8, experts=2)
    router = moe_routing.Router("topk(k=2)", max_tokens=4, experts=16)
    raises("scores.shape[0] = 5: must be at most the Router's max_tokens = 4", router.route, torch.zeros(5, 16))
    raises("scores.shape[1] = 32: must equal the Router's experts = 16", router.route, torch.zeros(4, 32))


def test_errors_leave_the_router_usable():
    router = moe_routing.Router("oea(k0=2,k=4)", max_tokens=4, experts=16)
    with pytest.raises(ValueError):
        router.route(SCORES, scoring="tanh")
    weights, ids = router.route(SCORES)
    expected = moe_routing.route(SCORES, "oea(k0=2,k=4)")
    assert torch.equal(ids, expected.ids) and torch.equal(weights, expected.weights)
