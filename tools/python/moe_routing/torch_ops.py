"""Registers torch.ops.moe_routing.route where the operator library was built.

The library (tools/python/torch_op.cpp) is built only where libtorch's headers match the
interpreter's torch (Debian: python3-torch with libtorch-dev); it holds a CPU kernel.
"""

import os


def load():
    """Loads the operator library into torch; True when torch.ops.moe_routing.route exists."""
    try:
        import torch
    except ImportError:
        return False
    library = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_ops.so")
    if not os.path.exists(library):
        return False
    torch.ops.load_library(library)
    return True
