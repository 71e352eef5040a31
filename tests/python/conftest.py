"""Shared inputs of the Python tests. Each test module skips itself (importorskip) when
torch or NumPy is missing for this interpreter; `moe_routing` itself must import (it is
built by `cmake --build` into the build tree's python/ folder, on PYTHONPATH here)."""

import pytest


@pytest.fixture
def tie_free_logits():
    """Router logits [n, E] whose values within a row are all distinct (no ties decide a top-k)."""
    torch = pytest.importorskip("torch")

    def make(tokens=16, experts=64, seed=0, dtype=None):
        generator = torch.Generator().manual_seed(seed)
        # A random permutation per row, scaled and jittered: distinct in float32, float16 and bfloat16.
        ranks = torch.argsort(torch.rand(tokens, experts, generator=generator), dim=1).to(torch.float32)
        logits = ranks / experts * 8.0 - 4.0
        return logits if dtype is None else logits.to(dtype)

    return make
