"""Exporting CUDA data through the Arrow C Device Data interface, on every CI
run, against the fake CUDA driver (tests/helpers/fake_cuda; docs/arrow.md,
"CUDA data"); importing it is test_arrow_cuda_import.py.

The device methods describe CUDA-family views with their device type and id
and a sync event recorded on the view's ready stream, destroyed exactly once
by the release (from any thread); copies stay on the device; the CPU methods
refuse device memory.

Each scenario runs in a child interpreter whose DLPACKARRAY_CUDA_DRIVER names
the fake driver, whose "device" memory is mapped PROT_NONE: a host read of it
by dlpackarray kills that child and fails one test.  The checks read the fake
driver's call log (tests/helpers/arrow_device_capsules.py).
"""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
from arrow_ctypes import (
    DEVICE_STREAM_GET_NEXT,
    DEVICE_STREAM_GET_SCHEMA,
    RELEASE_SCHEMA,
    ArrowArray,
    ArrowDeviceArray,
    ArrowDeviceArrayStream,
    ArrowSchema,
    metadata_dict,
    schema_format,
    struct_of,
)
from arrow_device_capsules import (
    CUDA,
    CUDA_HOST,
    CUDA_MANAGED,
    Pair,
    _event,
    _fake,
    _fields,
    _move,
    _names,
    _release,
    _values,
)
from conftest import require, run_scenario_on_fake_driver

# -- running scenarios -----------------------------------------------------------------------


def run_scenario(name: str, driver) -> None:
    run_scenario_on_fake_driver(__file__, name, driver)


# -- export --------------------------------------------------------------------------------


def scenario_export_device_array():
    from fake_cuda import COPY_CALLS, KIND_HOST, KIND_MANAGED, cai

    from dlpackarray import DLPackArray

    f = _fake()
    src = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    p = f.device_array(src, device=1)
    f.stream(0x5100, device=1)  # the producer's stream, on the data's device
    obj = cai(p, src.shape, stream=0x5100)
    owner = weakref.ref(obj)
    x = DLPackArray(obj)
    del obj
    live = f.live_events()
    f.clear()
    schema, array = x.__arrow_c_device_array__()
    d = struct_of(array, ArrowDeviceArray)
    assert (d.device_type, d.device_id) == (CUDA, 1), (d.device_type, d.device_id)
    assert list(d.reserved) == [0, 0, 0] and _values(d) == p
    assert schema_format(schema) == "+w:12" and d.array.length == 2
    ev = _event(d)
    # One event, made in device 1's context and recorded on the ready stream.
    assert f.calls("cuEventCreate") == [f"cuEventCreate ev={ev:#x} flags=2 dev=1"], f.log()
    assert f.calls("cuEventRecord") == [f"cuEventRecord ev={ev:#x} stream=0x5100"], f.log()
    assert not f.calls("cuMemAlloc", *COPY_CALLS, "cuStreamSynchronize", "cuEventDestroy")
    assert f.live_events() == live + 1
    # Zero-copy: the structs keep the memory's owner alive (as on the CPU path).
    del x
    gc.collect()
    assert owner() is not None
    f.clear()
    del schema, array
    gc.collect()
    assert f.calls("cuEventDestroy") == [f"cuEventDestroy ev={ev:#x}"], f.log()
    assert f.live_events() == live and owner() is None

    # A consumer that moves the struct out releases it once; the capsule then
    # destroys nothing more.
    x = DLPackArray(cai(p, src.shape, stream=0x5100))
    schema, array = x.__arrow_c_device_array__()
    moved = _move(array)
    ev = _event(moved)
    f.clear()
    _release(moved)
    assert moved.array.release is None
    del schema, array
    gc.collect()
    assert f.calls("cuEventDestroy") == [f"cuEventDestroy ev={ev:#x}"], f.log()

    # Each export makes its own event; a NULL token is the legacy stream (0x1).
    y = DLPackArray(cai(p, src.shape, stream=None))
    f.clear()
    first, second = y.__arrow_c_device_array__()[1], y.__arrow_c_device_array__()[1]
    e1, e2 = _event(struct_of(first, ArrowDeviceArray)), _event(struct_of(second, ArrowDeviceArray))
    assert e1 != e2
    assert f.calls("cuEventRecord") == [
        f"cuEventRecord ev={e1:#x} stream=0x1",
        f"cuEventRecord ev={e2:#x} stream=0x1",
    ], f.log()
    del first, second
    gc.collect()

    # Pinned and managed memory keep their device types and get events too.
    for kind, device_type in ((KIND_HOST, CUDA_HOST), (KIND_MANAGED, CUDA_MANAGED)):
        q = f.device_array(src, kind=kind)
        z = DLPackArray(cai(q, src.shape, stream=0x6000))
        f.clear()
        _, array = z.__arrow_c_device_array__()
        d = struct_of(array, ArrowDeviceArray)
        assert (d.device_type, d.device_id, _values(d)) == (device_type, 0, q)
        assert f.calls("cuEventRecord") == [f"cuEventRecord ev={_event(d):#x} stream=0x6000"]
        assert not f.calls("cuStreamSynchronize"), "the consumer waits, not the producer"
        del array
    gc.collect()
    assert f.live_events() == live


def scenario_export_device_stream():
    from fake_cuda import cai

    from dlpackarray import DLPackArray

    f = _fake()
    src = np.arange(10, dtype=np.int32)
    p = f.device_array(src)
    x = DLPackArray(cai(p, src.shape, typestr="<i4", stream=0x5000))
    live = f.live_events()
    f.clear()
    capsule = x.__arrow_c_device_stream__()
    stream = struct_of(capsule, ArrowDeviceArrayStream)
    assert stream.device_type == CUDA
    schema = ArrowSchema()
    assert DEVICE_STREAM_GET_SCHEMA(stream.get_schema)(ctypes.byref(stream), schema) == 0
    assert schema.format == b"i"
    RELEASE_SCHEMA(schema.release)(schema)
    assert f.log() == [], "the stream itself makes no event: its chunks do"
    get_next = DEVICE_STREAM_GET_NEXT(stream.get_next)
    chunk, end = ArrowDeviceArray(), ArrowDeviceArray()
    assert get_next(ctypes.byref(stream), chunk) == 0
    assert (chunk.device_type, chunk.device_id, _values(chunk)) == (CUDA, 0, p)
    ev = _event(chunk)
    assert f.calls("cuEventRecord") == [f"cuEventRecord ev={ev:#x} stream=0x5000"], f.log()
    assert get_next(ctypes.byref(stream), end) == 0 and not end.array.release
    assert len(f.calls("cuEventCreate")) == 1
    # The chunk outlives its stream and destroys its own event, once.
    del stream, capsule
    gc.collect()
    assert not f.calls("cuEventDestroy")
    _release(chunk)
    assert f.calls("cuEventDestroy") == [f"cuEventDestroy ev={ev:#x}"]
    assert f.live_events() == live
    # Two streams' chunks carry distinct events.
    events = []
    for _ in range(2):
        s = struct_of(capsule := x.__arrow_c_device_stream__(), ArrowDeviceArrayStream)
        c = ArrowDeviceArray()
        assert DEVICE_STREAM_GET_NEXT(s.get_next)(ctypes.byref(s), c) == 0
        events.append(_event(c))
        _release(c)
        del s, capsule
    assert events[0] != events[1]
    gc.collect()
    assert f.live_events() == live


def scenario_cpu_methods_refuse_cuda_data():
    from fake_cuda import cai

    from dlpackarray import DLPackArray

    f = _fake()
    p = f.device_array(np.arange(6, dtype=np.float32))
    x = DLPackArray(cai(p, (2, 3), stream=0x5000))
    for method in (x.__arrow_c_array__, x.__arrow_c_stream__):
        f.clear()
        try:
            method()
        except BufferError as e:
            assert "not host memory" in str(e) and "__arrow_c_device_array__" in str(e), e
        else:
            raise AssertionError(f"{method.__name__} exported device memory")
        assert f.log() == [], "a refused export must not touch the driver"
    # The type alone involves no data: it is what the device methods export.
    f.clear()
    schema = x.__arrow_c_schema__()
    assert schema_format(schema) == "+w:3" and f.log() == []
    meta = metadata_dict(struct_of(schema, ArrowSchema))
    assert meta[b"ARROW:extension:name"] == b"arrow.fixed_shape_tensor"


def scenario_cpu_methods_on_pinned_and_managed_memory_synchronise():
    from fake_cuda import KIND_HOST, KIND_MANAGED, cai

    from dlpackarray import DLPackArray

    f = _fake()
    src = np.arange(6, dtype=np.float32)
    for kind in (KIND_HOST, KIND_MANAGED):
        p = f.device_array(src, kind=kind)
        x = DLPackArray(cai(p, (6,), stream=0x6000))
        f.clear()
        _, array = x.__arrow_c_array__()
        # A CPU consumer reads the pointer at once: the stream is synchronised first.
        assert f.calls("cuStreamSynchronize") == ["cuStreamSynchronize stream=0x6000"], f.log()
        assert struct_of(array, ArrowArray).buffers[1] == p
        f.clear()
        x.__arrow_c_stream__()
        assert f.calls("cuStreamSynchronize") == ["cuStreamSynchronize stream=0x6000"], f.log()


def scenario_copies_stay_on_the_device():
    import pyarrow as pa
    from fake_cuda import COPY_CALLS, KIND_HOST, cai

    from dlpackarray import DLPackArray

    f = _fake()
    src = np.arange(20, dtype=np.int32).reshape(4, 5)
    p = f.device_array(src)
    obj = cai(p, src.shape, typestr="<i4", stream=0x5000)
    owner = weakref.ref(obj)
    x = DLPackArray(obj)
    del obj
    view = x[:, ::2]
    allocations, live = f.live_allocations(), f.live_events()
    f.clear()
    schema, array = view.__arrow_c_device_array__()
    d = struct_of(array, ArrowDeviceArray)
    q = _values(d)
    assert (d.device_type, d.device_id) == (CUDA, 0) and q != p
    assert f.live_allocations() == allocations + 1
    names = [n for n in _names(f) if n in ("cuMemAlloc", *COPY_CALLS, "cuEventRecord")]
    # Allocate, copy on the ready stream, then record the event after the copy.
    assert names[0] == "cuMemAlloc" and names[-1] == "cuEventRecord", f.log()
    assert set(names[1:-1]) == {"cuMemcpy2DAsync"}, f.log()
    for line in f.calls("cuMemcpy2DAsync"):
        assert _fields(line)["dst"] == "device" and _fields(line)["stream"] == "0x5000", line
    assert _fields(f.calls("cuEventRecord")[0])["stream"] == "0x5000"
    assert not f.calls("cuStreamSynchronize"), "a device copy never waits on the host"
    # The copy lands once its event has fired: a consumer waits on it first.
    assert f.lib.cuEventSynchronize(ctypes.c_void_p(_event(d))) == 0
    assert f.read(q, src[:, ::2].nbytes) == np.ascontiguousarray(src[:, ::2]).tobytes()
    meta = metadata_dict(struct_of(schema, ArrowSchema))
    assert meta[b"ARROW:extension:metadata"] == b'{"shape":[3]}'
    # A device copy is enqueued, not done: it keeps the source's owner alive
    # until its memory is freed (docs/cuda.md), unlike a finished host copy.
    del x, view
    gc.collect()
    assert owner() is not None
    f.clear()
    del schema, array
    gc.collect()
    assert owner() is None
    assert f.calls("cuMemFree") == [f"cuMemFree ptr={q:#x}"], f.log()
    assert f.live_allocations() == allocations and f.live_events() == live

    x = DLPackArray(cai(p, src.shape, typestr="<i4", stream=0x5000))
    # copy=False refuses before any driver call; copy=True copies even dense data.
    f.clear()
    try:
        x[:, ::2].__arrow_c_device_array__(copy=False)
    except BufferError as e:
        assert "copy=False" in str(e), e
    else:
        raise AssertionError("copy=False made a copy")
    assert f.log() == []
    _, array = x.__arrow_c_device_array__(copy=True)
    assert _values(struct_of(array, ArrowDeviceArray)) != p and f.calls("cuMemAlloc")
    del array
    # A strided view of pinned memory is copied into device memory: device type 2.
    h = f.device_array(src, kind=KIND_HOST)
    pinned = DLPackArray(cai(h, src.shape, typestr="<i4"))
    _, array = pinned[:, 1:3].__arrow_c_device_array__()
    d = struct_of(array, ArrowDeviceArray)
    assert (d.device_type, d.device_id) == (CUDA, 0) and _values(d) != h
    del array
    # Bit-packing needs the host: the request is answered with arrow.bool8, zero-copy.
    b = f.device_array(np.array([1, 0, 1, 1], dtype=np.uint8))
    flags = DLPackArray(cai(b, (4,), typestr="|b1"))
    f.clear()
    schema, array = flags.__arrow_c_device_array__(pa.bool_().__arrow_c_schema__())
    assert schema_format(schema) == "c" and _values(struct_of(array, ArrowDeviceArray)) == b
    assert not f.calls("cuMemAlloc")
    del schema, array
    gc.collect()
    assert f.live_allocations() == allocations + 2  # h and b: every copy was freed
    assert f.live_events() == live


def scenario_release_from_a_non_python_thread():
    from fake_cuda import cai

    from dlpackarray import DLPackArray

    libc = ctypes.CDLL(None)
    libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong)] + [ctypes.c_void_p] * 3
    libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
    f = _fake()
    src = np.arange(12, dtype=np.float64).reshape(3, 4)
    p = f.device_array(src)
    obj = cai(p, src.shape, typestr="<f8", stream=0x5000)
    owner = weakref.ref(obj)
    x = DLPackArray(obj)
    del obj
    allocations, live = f.live_allocations(), f.live_events()
    for view in (x, x[:, ::2]):  # zero-copy, then a device copy
        _, array = view.__arrow_c_device_array__()
        moved = _move(array)
        del array
        ev, values = _event(moved), _values(moved)
        f.clear()
        tid = ctypes.c_ulong()
        # The release is the start routine of a thread Python has never seen.
        assert libc.pthread_create(ctypes.byref(tid), None, moved.array.release,
                                   ctypes.addressof(moved.array)) == 0  # fmt: skip
        assert libc.pthread_join(tid, None) == 0
        assert moved.array.release is None
        assert f.calls("cuEventDestroy") == [f"cuEventDestroy ev={ev:#x}"], f.log()
        if values != p:
            assert f.calls("cuMemFree") == [f"cuMemFree ptr={values:#x}"], f.log()
    assert f.live_events() == live and f.live_allocations() == allocations
    del x, view
    gc.collect()
    assert owner() is None


def scenario_export_without_a_driver():
    # DLPACKARRAY_CUDA_DRIVER names a library that does not exist.
    import dlpack_ctypes as dc

    from dlpackarray import DLPackArray

    p = dc.Producer(None, shape=(4,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 1), data=0x10000,
                    device=(dc.KDL_CUDA, 0))  # fmt: skip
    x = DLPackArray(p.capsule())
    # No driver: no CUDA work can be pending in this process, so no event.
    schema, array = x.__arrow_c_device_array__()
    d = struct_of(array, ArrowDeviceArray)
    assert (d.device_type, d.device_id, d.sync_event, _values(d)) == (CUDA, 0, None, 0x10000)
    # Without an event, importing needs no driver either.
    y = DLPackArray(Pair(schema, array))
    assert y.device == (CUDA, 0) and y.data_ptr == 0x10000

    class OnStream:
        """A CUDA DLPack producer: data ready on the consumer's stream 0x7000."""

        def __dlpack_device__(self):
            return (dc.KDL_CUDA, 0)

        def __dlpack__(self, **kwargs):
            q = dc.Producer(None, shape=(4,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 1),
                            data=0x10000, device=(dc.KDL_CUDA, 0))  # fmt: skip
            self.keep = q
            return q.capsule()

    z = DLPackArray(OnStream(), stream=0x7000)
    # Work may be pending on that stream: an event is needed, and the driver.
    try:
        z.__arrow_c_device_array__()
    except BufferError as e:
        assert "CUDA driver" in str(e), e
    else:
        raise AssertionError("exported pending CUDA data without an event")


# -- the tests ------------------------------------------------------------------------------


def test_export_device_array_has_the_device_and_an_event_on_the_ready_stream(fake_driver):
    run_scenario("export_device_array", fake_driver)


def test_export_device_stream_chunks_carry_their_own_events(fake_driver):
    run_scenario("export_device_stream", fake_driver)


def test_cpu_methods_refuse_cuda_data_with_a_hint(fake_driver):
    run_scenario("cpu_methods_refuse_cuda_data", fake_driver)


def test_cpu_methods_on_pinned_and_managed_memory_synchronise(fake_driver):
    run_scenario("cpu_methods_on_pinned_and_managed_memory_synchronise", fake_driver)


def test_copies_stay_on_the_device_and_are_freed_at_release(fake_driver):
    require("pyarrow", "the scenario's Arrow consumer")
    run_scenario("copies_stay_on_the_device", fake_driver)


def test_release_from_a_non_python_thread(fake_driver):
    run_scenario("release_from_a_non_python_thread", fake_driver)


def test_export_without_a_driver(tmp_path):
    run_scenario("export_without_a_driver", tmp_path / "no-such-libcuda.so")
