"""Pickling CUDA data, run against the fake driver in a child interpreter.

tests/cuda/test_pickle_cuda.py runs each function here in a fresh process whose
DLPACKARRAY_CUDA_DRIVER names the fake driver (tests/helpers/fake_cuda): a host read
of fake device memory faults, so pickling must go through driver copies.
"""

from __future__ import annotations

import copy
import gc
import os
import pickle
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dlpackarray import DLDeviceType, DLPackArray  # noqa: E402
from fake_cuda import KIND_MANAGED, FakeCuda, cai  # noqa: E402


def fake() -> FakeCuda:
    return FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])


def host_copy(x) -> np.ndarray:
    return np.asarray(DLPackArray(x, device="cpu"))


def span_bytes(view) -> int:
    return view.itemsize * (
        1 + sum((n - 1) * abs(s) for n, s in zip(view.shape, view.strides, strict=True))
    )


def shipped_bytes(view) -> int:
    """A pickle's payload: the span, or the elements alone when the span is more
    than twice their bytes (docs/processes.md)."""
    span, data = span_bytes(view), view.size * view.itemsize
    return span if span <= 2 * data else data


def shipped_strides(view) -> tuple:
    if shipped_bytes(view) == span_bytes(view):
        return view.strides
    return tuple(int(np.prod(view.shape[i + 1 :])) for i in range(view.ndim))


def device_arrays_pickle_through_the_host_onto_their_device():
    f = fake()
    src = np.arange(48, dtype=np.float32).reshape(6, 8)
    p = f.device_array(src, device=1)
    f.stream(0x5000, device=1)  # the producer's stream, on the data's device
    x = DLPackArray(cai(p, src.shape, stream=0x5000))
    # x[::-2, 1::3] spans 156 bytes for 36 of elements: a dense copy travels.
    cases = [
        (x, src),
        (x[::-2, 1::3], src[::-2, 1::3]),
        (x[:, ::2], src[:, ::2]),
        (x[2, 3], src[2, 3]),
        (x[:0], src[:0]),
    ]
    assert shipped_bytes(cases[1][0]) == 36 and shipped_bytes(cases[2][0]) == 188
    for view, ref in cases:
        for protocol in (2, 4, 5):
            f.clear()
            data = pickle.dumps(view, protocol=protocol)
            # The span came to the host by driver copies on the data's stream.
            copies = f.calls("cuMemcpy2DAsync")
            assert all("dst=host" in c and "stream=0x5000" in c for c in copies), copies
            assert len(data) < ref.nbytes + 400 or ref.size == 0
            y = pickle.loads(data)
            assert y.device == (DLDeviceType.CUDA, 1), y.device
            assert (y.shape, y.strides, y.dtype) == (view.shape, shipped_strides(view), view.dtype)
            assert y.data_ptr != view.data_ptr and not y.readonly
            np.testing.assert_array_equal(host_copy(y), ref)
        # Out-of-band: one host buffer (the copy), uploaded on loads.
        buffers = []
        data = pickle.dumps(view, protocol=5, buffer_callback=buffers.append)
        assert len(buffers) == (1 if ref.size else 0)
        assert [b.raw().nbytes for b in buffers] == ([shipped_bytes(view)] if ref.size else [])
        y = pickle.loads(data, buffers=buffers)
        assert y.device == (DLDeviceType.CUDA, 1)
        np.testing.assert_array_equal(host_copy(y), ref)
    # Read-only device data stays read-only.
    ro = DLPackArray(cai(p, src.shape, readonly=True))
    assert pickle.loads(pickle.dumps(ro, protocol=5)).readonly
    # copy.copy / deepcopy copy on the device, never through the host.
    f.clear()
    for c in (copy.copy(x[1:, ::2]), copy.deepcopy(x[1:, ::2])):
        assert c.device == (DLDeviceType.CUDA, 1) and c.c_contiguous and c.data_ptr != p
        np.testing.assert_array_equal(host_copy(c), src[1:, ::2])
    del c, y, ro
    gc.collect()


def managed_memory_unpickles_as_host_memory():
    f = fake()
    src = np.arange(6, dtype=np.int16)
    p = f.device_array(src, kind=KIND_MANAGED)
    f.stream(0x6000)
    x = DLPackArray(cai(p, src.shape, typestr="<i2", stream=0x6000))
    assert x.device == (DLDeviceType.CUDA_MANAGED, 0)
    f.clear()
    y = pickle.loads(pickle.dumps(x, protocol=5))
    assert f.calls("cuStreamSynchronize"), "managed memory read before it was ready"
    assert y.device == (DLDeviceType.CPU, 0)
    np.testing.assert_array_equal(np.asarray(y), src)


def no_allocation_is_leaked():
    f = fake()
    src = np.arange(10, dtype=np.float64)
    p = f.device_array(src)
    x = DLPackArray(cai(p, src.shape, typestr="<f8"))
    before = f.live_allocations()
    for _ in range(5):
        y = pickle.loads(pickle.dumps(x, protocol=5))
        assert f.live_allocations() == before + 1
        del y
        gc.collect()
    assert f.live_allocations() == before


def unpickling_onto_a_missing_device_is_a_clear_error():
    # A pickle made in a process with two devices, read where there is one.
    f = fake()
    f.lib.fake_set_device_count(1)
    with open(os.environ["PICKLE_FILE"], "rb") as fh:
        data = fh.read()
    try:
        pickle.loads(data)
    except BufferError as e:
        assert "CUDA device 1" in str(e), e
    else:
        raise AssertionError("unpickled onto a device that does not exist")


def write_device_1_pickle():
    f = fake()
    src = np.arange(4, dtype=np.float32)
    x = DLPackArray(cai(f.device_array(src, device=1), src.shape))
    with open(os.environ["PICKLE_FILE"], "wb") as fh:
        fh.write(pickle.dumps(x, protocol=5))
