"""route(): vanilla top-k against torch.topk, dtypes, NumPy, strided rows, options."""

import pytest

torch = pytest.importorskip("torch")
numpy = pytest.importorskip("numpy")

import moe_routing  # noqa: E402


def torch_reference(logits, top_k, renormalize):
    """vLLM's and transformers' routing: softmax in float32, top-k, optional renormalisation."""
    probabilities = torch.softmax(logits.float(), dim=-1)
    weights, ids = torch.topk(probabilities, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("renormalize", [True, False])
def test_vanilla_equals_torch_topk(tie_free_logits, dtype, renormalize):
    logits = tie_free_logits(tokens=33, experts=128, dtype=dtype)
    weights, ids, summary = moe_routing.route(logits, "topk(k=8)", weights="renormalize" if renormalize else "raw")
    expected_weights, expected_ids = torch_reference(logits, 8, renormalize)
    assert weights.dtype == torch.float32 and ids.dtype == torch.int32
    assert tuple(weights.shape) == (33, 8) and tuple(ids.shape) == (33, 8)
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(weights, expected_weights, rtol=1e-5, atol=1e-6)
    assert summary.active_count == len(set(ids.flatten().tolist()))
    assert summary.counts == [8] * 33
    assert sum(summary.expert_tokens) == 33 * 8


def test_numpy_in_numpy_out_and_equal_to_torch(tie_free_logits):
    logits = tie_free_logits(tokens=12, experts=64)
    from_torch = moe_routing.route(logits, "oea(k0=2,k=6)")
    from_numpy = moe_routing.route(logits.numpy(), "oea(k0=2,k=6)")
    assert isinstance(from_numpy.weights, numpy.ndarray) and from_numpy.weights.dtype == numpy.float32
    assert isinstance(from_numpy.ids, numpy.ndarray) and from_numpy.ids.dtype == numpy.int32
    assert numpy.array_equal(from_numpy.ids, from_torch.ids.numpy())
    assert numpy.array_equal(from_numpy.weights, from_torch.weights.numpy())
    assert from_numpy.summary == from_torch.summary


def test_float16_numpy_matches_float16_torch(tie_free_logits):
    logits = tie_free_logits(tokens=9, experts=32, dtype=torch.float16)
    a = moe_routing.route(logits, "xshare(k0=1,m=8,k=4)")
    b = moe_routing.route(logits.numpy(), "xshare(k0=1,m=8,k=4)")
    assert numpy.array_equal(a.ids.numpy(), b.ids) and numpy.array_equal(a.weights.numpy(), b.weights)


def test_strided_rows_route_like_contiguous_ones(tie_free_logits):
    wide = tie_free_logits(tokens=10, experts=96)
    rows = wide[:, 16:80]  # a view: row stride 96, experts adjacent
    assert not rows.is_contiguous()
    strided = moe_routing.route(rows, "oea(k0=3,k=8)")
    dense = moe_routing.route(rows.contiguous(), "oea(k0=3,k=8)")
    assert torch.equal(strided.ids, dense.ids) and torch.equal(strided.weights, dense.weights)
    every_other = moe_routing.route(wide[::2], "topk(k=4)")  # row stride 192
    assert torch.equal(every_other.ids, moe_routing.route(wide[::2].contiguous(), "topk(k=4)").ids)


def test_batch_aware_policy_loads_fewer_experts(tie_free_logits):
    logits = tie_free_logits(tokens=16, experts=128, seed=3)
    vanilla = moe_routing.route(logits, "topk(k=8)").summary
    oea = moe_routing.route(logits, "oea(k0=2,k=8)").summary
    assert oea.active_count < vanilla.active_count
    assert oea.active_count == len(oea.active_experts) <= oea.selected_count


def test_mask_padding_sentinel_and_scale(tie_free_logits):
    logits = tie_free_logits(tokens=4, experts=16)
    mask = torch.tensor([True, False, True, True])
    weights, ids, summary = moe_routing.route(logits, "topk(k=4)", mask=mask, sentinel=16, scale=2.5)
    assert ids[1].tolist() == [16] * 4 and weights[1].tolist() == [0.0] * 4
    assert summary.counts == [4, 0, 4, 4]
    torch.testing.assert_close(weights.sum(dim=1), torch.tensor([2.5, 0.0, 2.5, 2.5]))
    _, repeated, _ = moe_routing.route(logits, "pruned(k0=2,k=4)", padding="repeat")
    assert all(row[2:] == [row[0], row[0]] for row in repeated.tolist())


def test_sigmoid_bias_groups_and_placement_are_applied(tie_free_logits):
    logits = tie_free_logits(tokens=8, experts=32, seed=5)
    bias = torch.linspace(-0.5, 0.5, 32)
    plain = moe_routing.route(logits, "topk(k=4)", scoring="sigmoid")
    biased = moe_routing.route(logits, "topk(k=4)", scoring="sigmoid", bias=bias)
    assert not torch.equal(plain.ids, biased.ids)
    grouped = moe_routing.route(logits, "topk(k=4)", scoring="sigmoid", bias=bias, groups=(8, 2))
    # Each token keeps the 2 groups (of 4 experts) with the largest top2_sum of s = sigmoid + bias.
    s = torch.sigmoid(logits) + bias
    best_groups = s.view(8, 8, 4).topk(2, dim=2).values.sum(dim=2).topk(2, dim=1).indices
    for row, groups in zip(grouped.ids.tolist(), best_groups.tolist()):
        assert {e // 4 for e in row} <= set(groups)
    # Without the group limit some token reaches a third group.
    assert any(len({e // 4 for e in row}) > 2 for row in biased.ids.tolist())
    placement = torch.arange(32) % 4
    placed = moe_routing.route(logits, "topk(k=4)", placement=placement)
    assert len(placed.summary.device_loads) == 4
    assert max(placed.summary.device_loads) == placed.summary.max_device_load
    assert sum(placed.summary.device_loads) == placed.summary.active_count
    as_list = moe_routing.route(logits, "topk(k=4)", placement=(numpy.arange(32) % 4).tolist(), devices=6)
    assert as_list.summary.device_loads[:4] == placed.summary.device_loads and len(as_list.summary.device_loads) == 6


def test_segments_and_prefill(tie_free_logits):
    logits = tie_free_logits(tokens=6, experts=32, seed=7)
    per_request = moe_routing.route(logits, "xshare(k0=1,m=4,k=4)", segments=[0, 2, 6])
    assert per_request.summary.counts == [4] * 6
    # A decode-only policy routes as vanilla top-k in prefill.
    decode = moe_routing.route(logits, "lynx_lat(d=8,k=4)")
    prefill = moe_routing.route(logits, "lynx_lat(d=8,k=4)", phase="prefill")
    vanilla = moe_routing.route(logits, "topk(k=4)")
    assert decode.summary.active_count < vanilla.summary.active_count
    assert torch.equal(prefill.ids, vanilla.ids)


def test_empty_batch():
    weights, ids, summary = moe_routing.route(torch.empty(0, 16), "topk(k=2)")
    assert tuple(weights.shape) == (0, 2) and tuple(ids.shape) == (0, 2)
    assert summary.active_count == 0
