"""Functions run in other processes by tests/test_processes.py, test_dask.py and test_ray.py.

A module of its own (not a test module) so that worker processes started with
``spawn`` or ``forkserver`` import it cheaply by name.
"""

from __future__ import annotations

from multiprocessing import shared_memory

from dlpackarray import DLPackArray


def identity(x):
    return x


def describe(x: DLPackArray) -> tuple:
    """What a receiving process sees: layout, flags and the elements' bytes."""
    return (
        x.shape,
        x.strides,
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
