"""torch.ops.moe_routing.route: the same router as a registered PyTorch operator."""

import os
import re

import pytest

torch = pytest.importorskip("torch")

import moe_routing  # noqa: E402

# CTest says whether this build made the operator; then its absence is a failure, not a skip.
expected = os.environ.get("MOE_ROUTING_EXPECT_TORCH_OP") == "1"
if not moe_routing.has_torch_op:
    if expected:
        raise AssertionError("the build made the PyTorch operator, but moe_routing did not load it")
    pytest.skip("the PyTorch operator was not built (needs libtorch-dev matching torch)", allow_module_level=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_operator_equals_route(tie_free_logits, dtype):
    logits = tie_free_logits(tokens=20, experts=64, dtype=dtype)
    options = dict(scoring="sigmoid", bias=torch.linspace(-0.2, 0.2, 64), groups=[8, 4], scale=2.5)
    weights, ids = torch.ops.moe_routing.route(logits, "xshare(k0=1,m=12,k=6)", **options)
    expected = moe_routing.route(logits, "xshare(k0=1,m=12,k=6)", **{**options, "groups": (8, 4)})
    assert weights.dtype == torch.float32 and ids.dtype == torch.int32
    assert torch.equal(ids, expected.ids) and torch.equal(weights, expected.weights)


def test_operator_options(tie_free_logits):
    logits = tie_free_logits(tokens=6, experts=32)
    mask = torch.tensor([1, 1, 0, 1, 1, 1], dtype=torch.uint8)
    segments = torch.tensor([0, 3, 6])
    placement = torch.arange(32, dtype=torch.int32) % 4
    options = dict(mask=mask, segments=segments, placement=placement, padding="repeat", top_k=6, weights="raw")
    weights, ids = torch.ops.moe_routing.route(logits, "oea(k0=2,k=4)", **options)
    expected = moe_routing.route(logits, "oea(k0=2,k=4)", **options)
    assert tuple(ids.shape) == (6, 6)
    assert torch.equal(ids, expected.ids) and torch.equal(weights, expected.weights)


def test_operator_errors_are_value_errors():
    with pytest.raises(ValueError, match=re.escape("scores.dtype = torch.int64: must be float32")):
        torch.ops.moe_routing.route(torch.zeros(4, 16, dtype=torch.int64), "topk(k=2)")
    with pytest.raises(ValueError, match=re.escape("scores.stride(1) = 4: must be 1")):
        torch.ops.moe_routing.route(torch.zeros(16, 4).t(), "topk(k=2)")
    with pytest.raises(ValueError, match=re.escape("prune.k0 = 9")):
        torch.ops.moe_routing.route(torch.zeros(4, 16), "oea(k0=9,k=8)")
    with pytest.raises(ValueError, match=re.escape("groups has 1 entries: must be [n_group, topk_group]")):
        torch.ops.moe_routing.route(torch.zeros(4, 16), "topk(k=2)", groups=[4])
    # Only a CPU kernel is registered: the dispatcher refuses other devices itself.
    with pytest.raises((NotImplementedError, RuntimeError), match="moe_routing::route"):
        torch.ops.moe_routing.route(torch.zeros(4, 16, device="meta"), "topk(k=2)")


def test_operator_in_torchscript(tie_free_logits):
    @torch.jit.script
    def scripted(logits: torch.Tensor):
        return torch.ops.moe_routing.route(logits, "oea(k0=2,k=4)", top_k=4)

    logits = tie_free_logits(tokens=5, experts=16)
    weights, ids = scripted(logits)
    expected = moe_routing.route(logits, "oea(k0=2,k=4)")
    assert torch.equal(ids, expected.ids) and torch.equal(weights, expected.weights)
