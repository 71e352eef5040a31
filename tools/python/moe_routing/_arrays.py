"""Torch tensors and NumPy arrays as the _core module reads them.

_core takes each array as a tuple (address, dtype name, shape, strides in elements,
device) and checks it in C++ (tools/python/array_argument.hpp), so a bad array gets
the same message from route(), Router and torch.ops.moe_routing.route. Nothing is
copied here: the arrays stay alive in the caller's frame for the call.
"""

import sys


def _torch_tensor_type():
    torch = sys.modules.get("torch")  # never imports torch: a tensor exists only if torch was imported
    return torch.Tensor if torch is not None else None


def is_torch(array):
    tensor_type = _torch_tensor_type()
    return tensor_type is not None and isinstance(array, tensor_type)


def describe(array, name):
    """The (address, dtype, shape, strides, device) tuple of `array`, None for None."""
    if array is None:
        return None
    if is_torch(array):
        import torch

        if array.layout != torch.strided:
            raise ValueError(f"{name}.layout = {array.layout}: must be torch.strided (call .to_dense())")
        device = array.device.type
        address = array.data_ptr() if device == "cpu" else 0
        if address % array.element_size():
            raise ValueError(
                f"{name}.data_ptr() = {address:#x}: must be aligned to its {array.element_size()}-byte elements "
                "(call .clone())"
            )
        return (address, str(array.dtype), tuple(array.shape), tuple(array.stride()), device)
    import numpy

    if isinstance(array, numpy.ndarray):
        if not array.dtype.isnative:
            raise ValueError(f"{name}.dtype = {array.dtype.str}: must be in this machine's byte order (astype it)")
        itemsize = array.itemsize
        if not array.flags.aligned:
            raise ValueError(
                f"{name}.ctypes.data = {array.ctypes.data:#x}: must be aligned to its {itemsize}-byte elements "
                "(numpy.require(..., requirements='A') or .copy())"
            )
        if any(stride % itemsize for stride in array.strides):
            raise ValueError(f"{name}.strides = {array.strides} bytes: must be whole {itemsize}-byte elements")
        strides = tuple(stride // itemsize for stride in array.strides)
        return (array.ctypes.data, array.dtype.name, array.shape, strides, "cpu")
    raise TypeError(f"{name}: expected a torch.Tensor or a numpy.ndarray, got {type(array).__name__}")


def index_array(values, name):
    """A small integer input (segments, placement) given as a list becomes an int64 array."""
    if values is None or is_torch(values):
        return values
    import numpy

    if isinstance(values, numpy.ndarray):
        return values
    if isinstance(values, (list, tuple)):
        for i, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, (int, numpy.integer)):
                raise ValueError(f"{name}[{i}] = {value!r}: must be an int (the list is read as int64)")
            if not -(2**63) <= value < 2**63:
                raise ValueError(f"{name}[{i}] = {value}: must fit in int64")
        return numpy.asarray(values, dtype=numpy.int64)
    raise TypeError(f"{name}: expected an integer tensor, array or list, got {type(values).__name__}")


def empty_outputs(like, tokens, top_k):
    """float32 weights and int32 ids [tokens, top_k] of the library `like` comes from."""
    if is_torch(like):
        import torch

        return (torch.empty((tokens, top_k), dtype=torch.float32), torch.empty((tokens, top_k), dtype=torch.int32))
    import numpy

    return (numpy.empty((tokens, top_k), dtype=numpy.float32), numpy.empty((tokens, top_k), dtype=numpy.int32))
