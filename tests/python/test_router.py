"""Router: a policy bound once to a shape; reuses its workspace and buffers, releases the
GIL while it routes, and does not leak over 100,000 calls."""

import os
import threading
import time

import pytest

torch = pytest.importorskip("torch")
numpy = pytest.importorskip("numpy")

import moe_routing  # noqa: E402


def test_router_equals_route_for_every_batch_size(tie_free_logits):
    router = moe_routing.Router("xshare(k0=1,m=16,k=8)", max_tokens=32, experts=128)
    assert (router.top_k, router.max_tokens, router.experts) == (8, 32, 128)
    for tokens in (32, 1, 7, 0, 16):
        logits = tie_free_logits(tokens=tokens, experts=128, seed=tokens)
        weights, ids = router.route(logits)
        expected = moe_routing.route(logits, "xshare(k0=1,m=16,k=8)")
        assert torch.equal(ids, expected.ids) and torch.equal(weights, expected.weights)
        assert router.summary() == expected.summary


def test_router_reuses_its_buffers(tie_free_logits):
    router = moe_routing.Router("oea(k0=2,k=4)", max_tokens=8, experts=32)
    first_weights, first_ids = router.route(tie_free_logits(tokens=8, experts=32, seed=1))
    kept = first_ids.clone()
    second_weights, second_ids = router.route(tie_free_logits(tokens=8, experts=32, seed=2))
    assert second_ids.data_ptr() == first_ids.data_ptr() and second_weights.data_ptr() == first_weights.data_ptr()
    assert not torch.equal(kept, second_ids)  # the earlier views now show the later plan
    numpy_weights, _ = router.route(tie_free_logits(tokens=8, experts=32).numpy())
    assert isinstance(numpy_weights, numpy.ndarray)


def main_thread_delay(router, logits):
    """Starts a routing call on another thread and returns how long this thread waited to
    run Python again, as a share of the call: about 1 if the call held the GIL."""
    ready = threading.Event()
    times = {}

    def routing_thread():
        times["start"] = time.perf_counter()  # before this thread can run again: a GIL-held call counts in full
        ready.set()
        router.route(logits)
        times["end"] = time.perf_counter()

    thread = threading.Thread(target=routing_thread)
    thread.start()
    ready.wait()  # returns once this thread holds the GIL again
    resumed = time.perf_counter()
    thread.join()
    return (resumed - times["start"]) / (times["end"] - times["start"])


def test_routing_releases_the_gil():
    """While one thread routes a large batch, another runs Python code: holding the GIL, the
    call would keep this thread waiting until it returns (a delay of about 1 call)."""
    router = moe_routing.Router("xshare(k0=2,m=64,k=8)", max_tokens=16384, experts=1024)
    logits = torch.randn(16384, 1024)
    router.route(logits)  # first call: pages touched
    delays = sorted(main_thread_delay(router, logits) for _ in range(5))
    assert delays[2] < 0.5, f"this thread waited {delays} of a routing call to run Python"


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux's /proc/self/statm")
def test_no_leak_over_100000_calls():
    router = moe_routing.Router("oea(k0=1,k=2)", max_tokens=4, experts=16)
    logits = torch.randn(4, 16)
    numpy_logits = logits.numpy()
    for _ in range(2000):  # warm up: buffers, caches, allocator pools
        router.route(logits)
        moe_routing.route(numpy_logits, "oea(k0=1,k=2)")
    before = resident_bytes()
    for _ in range(50000):
        router.route(logits)
    for _ in range(50000):
        moe_routing.route(numpy_logits, "oea(k0=1,k=2)")
    grown = resident_bytes() - before
    # A leak of even 64 bytes a call would grow 6.4 MB; Python's own pools stay within this.
    assert grown < 4 * 1024 * 1024, f"resident memory grew {grown / 1e6:.1f} MB over 100,000 calls"
