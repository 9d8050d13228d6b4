"""Functions run in other processes by tests/processes/test_processes.py, test_dask.py and
test_ray.py.

A module of its own (not a test module) so that worker processes started with
``spawn`` or ``forkserver`` import it cheaply by name.
"""

from __future__ import annotations

import math
from multiprocessing import shared_memory

from dlpackarray import DLPackArray


def identity(x):
    return x


def ships_a_copy(x: DLPackArray) -> bool:
    """Whether x's pickle carries a C-contiguous copy of its elements rather than
    the span they cover: when that span is more than twice their bytes
    (docs/processes.md)."""
    from dlpackarray._pickle import byte_extent

    return x.size > 0 and byte_extent(x) > 2 * x.size * x.itemsize


def shipped_bytes(x: DLPackArray) -> int:
    """The bytes x's pickle (or Dask frame) carries."""
    from dlpackarray._pickle import byte_extent

    return x.size * x.itemsize if ships_a_copy(x) else byte_extent(x)


def shipped_strides(x: DLPackArray) -> tuple:
    """The strides x arrives with in another process."""
    if ships_a_copy(x):
        return tuple(math.prod(x.shape[i + 1 :]) for i in range(x.ndim))
    return x.strides


def describe(x: DLPackArray) -> tuple:
    """What a receiving process sees: layout (as pickled), flags and the elements'
    bytes."""
    return (
        x.shape,
        shipped_strides(x),
        x.dtype.name,
        x.readonly,
        x.device,
        bytes(memoryview(x.copy().reshape(-1).view("uint8"))),
    )


def scale_shared_block(name: str, shape: tuple, dtype: str, factor: float) -> float:
    """The shared-memory recipe's worker side (docs/processes.md): attach to the
    block by name, wrap it with dtype and shape without copying, work in place."""
    shm = shared_memory.SharedMemory(name=name)
    try:
        x = DLPackArray.from_buffer(shm.buf, dtype, shape)
        assert not x.readonly
        values = memoryview(x).cast("B").cast("d")  # float64 elements, in place
        total = 0.0
        for i in range(len(values)):
            values[i] *= factor
            total += values[i]
        # shm.close() would raise BufferError while x (an export of shm.buf) lives.
        del x, values
        return total
    finally:
        shm.close()
