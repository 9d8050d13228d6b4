"""Ray: DLPackArrays through ``ray.put``/``ray.get`` and a remote task on a local Ray instance.

Ray pickles with protocol 5 and keeps the out-of-band buffers in its shared-memory
object store; ``ray.get`` hands them back read-only, so the array is read from the
store without a copy, and is read-only.
"""

from __future__ import annotations

import os

import numpy as np
import process_workers
import pytest
from conftest import require

from dlpackarray import DLPackArray


@pytest.fixture(scope="module")
def ray():
    if os.environ.get("DLPACKARRAY_SANITIZED"):
        # Ray's worker processes inherit the ASan preload, and Ray's own
        # setproctitle (ray/_raylet.so spt_setup) reads freed memory there: ASan
        # kills the worker and ray.init waits for it for ever (seen in CI,
        # 2026-11-26).  The Ray round trip runs in the plain suite and on the wheel.
        pytest.skip("Ray's workers fail under the ASan preload (a use-after-free in Ray)")
    ray = require("ray", "the Ray round trip")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 2**20)  # fmt: skip
    try:
        yield ray
    finally:
        ray.shutdown()


def test_put_get_reads_the_object_store_without_copying(ray):
    arrays = [
        DLPackArray(np.arange(2**20, dtype=np.float64).reshape(1024, 1024)),  # 8 MiB
        DLPackArray(np.arange(60, dtype=np.int64).reshape(3, 4, 5)[::-1, 1::2, ::-2]),
        DLPackArray(np.broadcast_to(np.arange(3.0), (10**4, 3))),
        DLPackArray(np.arange(16, dtype=np.uint16)).view("bfloat16")[::3],
    ]
    for x in arrays:
        ref = ray.put(x)
        y, z = ray.get(ref), ray.get(ref)
        want = process_workers.describe(x)
        got = process_workers.describe(y)
        assert got[:3] == want[:3] and got[4:] == want[4:]
        # The object store's buffers are read-only, so is the array over them.
        assert y.readonly
        # Both gets view the same bytes in the store: nothing was copied out.
        assert y.data_ptr == z.data_ptr != x.data_ptr


def test_remote_task_round_trip(ray):
    # The worker receives the functions by value: no test module needs importing there.
    ray.cloudpickle.register_pickle_by_value(process_workers)
    try:
        echo = ray.remote(process_workers.identity)
        describe = ray.remote(process_workers.describe)
        x = DLPackArray(np.arange(24, dtype=np.int32).reshape(4, 6))[:, ::-2]
        back = ray.get(echo.remote(x))
        seen = ray.get(describe.remote(x))
    finally:
        ray.cloudpickle.unregister_pickle_by_value(process_workers)
    want = process_workers.describe(x)
    assert process_workers.describe(back)[5] == want[5]
    assert back.strides == process_workers.shipped_strides(x)
    assert seen[:3] == want[:3] and seen[5] == want[5]
