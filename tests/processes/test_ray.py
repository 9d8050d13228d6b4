"""Ray: DLPackArrays through ``ray.put``/``ray.get`` and a remote task on a local Ray instance.

Ray pickles with protocol 5 and keeps the out-of-band buffers in its shared-memory
object store; ``ray.get`` hands them back read-only, so the array is read from the
store without a copy, and is read-only.

Each scenario starts Ray in a child interpreter of its own.  ``ray.init`` forks its
processes with a Python ``preexec_fn``, which is unsafe once another library has
started threads that take Python-level locks in the same process (JAX, which other
tests import, warns of a deadlock): the child imports only what a Ray program needs,
NumPy, dlpackarray and Ray.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np
import process_workers
import pytest
from conftest import require, run_scenario_in_child

from dlpackarray import DLPackArray


@pytest.fixture(scope="module", autouse=True)
def _ray_installed():
    if os.environ.get("DLPACKARRAY_SANITIZED"):
        # Ray's worker processes inherit the ASan preload, and Ray's own
        # setproctitle (ray/_raylet.so spt_setup) reads freed memory there: ASan
        # kills the worker and ray.init waits for it for ever.  The Ray round trip
        # runs in the plain suite and on the wheel.
        pytest.skip("Ray's workers fail under the ASan preload (a use-after-free in Ray)")
    require("ray", "the Ray round trip")


@contextmanager
def _local_ray():
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 2**20)  # fmt: skip
    try:
        yield ray
    finally:
        ray.shutdown()


def scenario_put_get():
    arrays = [
        DLPackArray(np.arange(2**20, dtype=np.float64).reshape(1024, 1024)),  # 8 MiB
        DLPackArray(np.arange(60, dtype=np.int64).reshape(3, 4, 5)[::-1, 1::2, ::-2]),
        DLPackArray(np.broadcast_to(np.arange(3.0), (10**4, 3))),
        DLPackArray(np.arange(16, dtype=np.uint16)).view("bfloat16")[::3],
    ]
    with _local_ray() as ray:
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


def scenario_remote_task():
    x = DLPackArray(np.arange(24, dtype=np.int32).reshape(4, 6))[:, ::-2]
    with _local_ray() as ray:
        # The worker receives the functions by value: no test module needs importing there.
        ray.cloudpickle.register_pickle_by_value(process_workers)
        echo = ray.remote(process_workers.identity)
        describe = ray.remote(process_workers.describe)
        back = ray.get(echo.remote(x))
        seen = ray.get(describe.remote(x))
    want = process_workers.describe(x)
    assert process_workers.describe(back)[5] == want[5]
    assert back.strides == process_workers.shipped_strides(x)
    assert seen[:3] == want[:3] and seen[5] == want[5]


def test_put_get_reads_the_object_store_without_copying():
    """ray.get returns a read-only array over the object store's bytes, the same
    bytes on every get, with the layout and elements that were put."""
    run_scenario_in_child(__file__, "put_get")


def test_remote_task_round_trip():
    """A remote task receives and returns the array with its elements, and with the
    strides pickling ships."""
    run_scenario_in_child(__file__, "remote_task")
