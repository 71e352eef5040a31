"""Arguments route() and Router must take or refuse by parameter and value: empty NumPy
batches, sizes and scalars out of range, arrays the router cannot read (misaligned,
sparse, needing a gradient), and a summary read while another thread routes."""

import math
import threading

import pytest

numpy = pytest.importorskip("numpy")
import moe_routing  # noqa: E402


def test_numpy_zero_token_batch_routes():
    scores = numpy.empty((0, 16), numpy.float32)  # NumPy gives it strides (0, 0)
    weights, ids, summary = moe_routing.route(scores, "topk(k=2)")
    assert weights.shape == (0, 2) and ids.shape == (0, 2)
    assert summary.active_count == 0 and summary.counts == []
    router = moe_routing.Router("topk(k=2)", max_tokens=4, experts=16)
    weights, ids = router.route(scores)
    assert weights.shape == (0, 2) and ids.shape == (0, 2)
    assert router.summary().active_count == 0
    empty_router = moe_routing.Router("topk(k=2)", max_tokens=0, experts=16)
    weights, ids = empty_router.route(scores)
    assert weights.shape == (0, 2)


@pytest.mark.parametrize("max_tokens", [-1, -5, 2**70, True, 1.5])
def test_router_refuses_bad_max_tokens(max_tokens):
    with pytest.raises(ValueError, match="max_tokens"):
        moe_routing.Router("topk(k=2)", max_tokens=max_tokens, experts=16)


@pytest.mark.parametrize("experts", [-3, 0, 1, 2**70, True])
def test_router_refuses_bad_experts(experts):
    with pytest.raises(ValueError, match="experts"):
        moe_routing.Router("topk(k=2)", max_tokens=4, experts=experts)


@pytest.mark.parametrize("scale", [math.nan, math.inf, -math.inf, 0.0, -1.0, 1e300, "2"])
def test_refuses_bad_scale(scale):
    scores = numpy.zeros((2, 16), numpy.float32)
    with pytest.raises(ValueError, match="scale"):
        moe_routing.route(scores, "topk(k=2)", scale=scale)
    with pytest.raises(ValueError, match="scale"):
        moe_routing.Router("topk(k=2)", max_tokens=4, experts=16).route(scores, scale=scale)


@pytest.mark.parametrize("name, value", [("sentinel", 2**70), ("sentinel", 2**31), ("sentinel", True)])
def test_refuses_sentinel_out_of_range(name, value):
    with pytest.raises(ValueError, match=name):
        moe_routing.route(numpy.zeros((2, 16), numpy.float32), "topk(k=2)", **{name: value})


@pytest.mark.parametrize("top_k", [0, -1, True, False, 2**70, 2.0])
def test_refuses_bad_top_k(top_k):
    scores = numpy.zeros((2, 16), numpy.float32)
    with pytest.raises(ValueError, match="top_k"):
        moe_routing.route(scores, "topk(k=2)", top_k=top_k)
    with pytest.raises(ValueError, match="top_k"):
        moe_routing.Router("topk(k=2)", max_tokens=4, experts=16, top_k=top_k)


@pytest.mark.parametrize("devices", [0, -1, True, 2**70])
def test_refuses_bad_devices(devices):
    scores = numpy.zeros((2, 16), numpy.float32)
    with pytest.raises(ValueError, match="devices"):
        moe_routing.route(scores, "topk(k=2)", placement=[e % 4 for e in range(16)], devices=devices)


def test_devices_none_is_the_default():
    scores = numpy.zeros((2, 16), numpy.float32)
    routed = moe_routing.route(scores, "topk(k=2)", placement=[e % 4 for e in range(16)], devices=None)
    assert len(routed.summary.device_loads) == 4


@pytest.mark.parametrize(
    "name, value",
    [("segments", [0, 0.5, 2]), ("segments", [0, True, 2]), ("segments", numpy.array([0.0, 2.0]))],
)
def test_refuses_non_integer_segments(name, value):
    with pytest.raises(ValueError, match=name):
        moe_routing.route(numpy.zeros((2, 16), numpy.float32), "topk(k=2)", **{name: value})


def test_refuses_non_integer_placement():
    placement = [e % 4 + 0.5 for e in range(16)]
    with pytest.raises(ValueError, match="placement"):
        moe_routing.route(numpy.zeros((2, 16), numpy.float32), "topk(k=2)", placement=placement)


def misaligned_float32(rows, cols):
    raw = numpy.zeros(rows * cols * 4 + 1, numpy.uint8)[1:]
    array = raw.view(numpy.float32).reshape(rows, cols)
    assert not array.flags.aligned
    return array


def test_refuses_misaligned_numpy_array():
    with pytest.raises(ValueError, match="scores.*align"):
        moe_routing.route(misaligned_float32(2, 16), "topk(k=2)")
    with pytest.raises(ValueError, match="scores.*align"):
        moe_routing.Router("topk(k=2)", max_tokens=4, experts=16).route(misaligned_float32(2, 16))


def test_refuses_misaligned_torch_tensor():
    torch = pytest.importorskip("torch")
    tensor = torch.from_numpy(misaligned_float32(2, 16))
    assert tensor.data_ptr() % tensor.element_size() != 0
    with pytest.raises(ValueError, match="scores.*align"):
        moe_routing.route(tensor, "topk(k=2)")


def test_refuses_sparse_tensor():
    torch = pytest.importorskip("torch")
    sparse = torch.zeros(2, 16).to_sparse()
    with pytest.raises(ValueError, match="scores.layout"):
        moe_routing.route(sparse, "topk(k=2)")


def test_refuses_scores_that_need_a_gradient():
    torch = pytest.importorskip("torch")
    logits = torch.randn(4, 16, requires_grad=True)
    with pytest.raises(ValueError, match="inference-only"):
        moe_routing.route(logits, "topk(k=2)")
    with pytest.raises(ValueError, match="inference-only"):
        moe_routing.Router("topk(k=2)", max_tokens=4, experts=16).route(logits)
    function = moe_routing.routing_function("topk(k=2)")
    with pytest.raises(ValueError, match="inference-only"):
        function(hidden_states=None, gating_output=logits, topk=2, renormalize=True)
    # Without grad mode, or detached, it routes.
    with torch.no_grad():
        assert tuple(moe_routing.route(logits, "topk(k=2)").ids.shape) == (4, 2)
    assert tuple(moe_routing.route(logits.detach(), "topk(k=2)").ids.shape) == (4, 2)


def test_torch_op_refuses_scores_that_need_a_gradient():
    torch = pytest.importorskip("torch")
    if not moe_routing.torch_ops.load():
        pytest.skip("the PyTorch operator is not built")
    logits = torch.randn(4, 16, requires_grad=True)
    with pytest.raises(ValueError, match="inference-only"):
        torch.ops.moe_routing.route(logits, "topk(k=2)")
    with torch.no_grad():
        weights, _ = torch.ops.moe_routing.route(logits, "topk(k=2)")
    assert tuple(weights.shape) == (4, 2)


def test_torch_op_refuses_nan_scale_and_zero_top_k():
    torch = pytest.importorskip("torch")
    if not moe_routing.torch_ops.load():
        pytest.skip("the PyTorch operator is not built")
    logits = torch.randn(4, 16)
    with pytest.raises(ValueError, match="scale"):
        torch.ops.moe_routing.route(logits, "topk(k=2)", scale=math.nan)
    with pytest.raises(ValueError, match="top_k"):
        torch.ops.moe_routing.route(logits, "topk(k=2)", top_k=0)


def summary_is_consistent(summary, sizes, experts):
    return (
        len(summary.counts) in sizes
        and len(summary.expert_tokens) == experts
        and summary.active_count == len(summary.active_experts)
        and summary.active_count == sum(1 for tokens in summary.expert_tokens if tokens)
        and sum(summary.counts) == sum(summary.expert_tokens)
    )


def test_summary_is_never_torn_by_another_threads_call():
    """A summary read while another thread routes describes one call, never parts of two."""
    router = moe_routing.Router("topk(k=8)", max_tokens=2048, experts=256)
    generator = numpy.random.default_rng(0)
    small = generator.standard_normal((1, 256)).astype(numpy.float32)
    large = generator.standard_normal((2048, 256)).astype(numpy.float32)
    router.route(large)
    stop = threading.Event()

    def routing_thread():
        while not stop.is_set():
            router.route(small)
            router.route(large)

    thread = threading.Thread(target=routing_thread)
    thread.start()
    try:
        summaries = [router.summary() for _ in range(300)]
        torn = [summary for summary in summaries if not summary_is_consistent(summary, (1, 2048), 256)]
    finally:
        stop.set()
        thread.join()
    assert not torn, f"{len(torn)} of 300 summaries mixed two calls"
