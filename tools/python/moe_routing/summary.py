"""What a routing call loaded: the batch-level part of the C++ routing plan."""

from dataclasses import dataclass
from typing import List


@dataclass(frozen=True)
class Summary:
    active_count: int  # |active|: distinct experts the batch loads
    selected_count: int  # |S|: the selected set (a superset of the active experts)
    active_experts: List[int]  # the active experts, ascending
    expert_tokens: List[int]  # [E] tokens assigned to each expert
    device_loads: List[int]  # [G] active experts on each device (empty without a placement)
    max_device_load: int  # the largest of device_loads (0 without a placement)
    counts: List[int]  # [n] experts assigned to each token


def summary_of(core):
    """The summary of `core`'s (a _core.BufferRouter) last call, copied in one C++ call
    under the router's lock: another thread's call never tears it."""
    return Summary(**core.summary())
