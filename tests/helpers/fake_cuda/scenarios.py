"""Scenarios run against the fake CUDA driver, each in a fresh interpreter.

tests/cuda/test_cuda_fake.py runs every function here in a child process whose
DLPACKARRAY_CUDA_DRIVER names the fake driver, so a host read of fake device
memory (mapped PROT_NONE) kills that child only and fails that one test.
"""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dlpack_ctypes as dc  # noqa: E402

import dlpackarray  # noqa: E402
from dlpackarray import (  # noqa: E402
    DLDeviceType,
    DLPackArray,
    _cuda,  # noqa: E402
)
from fake_cuda import KIND_HOST, KIND_MANAGED, FakeCuda, cai  # noqa: E402

FLAG_IS_COPIED = 2


def fake() -> FakeCuda:
    f = FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])
    f.standard_streams()  # the handles written literally below, on device 0
    return f


def host_copy(x) -> np.ndarray:
    """x's elements through a device-to-host copy."""
    return np.asarray(DLPackArray(x, device="cpu"))


def expected_order(ready: int, consumer) -> list[tuple[str, int]]:
    """The driver calls an export to ``consumer`` must make for data ready on ``ready``."""
    legacy = 1
    # None: nothing pending; 2 (per-thread) was resolved to the legacy stream.
    if ready is None or consumer == -1:
        return []
    r = legacy if ready in (1, 2) else ready
    c = legacy if consumer in (None, 1) else consumer
    if c == r:
        return []
    return [("cuEventRecord", r), ("cuStreamWaitEvent", c)]


def ordering_calls(f: FakeCuda) -> list[tuple[str, int]]:
    out = []
    for line in f.calls("cuEventRecord", "cuStreamWaitEvent"):
        fields = dict(kv.split("=") for kv in line.split()[1:])
        out.append((line.split()[0], int(fields["stream"], 16)))
    return out


# ---------------------------------------------------------------------------------------------
def import_without_loading_the_driver():
    assert _cuda._driver_state()[0] is False
    x = DLPackArray(np.arange(3))
    np.asarray(x)
    assert _cuda._driver_state()[0] is False


def missing_driver_is_a_clear_error():
    # DLPACKARRAY_CUDA_DRIVER names a library that does not exist.
    obj = cai(0x10000, (4,))
    try:
        DLPackArray(obj)
    except BufferError as e:
        assert "CUDA driver" in str(e) and "not available" in str(e), e
    else:
        raise AssertionError("no error without a driver")
    p = dc.Producer(None, shape=(4,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 1), data=0x10000,
                    device=(dc.KDL_CUDA, 0))  # fmt: skip
    x = DLPackArray(p.capsule())
    # Same stream as the data's (legacy): nothing to order, no driver needed.
    x.__dlpack__(max_version=(1, 3), stream=1)
    x.__dlpack__(max_version=(1, 3), stream=-1)
    # Without a driver no work can be pending: nothing to order.
    x.__dlpack__(max_version=(1, 3), stream=0x7000)
    assert x.__cuda_array_interface__["stream"] is None


def host_read_of_device_memory_faults():
    # The detector itself: a direct host read of fake device memory must crash.
    f = fake()
    p = f.alloc(64)
    ctypes.string_at(p, 8)
    print("READ SUCCEEDED")


def cai_import_and_export():
    f = fake()
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    p = f.device_array(src, device=1)
    x = DLPackArray(cai(p, src.shape, stream=None))
    assert x.device == (DLDeviceType.CUDA, 1), x.device
    assert x.shape == (3, 4) and x.strides == (4, 1) and x.dtype.name == "float32"
    out = x.__cuda_array_interface__
    # stream None: nothing is pending (CAI v3), so none is reported.
    assert out["data"] == (p, False) and out["version"] == 3 and out["stream"] is None, out
    assert out["strides"] is None and out["typestr"] == "<f4" and out["shape"] == (3, 4)
    np.testing.assert_array_equal(host_copy(x), src)
    # Round trip through our own export.
    y = DLPackArray(_Wrap(out))
    assert y.data_ptr == p and y.device == x.device
    # CPU-only protocols refuse device memory, naming the way out.
    for attempt in (lambda: np.asarray(x), lambda: memoryview(x), lambda: x.__array_interface__,
                    lambda: x.tolist()):  # fmt: skip
        try:
            attempt()
        except (BufferError, AttributeError, TypeError, ValueError) as e:
            assert "device" in str(e), e
        else:
            raise AssertionError("a CPU protocol exported device memory")
    # Version 2, read-only, size 0 with data 0.
    z = DLPackArray(cai(p, (4,), version=2, readonly=True))
    assert z.readonly and z.device == (DLDeviceType.CUDA, 1)
    f.clear()
    e = DLPackArray(cai(0, (0, 3)))
    assert e.size == 0 and e.device == (DLDeviceType.CUDA, 0) and f.log() == []


class _Wrap:
    def __init__(self, iface):
        self.__cuda_array_interface__ = iface


def cai_errors():
    f = fake()
    p = f.alloc(64)
    cases = [
        (cai(p, (4,), mask=object()), BufferError, "mask"),
        (cai(p, (4,), stream=0), ValueError, "stream"),
        (cai(p, (4,), version=1), ValueError, "version"),
        (cai(p, (4,), strides=(4, 4)), ValueError, "strides"),
        (cai(p, (4,), typestr="<q9"), (TypeError, ValueError), ""),
        (cai(0x7000_0000_0000, (4,)), BufferError, "does not know the pointer"),
        (cai(p, (4,), stream="s"), TypeError, "stream"),
    ]
    for obj, kind, text in cases:
        try:
            DLPackArray(obj)
        except kind as e:
            assert text in str(e), (text, e)
        else:
            raise AssertionError(f"accepted {obj.__cuda_array_interface__}")


def precedence_dlpack_before_cai():
    f = fake()
    src = np.arange(4, dtype=np.int32)
    p = f.device_array(src)

    class Both:
        __cuda_array_interface__ = cai(p, (2,), typestr="<i4").__cuda_array_interface__

        def __dlpack__(self, **kw):
            return src.__dlpack__(**kw)

        def __dlpack_device__(self):
            return (1, 0)

    x = DLPackArray(Both())
    assert x.device == (DLDeviceType.CPU, 0) and x.shape == (4,)


def strided_device_to_host_copies():
    f = fake()
    base = np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6)
    p = f.device_array(base)
    x = DLPackArray(cai(p, base.shape, typestr="<f8"))
    views = [
        (x[:, 1:4, ::2], base[:, 1:4, ::2]),
        (x.T, base.T),
        (x[::-1, :, ::-3], base[::-1, :, ::-3]),
        (x[1], base[1]),
        (x[:, 2, 3], base[:, 2, 3]),
        (x.transpose(1, 0, 2)[:, ::2], base.transpose(1, 0, 2)[:, ::2]),
    ]
    for view, ref in views:
        f.clear()
        got = host_copy(view)
        np.testing.assert_array_equal(got, ref)
        copies = f.copies()
        assert all(c["call"] == "cuMemcpyDtoHAsync" or c["dst"] == "host" for c in copies)
        # Exactly the elements are moved, never the whole allocation.
        assert f.moved() == ref.nbytes, (f.moved(), ref.nbytes, copies)
        assert f.calls("cuStreamSynchronize"), "host copy not waited for"
    # A contiguous array is one copy.
    f.clear()
    host_copy(x)
    assert f.calls("cuMemcpyDtoHAsync") and len(f.copies()) == 1, f.log()


def dlpack_export_to_cpu_is_a_copy():
    f = fake()
    src = np.arange(10, dtype=np.int16)
    p = f.device_array(src)
    x = DLPackArray(cai(p, (10,), typestr="<i2"))[::3]
    cap = x.__dlpack__(max_version=(1, 3), dl_device=(1, 0))
    fields = dc.tensor_fields(cap)
    assert fields["device"] == (1, 0) and fields["flags"] & FLAG_IS_COPIED
    np.testing.assert_array_equal(np.from_dlpack(DLPackArray(cap)), src[::3])
    try:
        x.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False)
    except BufferError as e:
        assert "copy=False" in str(e)
    else:
        raise AssertionError("copy=False crossed devices")
    try:
        DLPackArray(x, device="cpu", copy=False)
    except ValueError as e:
        assert "copy=False" in str(e)
    else:
        raise AssertionError("copy=False crossed devices")


def device_copy_stays_on_device():
    f = fake()
    src = np.arange(20, dtype=np.float32).reshape(4, 5)
    p = f.device_array(src)
    x = DLPackArray(cai(p, (4, 5), stream=0x5000))[:, 1:4]
    before = f.live_allocations()
    f.clear()
    cap = x.__dlpack__(max_version=(1, 3), copy=True, stream=0x5000)
    fields = dc.tensor_fields(cap)
    assert fields["device"] == (2, 0) and fields["flags"] & FLAG_IS_COPIED
    assert fields["data"] != p and f.live_allocations() == before + 1
    copies = f.calls("cuMemcpy2DAsync", "cuMemcpyDtoDAsync")
    assert copies and all("stream=0x5000" in c for c in copies), copies
    assert all("dst=device" in c for c in f.calls("cuMemcpy2DAsync")), copies
    # A bare capsule carries no stream: the consumer that asked with
    # stream=0x5000 knows the copy is ready there.
    y = DLPackArray(cap)
    np.testing.assert_array_equal(host_copy(y), src[:, 1:4])
    del cap, y
    import gc

    gc.collect()
    assert f.live_allocations() == before, "device copy leaked"
    assert f.calls("cuMemFree")


def pinned_and_managed_synchronise_before_host_reads():
    f = fake()
    src = np.arange(6, dtype=np.float32)
    for kind, dev_type in ((KIND_HOST, DLDeviceType.CPU_PINNED),
                           (KIND_MANAGED, DLDeviceType.CUDA_MANAGED)):  # fmt: skip
        p = f.device_array(src, kind=kind)
        x = DLPackArray(cai(p, (6,), stream=0x6000))
        assert x.device == (dev_type, 0), x.device
        f.clear()
        h = DLPackArray(x, device="cpu")
        assert f.calls("cuStreamSynchronize") == ["cuStreamSynchronize stream=0x6000"], f.log()
        assert h.data_ptr == p and h.device == (DLDeviceType.CPU, 0)
        np.testing.assert_array_equal(np.asarray(h), src)
        f.clear()
        cap = x.__dlpack__(max_version=(1, 3), dl_device=(1, 0))
        assert f.calls("cuStreamSynchronize") == ["cuStreamSynchronize stream=0x6000"]
        assert dc.tensor_fields(cap)["data"] == p
        # A host copy (copy=True keeps no device for host-accessible memory)
        # is ready once made: synchronised, and no stream ordering after it.
        f.clear()
        cap = x.__dlpack__(max_version=(1, 3), copy=True, stream=0x7000)
        assert dc.tensor_fields(cap)["device"] == (1, 0)
        assert f.calls("cuStreamSynchronize") and not f.calls("cuEventRecord"), f.log()
        # Every host read or CPU export of the memory waits for it first.
        for read in (np.asarray, memoryview, lambda a: a.tolist(), lambda a: a.copy(),
                     lambda a: a.__array_interface__):  # fmt: skip
            f.clear()
            read(x)
            assert "cuStreamSynchronize stream=0x6000" in f.calls("cuStreamSynchronize"), read


class TorchPinnedProducer:
    """torch's pinned tensor: ``__dlpack_device__`` says CUDA_HOST, the capsule
    says CPU, and any stream but None and -1 raises AssertionError."""

    def __init__(self, f, src):
        self.ptr = f.device_array(src, kind=KIND_HOST)
        self.src = src
        self.streams = []

    def __dlpack_device__(self):
        return (int(DLDeviceType.CPU_PINNED), 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        assert stream in (None, -1), stream
        self.streams.append(stream)
        p = dc.Producer(None, shape=self.src.shape, strides=None,
                        dtype=dc.numpy_dl_dtype(self.src.dtype), data=self.ptr,
                        device=(dc.KDL_CPU, 0))  # fmt: skip
        return p.capsule()


def pinned_reported_as_cpu_by_its_capsule_is_waited_for():
    # The real-GPU run of tests/cuda/test_cuda_gpu.py caught this: a pinned torch
    # tensor filled by a non-blocking copy was read before the copy ended,
    # because its capsule calls the memory CPU.
    f = fake()
    src = np.arange(6, dtype=np.float32)
    for stream in (None, 1, 2, 0x6000):
        for consume, extra in ((DLPackArray, {}), (dlpackarray.from_dlpack, {}),
                               (DLPackArray, {"device": "cpu"})):  # fmt: skip
            p = TorchPinnedProducer(f, src)
            f.clear()
            x = consume(p, stream=stream, **extra)
            assert p.streams == [None], (stream, p.streams)
            assert f.calls("cuCtxSynchronize") == ["cuCtxSynchronize dev=0"], (stream, f.log())
            assert x.device == (DLDeviceType.CPU, 0) and x.data_ptr == p.ptr
            np.testing.assert_array_equal(np.asarray(x), src)
    # -1: the consumer takes charge of the ordering (DLPack spec): no wait.
    p = TorchPinnedProducer(f, src)
    f.clear()
    DLPackArray(p, stream=-1)
    assert p.streams == [-1] and not f.calls("cuCtxSynchronize"), f.log()
    # Nothing to wait for in an empty tensor.
    p = TorchPinnedProducer(f, np.zeros(0, dtype=np.float32))
    f.clear()
    DLPackArray(p)
    assert not f.calls("cuCtxSynchronize"), f.log()


class FakeProducer:
    """A DLPack producer on fake CUDA memory that records the stream it is given."""

    def __init__(self, f, src, device=(dc.KDL_CUDA, 0)):
        self.ptr = f.device_array(src) if device[0] != 1 else src.ctypes.data
        self.src = src
        self.device = device
        self.streams = []
        self.device_queries = 0

    def __dlpack_device__(self):
        self.device_queries += 1
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        p = dc.Producer(None, shape=self.src.shape, strides=None,
                        dtype=dc.numpy_dl_dtype(self.src.dtype), data=self.ptr,
                        device=self.device)  # fmt: skip
        return p.capsule()


def dlpack_import_passes_the_consumer_stream():
    f = fake()
    src = np.arange(8, dtype=np.float32)
    # 2 is asked as 1 (torch refuses 2) and ordered after it here; -1: the
    # consumer takes charge, nothing is pending for dlpackarray.
    for stream, asked, ready in ((1, 1, 1), (2, 1, 1), (0x7700, 0x7700, 0x7700), (-1, -1, None)):
        prod = FakeProducer(f, src)
        x = DLPackArray(prod, stream=stream)
        assert prod.device_queries == 1 and prod.streams == [asked], prod.streams
        assert x.__cuda_array_interface__["stream"] == ready
        y = dlpackarray.from_dlpack(FakeProducer(f, src), stream=stream)
        assert y.__cuda_array_interface__["stream"] == ready
    prod = FakeProducer(f, src)
    try:
        DLPackArray(prod, stream=0)
    except ValueError as e:
        assert "stream=0" in str(e)
    else:
        raise AssertionError("stream=0 accepted for CUDA")
    assert prod.streams == [], "the producer was called with a refused stream"
    cpu = FakeProducer(f, src, device=(1, 0))
    try:
        DLPackArray(cpu, stream=5)
    except ValueError as e:
        assert "CPU" in str(e)
    else:
        raise AssertionError("a CUDA stream was accepted for a CPU producer")
    DLPackArray(cpu, stream=-1)
    assert cpu.streams == [None]

    class NoDevice:
        def __dlpack__(self, **kw):
            raise AssertionError("called without knowing the device")

    try:
        DLPackArray(NoDevice(), stream=1)
    except TypeError as e:
        assert "__dlpack_device__" in str(e)
    else:
        raise AssertionError("stream passed without a device query")
    # No stream: a CUDA producer is asked with the legacy stream (torch
    # would otherwise synchronise nothing); a CPU producer with none.
    prod = FakeProducer(f, src)
    assert DLPackArray(prod).__cuda_array_interface__["stream"] == 1
    assert prod.device_queries == 1 and prod.streams == [1]
    cpu = FakeProducer(f, src, device=(1, 0))
    DLPackArray(cpu)
    assert cpu.streams == [None]


def export_orders_streams_exactly():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    f = fake()
    src = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    p = f.device_array(src)
    handles = st.sampled_from([1, 2, 0x5000, 0x7000, 0xABC0])
    consumers = st.one_of(st.none(), st.just(-1), handles)

    @settings(max_examples=150, deadline=None, database=None)
    @given(ready=st.one_of(st.none(), handles), consumer=consumers,
           versioned=st.booleans(), sliced=st.booleans(), via_dlpack=st.booleans())  # fmt: skip
    def check(ready, consumer, versioned, sliced, via_dlpack):
        x = DLPackArray(cai(p, src.shape, stream=ready))
        if sliced:
            x = x[:, ::2, 1:]
        if via_dlpack:
            # Through a capsule and back, with the stream given at import:
            # then the data is ready on the import's stream.
            prod = x
            x = DLPackArray(prod, stream=ready if ready is not None else 1)
        f.clear()
        cap = x.__dlpack__(stream=consumer, max_version=(1, 3) if versioned else None)
        assert ordering_calls(f) == expected_order(ready, consumer), (f.log(), ready, consumer)
        records = f.calls("cuEventCreate")
        destroys = f.calls("cuEventDestroy")
        assert len(records) == len(destroys) == len(expected_order(ready, consumer)) // 2
        # No copy and no host read: the capsule points at the device data.
        assert not f.calls("cuMemcpy2DAsync", "cuMemcpyDtoHAsync", "cuStreamSynchronize")
        assert dc.tensor_fields(cap)["device"] == (2, 0)

    check()
    # Invalid values raise as the spec says, before any driver call.
    x = DLPackArray(cai(p, src.shape, stream=0x5000))
    f.clear()
    for bad, kind in ((0, ValueError), (-2, ValueError), ("1", TypeError), (2**64, ValueError)):
        try:
            x.__dlpack__(stream=bad)
        except kind:
            pass
        else:
            raise AssertionError(f"stream={bad!r} accepted")
    assert f.log() == []


def random_views_copy_to_host_exactly():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    f = fake()
    base = np.arange(5 * 6 * 7, dtype=np.int32).reshape(5, 6, 7)
    p = f.device_array(base)
    x = DLPackArray(cai(p, base.shape, typestr="<i4"))
    steps = st.sampled_from([1, 2, 3, -1, -2])

    @settings(max_examples=120, deadline=None, database=None)
    @given(s0=steps, s1=steps, s2=steps, perm=st.permutations([0, 1, 2]),
           lo=st.integers(0, 2))  # fmt: skip
    def check(s0, s1, s2, perm, lo):
        key = (slice(lo, None, s0) if s0 > 0 else slice(None, lo, s0), slice(None, None, s1),
               slice(None, None, s2))  # fmt: skip
        view, ref = x[key].transpose(perm), base[key].transpose(perm)
        f.clear()
        np.testing.assert_array_equal(host_copy(view), ref)
        assert f.moved() == ref.nbytes

    check()


def stream_given_at_import_orders_other_sources():
    f = fake()
    src = np.arange(6, dtype=np.float32)
    p = f.device_array(src)
    # A CUDA array interface ready on 0x5000, consumed on 0x7000.
    f.clear()
    x = DLPackArray(cai(p, (6,), stream=0x5000), stream=0x7000)
    assert ordering_calls(f) == [("cuEventRecord", 0x5000), ("cuStreamWaitEvent", 0x7000)]
    assert x.__cuda_array_interface__["stream"] == 0x7000
    # Another DLPackArray, and the same stream again: nothing to do.
    f.clear()
    y = DLPackArray(x, stream=0x7000)
    assert ordering_calls(f) == [] and y.__cuda_array_interface__["stream"] == 0x7000
    # A bare capsule is ready on the legacy stream.
    f.clear()
    z = dlpackarray.from_dlpack(x.__dlpack__(max_version=(1, 3), stream=-1), stream=2)
    assert ordering_calls(f) == [("cuEventRecord", 1), ("cuStreamWaitEvent", 2)]
    # Ordered into this thread's per-thread stream; the token stays legacy.
    assert z.__cuda_array_interface__["stream"] == 1
    # -1: nothing ordered, the source's ready stream kept.
    f.clear()
    w = DLPackArray(cai(p, (6,), stream=0x5000), stream=-1)
    assert ordering_calls(f) == [] and w.__cuda_array_interface__["stream"] == 0x5000
    for bad, kind in ((0, ValueError), (-3, ValueError), ("x", TypeError)):
        try:
            DLPackArray(cai(p, (6,)), stream=bad)
        except kind:
            pass
        else:
            raise AssertionError(f"stream={bad!r} accepted")
    try:
        DLPackArray(bytearray(4), stream=5)
    except ValueError as e:
        assert "CPU" in str(e)
    else:
        raise AssertionError("a CUDA stream was accepted for host data")


def driver_errors_are_clean_exceptions():
    import gc

    f = fake()
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    p = f.device_array(src)
    x = DLPackArray(cai(p, src.shape, stream=0x5000))
    for entry in ("cuEventRecord", "cuStreamWaitEvent"):
        f.clear()
        f.fail_next(entry)
        try:
            x.__dlpack__(stream=0x7000)
        except BufferError as e:
            assert "CUDA_ERROR_INVALID_VALUE" in str(e), e
        else:
            raise AssertionError(f"{entry} failure not reported")
        # The event is released and the context popped even on failure.
        assert len(f.calls("cuEventCreate")) == len(f.calls("cuEventDestroy")) == 1
        assert len(f.calls("cuCtxPushCurrent")) == len(f.calls("cuCtxPopCurrent"))
    before = f.live_allocations()
    for entry in ("cuMemAlloc_v2", "cuMemcpy2DAsync_v2"):
        f.fail_next(entry)
        try:
            x[:, 1:].__dlpack__(max_version=(1, 3), copy=True)
        except BufferError:
            pass
        else:
            raise AssertionError(f"{entry} failure not reported")
        gc.collect()
        assert f.live_allocations() == before, f"{entry}: device memory leaked"
    for entry in ("cuMemcpyDtoHAsync_v2", "cuStreamSynchronize"):
        f.fail_next(entry)
        try:
            DLPackArray(x, device="cpu")
        except BufferError:
            pass
        else:
            raise AssertionError(f"{entry} failure not reported")
    # A device the driver does not have.
    q = f.alloc(16, device=7)
    y = DLPackArray(cai(q, (4,)))
    assert y.device == (DLDeviceType.CUDA, 7)
    try:
        DLPackArray(y, device="cpu")
    except BufferError as e:
        assert "cuDeviceGet" in str(e), e
    else:
        raise AssertionError("copy from a missing device succeeded")
    # Everything still works afterwards.
    np.testing.assert_array_equal(host_copy(x), src)


def every_api_on_device_data_is_safe():
    # Each public method and property of a CUDA DLPackArray either works
    # without touching the memory or raises; a host read would crash here.
    import operator

    f = fake()
    src = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    p = f.device_array(src)
    x = DLPackArray(cai(p, src.shape))
    one = x[0, 0, 0]
    attempts = {
        "repr": lambda: repr(x),
        "props": lambda: (
            x.shape,
            x.strides,
            x.dtype,
            x.device,
            x.ndim,
            x.size,
            x.itemsize,
            x.nbytes,
            x.readonly,
            x.data_ptr,
            x.byte_offset,
            x.c_contiguous,
            x.f_contiguous,
        ),  # fmt: skip
        "len": lambda: len(x),
        "views": lambda: (
            x[1:, ::2],
            x.reshape(6, 4),
            x.T,
            x.permute(2, 0, 1),
            x.view("int32"),
            x.transpose(1, 0, 2),
        ),  # fmt: skip
        "dlpack": lambda: x.__dlpack__(max_version=(1, 3)),
        "dlpack legacy": lambda: x.__dlpack__(),
        "cai": lambda: x.__cuda_array_interface__,
        "array_interface": lambda: x.__array_interface__,
        "array_struct": lambda: x.__array_struct__,
        "array": lambda: x.__array__(),
        "numpy": lambda: np.asarray(x),
        "memoryview": lambda: memoryview(x),
        "bytes": lambda: bytes(x),
        "item": lambda: one.item(),
        "tolist": lambda: x.tolist(),
        "float": lambda: float(one),
        "int": lambda: int(one),
        "complex": lambda: complex(one),
        "bool": lambda: bool(one),
        "index": lambda: operator.index(x[0, 0, 0].view("int32")),
        "arrow schema": lambda: x.__arrow_c_schema__(),
        "arrow array": lambda: x.__arrow_c_array__(),
        "arrow device array": lambda: x.__arrow_c_device_array__(),
        "arrow stream": lambda: x.__arrow_c_stream__(),
        "torch": lambda: __import__("torch").from_dlpack(x),
    }
    for name, attempt in attempts.items():
        try:
            attempt()
        except Exception as e:  # noqa: BLE001 -- refusing is fine, reading is not
            print(f"{name}: {type(e).__name__}: {e}")
    # The copy routes do work, through the driver.
    np.testing.assert_array_equal(host_copy(x), src)
