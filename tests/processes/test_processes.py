"""DLPackArray across process boundaries: multiprocessing (spawn, forkserver) and shared memory.

Arrays travel to worker processes and back through pickle (the start methods
that do not fork: everything is pickled), bit-exact with layout and flags; the
shared-memory recipe of docs/processes.md shares one block without copying.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory

import numpy as np
import process_workers
import pytest

from dlpackarray import DLPackArray


def sample_arrays() -> list[DLPackArray]:
    ro = np.arange(12, dtype=np.int16)
    ro.flags.writeable = False
    return [
        DLPackArray(np.arange(24, dtype=np.float32).reshape(4, 6)),
        DLPackArray(np.arange(60, dtype=np.int64).reshape(3, 4, 5)[::-1, 1::2, ::-2]),
        DLPackArray(ro),
        DLPackArray(np.broadcast_to(np.arange(3.0), (10**4, 3))),
        DLPackArray(np.arange(16, dtype=np.uint16)).view("bfloat16")[::3],
        DLPackArray(np.array(1 + 2j)),
        DLPackArray(np.zeros((2, 0), np.uint8)),
    ]


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_arrays_go_to_worker_processes_and_back(method):
    arrays = sample_arrays()
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        seen = list(pool.map(process_workers.describe, arrays))
        back = list(pool.map(process_workers.identity, arrays))
    for x, remote, y in zip(arrays, seen, back, strict=True):
        mine = process_workers.describe(x)
        # The worker received the same layout, flags and elements ...
        assert remote[:4] == mine[:4] and remote[5] == mine[5]
        # ... and so did we, on the way back.
        assert process_workers.describe(y) == mine


def test_shared_memory_recipe():
    shape, dtype = (1000,), "float64"
    shm = shared_memory.SharedMemory(create=True, size=8 * 1000)
    try:
        x = DLPackArray.from_buffer(shm.buf, dtype, shape)  # zero-copy view of the block
        data = np.asarray(x)
        data[:] = np.arange(1000.0)
        context = multiprocessing.get_context("spawn")
        with context.Pool(1) as pool:
            total = pool.apply(process_workers.scale_shared_block, (shm.name, shape, dtype, 2.0))
        # The worker's writes landed in our view of the block: no copy either way.
        assert total == 2.0 * sum(range(1000))
        assert data[999] == 1998.0 and x.item(999) == 1998.0
        # What keeps the block mapped: every array over it holds an export of shm.buf,
        # so closing it while one lives is refused instead of leaving a dangling view.
        with pytest.raises(BufferError):
            shm.close()
        del x, data
    finally:
        shm.close()
        shm.unlink()
