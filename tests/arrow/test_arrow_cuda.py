"""CUDA data through the Arrow C Device Data interface, on every CI run, against
the fake CUDA driver (tests/helpers/fake_cuda; docs/arrow.md, "CUDA data").

Export: the device methods describe CUDA-family views with their device type
and id and a sync event recorded on the view's ready stream, destroyed exactly
once by the release (from any thread); copies stay on the device; the CPU
methods refuse device memory.  Import: a device array's sync_event is waited on
before its data is exposed; foreign devices are refused by name.

Each scenario runs in a child interpreter whose DLPACKARRAY_CUDA_DRIVER names
the fake driver, whose "device" memory is mapped PROT_NONE: a host read of it
by dlpackarray kills that child and fails one test.  The checks read the fake
driver's call log.
"""

from __future__ import annotations

import ctypes
import gc
import os
import pathlib
import weakref

import numpy as np
import pytest
from arrow_ctypes import (
    DEVICE_STREAM_GET_NEXT,
    DEVICE_STREAM_GET_SCHEMA,
    RELEASE_ARRAY,
    RELEASE_SCHEMA,
    ArrowArray,
    ArrowDeviceArray,
    ArrowDeviceArrayStream,
    ArrowSchema,
    metadata_dict,
    schema_format,
    struct_of,
)
from conftest import assert_clean_exit, require, run_python

HERE = pathlib.Path(__file__).resolve().parent
HELPERS = HERE.parent / "helpers"
CUDA, CUDA_HOST, CUDA_MANAGED = 2, 3, 13


# -- running scenarios -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    import fake_cuda

    # Fails (never skips) when the fake driver cannot be built, as in test_cuda_fake.
    return fake_cuda.build(tmp_path_factory.mktemp("fake_cuda_arrow"))


def run_scenario(name: str, driver) -> None:
    code = (
        f"import sys; sys.path[:0] = [{str(HERE)!r}, {str(HELPERS)!r}]; "
        f"import test_arrow_cuda as t; t.scenario_{name}()"
    )
    proc = run_python(code, env={"DLPACKARRAY_CUDA_DRIVER": str(driver)}, timeout=300)
    assert_clean_exit(proc, name)


# -- helpers used inside the children --------------------------------------------------------


def _fake():
    from fake_cuda import FakeCuda

    f = FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])
    f.standard_streams()  # the stream handles written literally below, on device 0
    return f


def _fields(line: str) -> dict[str, str]:
    return dict(item.split("=") for item in line.split()[1:])


def _names(f) -> list[str]:
    return [line.split()[0] for line in f.log()]


def _event(d: ArrowDeviceArray) -> int:
    """The CUevent handle a device array's sync_event points at."""
    assert d.sync_event, "no sync event"
    return ctypes.c_void_p.from_address(d.sync_event).value


def _values(d: ArrowDeviceArray) -> int:
    """Address of the leaf values buffer of an exported device array."""
    node = d.array
    while node.n_children:
        node = node.children[0].contents
    return node.buffers[1]


def _host(x) -> np.ndarray:
    from dlpackarray import DLPackArray

    return np.asarray(DLPackArray(x, device="cpu"))


def _move(capsule) -> ArrowDeviceArray:
    """Moves the ArrowDeviceArray out of its capsule, as a consumer does."""
    src = struct_of(capsule, ArrowDeviceArray)
    moved = ArrowDeviceArray()
    ctypes.memmove(ctypes.addressof(moved), ctypes.addressof(src), ctypes.sizeof(moved))
    src.array.release = None
    return moved


def _release(d: ArrowDeviceArray) -> None:
    RELEASE_ARRAY(d.array.release)(ctypes.byref(d.array))


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# Capsule names must outlive their capsules.
_DEVICE_ARRAY_NAME = b"arrow_device_array"
_DEVICE_STREAM_NAME = b"arrow_device_array_stream"


# Every HandBuilt/HandStream stays alive to the end of the child: an imported
# array calls its release callback whenever its last view goes.
_KEEP: list = []


class HandBuilt:
    """An ``arrow_device_array`` capsule made with ctypes: one primitive array over
    the given buffers, a sync event of "another library" and a release callback
    that counts its calls.  The capsule has no destructor: what a consumer does
    not move out stays here, for the test to see."""

    def __init__(self, values, length, *, device_type=CUDA, device_id=0, event=None,
                 validity=None, null_count=0, offset=0):  # fmt: skip
        _KEEP.append(self)
        self.released = 0
        self.buffers = (ctypes.c_void_p * 2)(validity, values)
        self.handle = ctypes.c_void_p(event)
        self.struct = ArrowDeviceArray()
        a = self.struct.array
        a.length, a.null_count, a.offset, a.n_buffers, a.n_children = (
            length, null_count, offset, 2, 0,
        )  # fmt: skip
        a.buffers = ctypes.cast(self.buffers, ctypes.POINTER(ctypes.c_void_p))
        self._callback = RELEASE_ARRAY(self._on_release)
        a.release = ctypes.cast(self._callback, ctypes.c_void_p).value
        self.struct.device_type = device_type
        self.struct.device_id = device_id
        self.struct.sync_event = ctypes.addressof(self.handle) if event else None

    def _on_release(self, array):
        self.released += 1
        array.contents.release = None

    def capsule(self):
        return _capsule_new(ctypes.addressof(self.struct), _DEVICE_ARRAY_NAME, None)


class HandStream:
    """An ``arrow_device_array_stream`` capsule made with ctypes that hands out
    the given (moved) device arrays, then the end of the stream."""

    def __init__(self, chunks, schema_of, device_type=CUDA):
        _KEEP.append(self)
        self.chunks = list(chunks)
        self.schema_of = schema_of  # () -> a fresh "arrow_schema" capsule
        self.released = 0
        self.struct = ArrowDeviceArrayStream()
        self.struct.device_type = device_type
        self._callbacks = (
            DEVICE_STREAM_GET_SCHEMA(self._get_schema),
            DEVICE_STREAM_GET_NEXT(self._get_next),
            ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(lambda s: None),
            ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowDeviceArrayStream))(self._on_release),
        )
        names = ("get_schema", "get_next", "get_last_error", "release")
        for name, cb in zip(names, self._callbacks, strict=True):
            setattr(self.struct, name, ctypes.cast(cb, ctypes.c_void_p).value)

    def _get_schema(self, stream, out):
        capsule = self.schema_of()  # alive until the struct is moved out
        src = struct_of(capsule, ArrowSchema)
        ctypes.memmove(out, ctypes.addressof(src), ctypes.sizeof(ArrowSchema))
        src.release = None
        return 0

    def _get_next(self, stream, out):
        if not self.chunks:
            out.contents.array.release = None
            return 0
        chunk = self.chunks.pop(0)
        ctypes.memmove(out, ctypes.addressof(chunk), ctypes.sizeof(ArrowDeviceArray))
        chunk.array.release = None
        return 0

    def _on_release(self, stream):
        self.released += 1
        stream.contents.release = None

    def capsule(self):
        return _capsule_new(ctypes.addressof(self.struct), _DEVICE_STREAM_NAME, None)


class Pair:
    """An object speaking only __arrow_c_device_array__, returning given capsules."""

    def __init__(self, schema, array):
        self.pair = (schema, array)

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return self.pair


class Stream:
    """An object speaking only __arrow_c_device_stream__, returning a given capsule."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __arrow_c_device_stream__(self, requested_schema=None, **kwargs):
        return self.capsule


def _schema(dtype="float32", cell=()):
    from dlpackarray import DLPackArray

    return DLPackArray(np.zeros((0, *cell), dtype=dtype)).__arrow_c_schema__()


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


# -- import --------------------------------------------------------------------------------


def scenario_import_waits_on_the_sync_event():
    from fake_cuda import KIND_HOST

    from dlpackarray import DLPackArray

    f = _fake()
    src = np.arange(8, dtype=np.float32)
    p = f.device_array(src, device=1)
    ev = f.new_event()
    hb = HandBuilt(p, 8, device_id=1, event=ev)
    f.clear()
    y = DLPackArray(Pair(_schema(), hb.capsule()))
    # The one driver call (after the driver's first load): the wait, in
    # device 1's context.
    calls = [line for line in f.log() if not line.startswith(("cuInit", "cuDevicePrimary"))]
    assert calls == ["cuCtxPushCurrent dev=1", f"cuEventSynchronize ev={ev:#x}", "cuCtxPopCurrent"]
    assert y.device == (CUDA, 1) and y.data_ptr == p and y.shape == (8,) and y.readonly
    assert hb.struct.array.release is None and hb.released == 0  # moved out, held
    # Nothing is pending after the wait: no stream for consumers to wait on.
    assert y.__cuda_array_interface__["stream"] is None
    np.testing.assert_array_equal(_host(y), src)
    del y
    gc.collect()
    assert hb.released == 1

    # No event: nothing to wait for, no driver call at all.
    hb = HandBuilt(p, 8, device_id=1)
    f.clear()
    y = DLPackArray(Pair(_schema(), hb.capsule()))
    assert f.log() == [] and y.data_ptr == p
    # The offset is honoured.
    hb = HandBuilt(p, 4, offset=2, device_id=1, event=f.new_event())
    y = DLPackArray(Pair(_schema(), hb.capsule()))
    assert y.data_ptr == p + 8 and y.shape == (4,)
    np.testing.assert_array_equal(_host(y), src[2:6])

    # Nulls: the validity bitmap lives on the device too; it is read after the
    # wait, through a device-to-host copy of the bytes that cover the window.
    bitmap = f.device_array(np.array([0b11110111], dtype=np.uint8))  # slot 3 is null
    for null_count in (-1, 1):
        ev = f.new_event()
        hb = HandBuilt(p, 8, event=ev, validity=bitmap, null_count=null_count)
        f.clear()
        try:
            DLPackArray(Pair(_schema(), hb.capsule()))
        except ValueError as e:
            assert "1 null(s)" in str(e), e
        else:
            raise AssertionError("nulls on the device were not seen")
        names = _names(f)
        assert names.index("cuEventSynchronize") < names.index("cuMemcpyDtoHAsync"), f.log()
        gc.collect()
        assert hb.released == 1
    # A null outside the window does not count.
    hb = HandBuilt(p, 4, offset=4, event=f.new_event(), validity=bitmap, null_count=-1)
    y = DLPackArray(Pair(_schema(), hb.capsule()))
    assert y.data_ptr == p + 16

    # Pinned memory keeps its device type; N-D schemas apply as on the host.
    h = f.device_array(src, kind=KIND_HOST)
    ev = f.new_event()
    hb = HandBuilt(h, 8, device_type=CUDA_HOST, event=ev)
    f.clear()
    y = DLPackArray(Pair(_schema(), hb.capsule()))
    assert f.calls("cuEventSynchronize") == [f"cuEventSynchronize ev={ev:#x}"]
    assert y.device == (CUDA_HOST, 0) and np.asarray(y).tolist() == src.tolist()


def scenario_failing_event_wait_raises_and_leaks_nothing():
    from dlpackarray import DLPackArray

    f = _fake()
    p = f.device_array(np.arange(8, dtype=np.float32))
    allocations = f.live_allocations()
    hb = HandBuilt(p, 8, event=f.new_event())
    capsule = hb.capsule()
    f.clear()
    f.fail_next("cuEventSynchronize")
    try:
        DLPackArray(Pair(_schema(), capsule))
    except BufferError as e:
        text = str(e)
        assert "cuEventSynchronize" in text and "sync_event" in text, text
        assert "CUDA_ERROR_INVALID_VALUE" in text, text
    else:
        raise AssertionError("a failed event wait exposed the data")
    gc.collect()
    # The array was moved out of its capsule and released exactly once.
    assert hb.struct.array.release is None and hb.released == 1
    assert len(f.calls("cuCtxPushCurrent")) == len(f.calls("cuCtxPopCurrent")) == 1
    assert f.live_allocations() == allocations and not f.calls("cuMemAlloc", "cuEventCreate")
    # The same through a stream: the failing chunk is released, so is the stream.
    hb = HandBuilt(p, 8, event=f.new_event())
    chunk = ArrowDeviceArray()
    ctypes.memmove(ctypes.addressof(chunk), ctypes.addressof(hb.struct), ctypes.sizeof(chunk))
    stream = HandStream([chunk], _schema)
    f.fail_next("cuEventSynchronize")
    try:
        DLPackArray(Stream(stream.capsule()))
    except BufferError as e:
        assert "cuEventSynchronize" in str(e), e
    else:
        raise AssertionError("a failed event wait exposed the data")
    gc.collect()
    assert hb.released == 1 and stream.released == 1


def scenario_round_trip_through_device_capsules():
    from fake_cuda import KIND_HOST, cai

    from dlpackarray import DLPackArray

    f = _fake()
    src = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    p = f.device_array(src, device=1)
    x = DLPackArray(cai(p, src.shape, typestr="<f8", stream=0x7000))
    live = f.live_events()
    permuted = x.transpose(0, 2, 1), src.transpose(0, 2, 1)
    cases = [
        (x, src, {}),
        (*permuted, {"copy": False}),  # permuted cells as they are: zero-copy
        (*permuted, {}),  # by default in logical order: copied on the device
        (x[1:], src[1:], {}),
        (x[:, 0, 0], src[:, 0, 0], {}),  # a column with gaps: copied on the device
    ]
    for view, ref, kwargs in cases:
        f.clear()
        schema, array = view.__arrow_c_device_array__(**kwargs)
        ev = _event(struct_of(array, ArrowDeviceArray))
        y = DLPackArray(Pair(schema, array))
        assert y.device == (CUDA, 1) and y.shape == view.shape
        assert f.calls("cuEventSynchronize") == [f"cuEventSynchronize ev={ev:#x}"], f.log()
        if view.c_contiguous or kwargs:
            assert y.data_ptr == view.data_ptr and y.strides == view.strides
            assert not f.calls("cuMemAlloc")
        else:
            assert y.data_ptr != view.data_ptr and f.calls("cuMemAlloc")
        np.testing.assert_array_equal(_host(y), ref)
        del y, schema, array
    # Through the device stream: one chunk, its own event, the same memory.
    f.clear()
    y = DLPackArray(Stream(x.__arrow_c_device_stream__()))
    assert y.device == (CUDA, 1) and y.data_ptr == p and y.shape == x.shape
    assert len(f.calls("cuEventRecord")) == len(f.calls("cuEventSynchronize")) == 1
    del y
    gc.collect()
    assert f.live_events() == live
    # Pinned memory keeps its device type both ways.
    h = f.device_array(src, kind=KIND_HOST)
    z = DLPackArray(Pair(*DLPackArray(cai(h, src.shape, typestr="<f8")).__arrow_c_device_array__()))
    assert z.device == (CUDA_HOST, 0) and z.data_ptr == h


def scenario_unknown_devices_are_refused():
    from fake_cuda import cai

    from dlpackarray import DLPackArray

    f = _fake()
    p = f.device_array(np.arange(8, dtype=np.float32))
    for device_type, name in ((10, "ROCm"), (11, "ROCm host"), (8, "Metal"), (4, "OpenCL"),
                              (99, "unknown")):  # fmt: skip
        hb = HandBuilt(p, 8, device_type=device_type, event=f.new_event())
        f.clear()
        try:
            DLPackArray(Pair(_schema(), hb.capsule()))
        except BufferError as e:
            assert f"device type {device_type} ({name}, id 0)" in str(e), e
        else:
            raise AssertionError(f"device type {device_type} accepted")
        # Refused before the move: the struct stays with its capsule's owner.
        assert f.log() == [] and hb.struct.array.release and hb.released == 0
        _release(hb.struct)
    hb = HandBuilt(p, 8, device_id=-1)
    try:
        DLPackArray(Pair(_schema(), hb.capsule()))
    except ValueError as e:
        assert "device id -1" in str(e), e
    else:
        raise AssertionError("CUDA device id -1 accepted")
    # A stream chunk on a foreign device: refused, the chunk and stream released.
    x = DLPackArray(cai(p, (8,), stream=0x5000))
    live = f.live_events()
    chunk = _move(x.__arrow_c_device_array__()[1])
    chunk.device_type = 10
    stream = HandStream([chunk], _schema, device_type=10)
    try:
        DLPackArray(Stream(stream.capsule()))
    except BufferError as e:
        assert "device type 10 (ROCm" in str(e), e
    else:
        raise AssertionError("a ROCm chunk was accepted")
    gc.collect()
    assert stream.released == 1 and f.live_events() == live  # the chunk (and its event) is gone


def scenario_device_chunks_are_not_concatenated():
    from fake_cuda import KIND_HOST, cai

    from dlpackarray import DLPackArray

    f = _fake()
    a, b = np.arange(4, dtype=np.float32), np.arange(4, 10, dtype=np.float32)
    pa_, pb = f.device_array(a), f.device_array(b)
    live, allocations = f.live_events(), f.live_allocations()

    def chunks(ptrs_and_sizes):
        return [
            _move(DLPackArray(cai(ptr, (n,), stream=0x5000)).__arrow_c_device_array__()[1])
            for ptr, n in ptrs_and_sizes
        ]

    for copy in (None, True, False):
        stream = HandStream(chunks([(pa_, 4), (pb, 6)]), _schema)
        try:
            DLPackArray(Stream(stream.capsule()), copy=copy)
        except BufferError as e:
            assert "2 non-empty chunks" in str(e) and "on the device" in str(e), e
        else:
            raise AssertionError("device chunks were concatenated")
        gc.collect()
        assert stream.released == 1 and f.live_events() == live  # every chunk released
        assert f.live_allocations() == allocations
    # One non-empty chunk among empty ones: zero-copy.
    stream = HandStream(chunks([(pa_, 0), (pb, 6), (pa_, 0)]), _schema)
    y = DLPackArray(Stream(stream.capsule()))
    assert y.data_ptr == pb and y.device == (CUDA, 0)
    # Pinned chunks are host-readable once their events fired: one host copy.
    ha, hb = f.device_array(a, kind=KIND_HOST), f.device_array(b, kind=KIND_HOST)
    stream = HandStream(chunks([(ha, 4), (hb, 6)]), _schema, device_type=CUDA_HOST)
    f.clear()
    y = DLPackArray(Stream(stream.capsule()))
    assert len(f.calls("cuEventSynchronize")) == 2, f.log()
    assert y.device == (1, 0) and np.asarray(y).tolist() == list(range(10))


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


def test_import_waits_on_the_sync_event_before_exposing_data(fake_driver):
    run_scenario("import_waits_on_the_sync_event", fake_driver)


def test_failing_event_wait_raises_and_leaks_nothing(fake_driver):
    run_scenario("failing_event_wait_raises_and_leaks_nothing", fake_driver)


def test_round_trip_through_device_capsules(fake_driver):
    run_scenario("round_trip_through_device_capsules", fake_driver)


def test_unknown_devices_are_refused_by_name(fake_driver):
    run_scenario("unknown_devices_are_refused", fake_driver)


def test_device_chunks_are_not_concatenated(fake_driver):
    run_scenario("device_chunks_are_not_concatenated", fake_driver)
