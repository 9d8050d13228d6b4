"""C API 1.1: DLPackArray_Empty (host and, through the fake CUDA driver, device, pinned and
managed memory) and DLPackArray_FromObjectOnStream's stream hand-off, called through the
table with ctypes (tests/helpers/c_api_ctypes.py).

The compiled C and Cython callers of every 1.1 function are tests/capi/test_c_api_downstream.py
(docs/examples/c_api/) and, for NULL arguments, the lazy load and a module built against the
1.0 header, tests/capi/test_c_api_null_and_versions.py.
"""

from __future__ import annotations

import json
import pathlib
import sys
import textwrap

import c_api_ctypes as capi
import numpy as np
import pytest
from conftest import assert_clean_exit, run_python
from hypothesis import given, settings
from hypothesis import strategies as st

import dlpackarray
from dlpackarray import DLPackArray

HELPERS = pathlib.Path(__file__).resolve().parents[1] / "helpers"
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BOOL = 0, 1, 2, 6
CPU, CUDA, CUDA_HOST, CUDA_MANAGED, OPENCL = 1, 2, 3, 13, 4


def test_version_is_1_1():
    assert dlpackarray.C_API_VERSION == (1, 1)
    t = capi.table()
    assert (t.major, t.minor) == (1, 1)


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=5),
    dtype=st.sampled_from([(KDL_FLOAT, 64), (KDL_FLOAT, 16), (KDL_INT, 8), (KDL_UINT, 32)]),
)
def test_empty_on_the_host_is_a_new_owning_c_contiguous_array(shape, dtype):
    a = capi.empty(shape, *dtype)
    assert type(a) is DLPackArray and a.shape == tuple(shape)
    assert a.device == (CPU, 0) and not a.readonly and a.c_contiguous
    x = np.asarray(a)  # the array interface: NumPy before 2.2 imports DLPack read-only
    assert x.shape == tuple(shape) and x.dtype.itemsize * 8 == dtype[1]
    x[...] = 1  # writable memory of the full extent
    assert np.all(np.from_dlpack(a) == 1)
    if x.size > 0:
        assert a.data_ptr % 64 == 0  # the core's aligned host allocation


def test_empty_allocations_are_distinct_and_freed():
    a, b = capi.empty([4], KDL_FLOAT, 64), capi.empty([4], KDL_FLOAT, 64)
    assert a.data_ptr != b.data_ptr
    rc = sys.getrefcount(a)
    v = np.asarray(a)  # writable with any NumPy (its DLPack import is read-only before 2.2)
    assert sys.getrefcount(a) >= rc  # the consumer keeps the allocation alive
    del a
    v[:] = 2.0
    assert v.tolist() == [2.0] * 4


@pytest.mark.parametrize(
    "shape, dtype, device, error, words",
    [
        ([2**40, 2**40], (KDL_FLOAT, 64), (CPU, 0), OverflowError, ""),
        ([-1], (KDL_FLOAT, 64), (CPU, 0), ValueError, "negative"),
        ([3], (KDL_FLOAT, 12), (CPU, 0), (TypeError, ValueError, BufferError), ""),
        ([3], (99, 8), (CPU, 0), (TypeError, ValueError, BufferError), ""),
        ([3], (KDL_FLOAT, 32), (OPENCL, 0), BufferError, "device type 4"),
        ([1] * 65, (KDL_FLOAT, 32), (CPU, 0), ValueError, "ndim"),
    ],
    ids=["overflow", "negative extent", "bad bits", "bad code", "opencl", "too many dims"],
)
def test_empty_refuses_what_cannot_be_allocated(shape, dtype, device, error, words):
    with pytest.raises(error, match=words or None):
        capi.empty(shape, *dtype, *device)


def test_from_object_on_stream_passes_the_stream_and_checks_it():
    x = np.arange(6.0)
    a = capi.from_object_on_stream(x, -1)
    assert a.data_ptr == x.ctypes.data
    # The constructor's rules: CPU data takes no stream but -1.
    with pytest.raises(ValueError, match="stream=1 is not valid for CPU data"):
        capi.from_object_on_stream(x, 1)
    with pytest.raises(ValueError, match="copy must be"):
        capi.from_object_on_stream(x, -1, copy=5)
    c = capi.from_object_on_stream(x, -1, copy=1)
    assert c.data_ptr != x.ctypes.data and np.from_dlpack(c).tolist() == x.tolist()


# -- CUDA-family memory through the fake driver (each case in a child) -----------------------

CHILD = """
import json, os, sys
sys.path.insert(0, {tests!r}); sys.path.insert(0, {fake!r})
import numpy as np
import c_api_ctypes as capi
from fake_cuda import FakeCuda
import dlpackarray
from dlpackarray import DLPackArray
f = FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])
result = {{}}
"""


def _child(driver, body):
    code = CHILD.format(tests=str(HELPERS), fake=str(HELPERS / "fake_cuda")) + textwrap.dedent(body)
    proc = run_python(
        code + "\nprint(json.dumps(result))\n", env={"DLPACKARRAY_CUDA_DRIVER": str(driver)}
    )
    assert_clean_exit(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "device_type, alloc, free, host_accessible",
    [
        (CUDA, "cuMemAlloc", "cuMemFree", False),
        (CUDA_HOST, "cuMemAllocHost", "cuMemFreeHost", True),
        (CUDA_MANAGED, "cuMemAllocManaged", "cuMemFree", True),
    ],
)
def test_empty_allocates_cuda_family_memory_through_the_driver(
    fake_driver, device_type, alloc, free, host_accessible
):
    out = _child(
        fake_driver,
        f"""
        f.lib.fake_set_logging(1)
        live = f.lib.fake_live_allocations()
        f.clear()
        a = capi.empty([3, 4], 2, 32, {device_type}, 0)
        result["device"] = list(a.__dlpack_device__())
        result["shape"], result["strides"] = list(a.shape), list(a.strides)
        result["calls"] = [line.split()[0] for line in f.log()]
        result["alloc_line"] = f.calls({alloc!r})
        result["live_after_alloc"] = f.lib.fake_live_allocations() - live
        # Its memory is what the driver reports for the pointer (device type and id).
        result["attr"] = list(dlpackarray.DLPackArray(a).__dlpack_device__())
        if {host_accessible!r}:
            # Pinned and managed memory is readable from the host after a sync.
            x = np.asarray(DLPackArray(a, device="cpu"))
            result["host_shape"] = list(x.shape)
            del x  # may be a zero-copy view of pinned/managed memory
        f.clear()
        del a
        result["free_calls"] = f.calls({free!r})
        result["live_after_free"] = f.lib.fake_live_allocations() - live
        """,
    )
    assert out["device"] == out["attr"] == [device_type, 0]
    assert out["shape"] == [3, 4] and out["strides"] == [4, 1]
    assert len(out["alloc_line"]) == 1 and "bytes=48" in out["alloc_line"][0]
    assert out["live_after_alloc"] == 1
    assert len(out["free_calls"]) == 1 and out["live_after_free"] == 0
    if host_accessible:
        assert out["host_shape"] == [3, 4]


def test_empty_on_cuda_reports_driver_failures_and_leaks_nothing(fake_driver):
    out = _child(
        fake_driver,
        """
        live = f.lib.fake_live_allocations()
        for entry, device_type in [("cuMemAlloc_v2", 2), ("cuMemAllocHost_v2", 3),
                                   ("cuMemAllocManaged", 13)]:
            f.fail_next(entry, 2)
            try:
                capi.empty([8], 2, 64, device_type, 0)
                result[entry] = None
            except Exception as e:
                result[entry] = [type(e).__name__, str(e)]
        try:
            capi.empty([8], 2, 64, 2, 7)  # no such device
            result["bad device"] = None
        except Exception as e:
            result["bad device"] = [type(e).__name__, str(e)]
        empty = capi.empty([0, 3], 2, 64, 2, 0)  # zero elements: still a valid allocation
        result["zero"] = [list(empty.shape), empty.data_ptr != 0]
        del empty
        result["leaked"] = f.lib.fake_live_allocations() - live
        """,
    )
    for entry in ("cuMemAlloc_v2", "cuMemAllocHost_v2", "cuMemAllocManaged"):
        kind, message = out[entry]
        # Code 2 is CUDA_ERROR_OUT_OF_MEMORY: MemoryError, as for every
        # allocation (docs/cuda.md, "Driver layer").
        assert kind == "MemoryError" and entry.split("_")[0] in message, out[entry]
    assert out["bad device"][0] == "BufferError"
    assert out["zero"] == [[0, 3], True]
    assert out["leaked"] == 0


def test_empty_on_cuda_without_a_driver_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "no-libcuda.so")
    code = (
        f"import sys; sys.path.insert(0, {str(HELPERS)!r})\n"
        "import c_api_ctypes as capi\n"
        "try:\n    capi.empty([2], 2, 32, 2, 0)\nexcept BufferError as e:\n"
        "    print('REFUSED', e)\n"
    )
    proc = run_python(code, env={"DLPACKARRAY_CUDA_DRIVER": missing})
    assert_clean_exit(proc)
    assert "REFUSED" in proc.stdout and "no-libcuda.so" in proc.stdout


def test_from_object_on_stream_hands_the_stream_to_the_producer(fake_driver):
    out = _child(
        fake_driver,
        """
        a = capi.empty([4], 2, 32, 2, 0)
        seen = []
        class Producer:
            def __dlpack_device__(self):
                return a.__dlpack_device__()
            def __dlpack__(self, **kwargs):
                seen.append(kwargs.get("stream"))
                return a.__dlpack__(**kwargs)
        b = capi.from_object_on_stream(Producer(), 0x5000)
        result["stream"] = seen
        result["same"] = b.data_ptr == a.data_ptr
        try:
            capi.from_object_on_stream(Producer(), 0)
        except ValueError as e:
            result["zero"] = str(e)
        """,
    )
    assert out["stream"] == [0x5000] and out["same"] is True
    assert "0" in out["zero"]
