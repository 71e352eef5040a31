"""routing_function(): vLLM's custom_routing_function signature and results."""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import moe_routing  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("renormalize", [True, False])
def test_vanilla_routing_function_matches_vllms_fused_topk(tie_free_logits, renormalize):
    function = moe_routing.routing_function("topk(k=8)")
    logits = tie_free_logits(tokens=11, experts=128, dtype=torch.bfloat16)
    hidden_states = torch.zeros(11, 64, dtype=torch.bfloat16)
    # vLLM passes keywords (FusedMoE.select_experts).
    topk_weights, topk_ids = function(hidden_states=hidden_states, gating_output=logits, topk=8, renormalize=renormalize)
    probabilities = torch.softmax(logits.float(), dim=-1)
    expected_weights, expected_ids = torch.topk(probabilities, 8, dim=-1)
    if renormalize:
        expected_weights = expected_weights / expected_weights.sum(dim=-1, keepdim=True)
    assert topk_weights.dtype == torch.float32 and topk_ids.dtype == torch.int32
    assert torch.equal(topk_ids, expected_ids.to(torch.int32))
    torch.testing.assert_close(topk_weights, expected_weights, rtol=1e-5, atol=1e-6)
    assert function.last_summary.active_count == len(set(topk_ids.flatten().tolist()))


def test_batch_aware_routing_function(tie_free_logits):
    function = moe_routing.routing_function("oea(k0=2,k=8)", scoring="softmax")
    logits = tie_free_logits(tokens=16, experts=128, seed=4)
    weights, ids = function(None, logits, 8, True)  # positional, as SGLang may call it
    expected = moe_routing.route(logits, "oea(k0=2,k=8)")
    assert torch.equal(ids, expected.ids) and torch.equal(weights, expected.weights)
    assert function.last_summary.active_count < moe_routing.route(logits, "topk(k=8)").summary.active_count


def test_routing_function_checks_what_the_engine_passes():
    function = moe_routing.routing_function("topk(k=2)")
    with pytest.raises(ValueError, match=r"hidden_states.shape\[0\] = 3: must equal gating_output.shape\[0\] = 4"):
        function(torch.zeros(3, 8), torch.zeros(4, 16), 2, True)
    with pytest.raises(ValueError, match="global_num_experts = 32: must equal gating_output.shape"):
        function(torch.zeros(4, 8), torch.zeros(4, 16), 2, True, global_num_experts=32)
    with pytest.raises(ValueError, match="top_k: set by the engine"):
        moe_routing.routing_function("topk(k=2)", top_k=2)


def test_qwen3_example_runs():
    example = os.path.join(here, "..", "..", "examples", "python", "qwen3_moe_block.py")
    result = subprocess.run(
        [sys.executable, example, "--tokens", "4", "--hidden", "64", "--intermediate", "32", "--repeats", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "topk(k=8)" in result.stdout and "oea(k0=2,k=8)" in result.stdout
