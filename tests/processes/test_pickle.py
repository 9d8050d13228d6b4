"""Pickle (protocols 2-5, protocol 5 out-of-band), copy, deepcopy and weakref of DLPackArray.

docs/processes.md states what is checked here: a pickle carries the contiguous
span of bytes the elements cover (out-of-band as one PickleBuffer with protocol 5
and a buffer_callback, zero-copy on both sides), the layout (shape, strides,
dtype), the read-only flag and the device; a pickle whose layout does not fit its
bytes raises a clear exception instead of giving an out-of-bounds view.
"""

from __future__ import annotations

import copy
import gc
import math
import pickle
import weakref

import dlpack_ctypes as dc
import numpy as np
import pytest
from conftest import assert_clean_exit, run_python
from hypothesis import given
from hypothesis import strategies as st
from strategies import ALL_DTYPES, strided_views, wrap

from dlpackarray import DLDeviceType, DLPackArray
from dlpackarray._pickle import FORMAT_VERSION, byte_extent, rebuild

PROTOCOLS = range(2, pickle.HIGHEST_PROTOCOL + 1)
CPU = (DLDeviceType.CPU, 0)


def element_bytes(x: DLPackArray) -> bytes:
    """x's elements in C order, as raw bytes (any dtype, any layout)."""
    return bytes(memoryview(x.copy().reshape(-1).view("uint8")))


def extent(shape, byte_strides, itemsize) -> tuple[int, int]:
    """Bytes [lo, hi) touched relative to the first element, computed independently."""
    if math.prod(shape) == 0:
        return 0, 0
    lo = sum((n - 1) * s for n, s in zip(shape, byte_strides, strict=True) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, byte_strides, strict=True) if s > 0)
    return lo, hi + itemsize


def ships_span(x: DLPackArray) -> bool:
    """Whether x pickles as the span it covers (else as a C-contiguous copy of its
    elements): the span is at most twice the elements' bytes (docs/processes.md)."""
    return x.size == 0 or byte_extent(x) <= 2 * x.size * x.itemsize


def c_strides(shape) -> tuple:
    """C-contiguous strides in elements."""
    return tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))


def assert_same_array(y: DLPackArray, x: DLPackArray) -> None:
    assert type(y) is DLPackArray
    assert (y.dtype, y.shape, y.device) == (x.dtype, x.shape, CPU)
    if ships_span(x):
        assert y.strides == x.strides
    else:
        assert y.c_contiguous and y.strides == c_strides(x.shape)
    assert y.byte_offset == x.byte_offset == 0
    assert element_bytes(y) == element_bytes(x)


def out_of_band(x, **loads_kwargs):
    buffers = []
    data = pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
    return data, buffers


@given(strided_views(ALL_DTYPES), st.booleans())
def test_every_protocol_and_copy_path_round_trips(case, readonly_wrapper):
    name, _base, view = case
    x = wrap(name, view)
    if readonly_wrapper and not x.readonly:
        x = DLPackArray(x.__dlpack__(max_version=(1, 3)))  # same memory
    span = byte_extent(x)
    assert span == (
        extent(x.shape, [s * x.itemsize for s in x.strides], x.itemsize)[1]
        - extent(x.shape, [s * x.itemsize for s in x.strides], x.itemsize)[0]
    )
    dense = ships_span(x)
    if not dense:
        span = x.size * x.itemsize  # a C-contiguous copy of the elements travels
    for protocol in PROTOCOLS:
        data = pickle.dumps(x, protocol=protocol)
        # In-band: the span's bytes (or the elements') once, never the logical size.
        # (Protocol 2 spells a bytearray as a latin-1 str: up to 2 bytes per byte.)
        assert len(data) <= (2 if protocol < 3 else 1) * span + 400
        y = pickle.loads(data)
        assert_same_array(y, x)
        assert y.readonly == x.readonly
        if x.size:
            assert y.data_ptr != x.data_ptr
    # Out-of-band: one buffer (the span) per non-empty array, shared on both sides.
    data, buffers = out_of_band(x)
    assert len(data) < 400
    assert len(buffers) == (1 if x.size else 0)
    for b in buffers:
        raw = b.raw()  # Dask and Ray send raw()
        assert raw.nbytes == span and raw.readonly == x.readonly
    y = pickle.loads(data, buffers=buffers)
    assert_same_array(y, x)
    assert y.readonly == x.readonly
    if x.size:
        assert (y.data_ptr == x.data_ptr) == dense  # zero copy of a span that is sent
    # The same through raw() memoryviews, as a transport hands them back.
    y = pickle.loads(data, buffers=[b.raw() for b in buffers])
    assert_same_array(y, x)
    assert y.readonly == x.readonly
    # Read-only buffers (Ray's object store) give a read-only array.
    y = pickle.loads(data, buffers=[memoryview(bytes(b.raw())) for b in buffers])
    assert_same_array(y, x)
    assert y.readonly == (x.readonly or x.size > 0)
    # copy.copy / copy.deepcopy: ndarray.copy semantics.
    for c in (copy.copy(x), copy.deepcopy(x), copy.deepcopy([x, x])[0]):
        assert (c.dtype, c.shape) == (x.dtype, x.shape)
        assert c.c_contiguous and not c.readonly and c.device == CPU
        assert element_bytes(c) == element_bytes(x)
        if x.size:
            assert c.data_ptr != x.data_ptr


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_writable_arrays_unpickle_writable_and_independent(protocol):
    src = np.arange(24, dtype=np.int32).reshape(4, 6)[::-1, 1::2]
    x = DLPackArray(src)
    y = pickle.loads(pickle.dumps(x, protocol=protocol))
    assert not y.readonly
    ny = np.asarray(y)
    ny[...] = -1
    assert (src >= 0).all()  # its own memory
    z = pickle.loads(pickle.dumps(DLPackArray(src).__getitem__(slice(None)), protocol=protocol))
    np.testing.assert_array_equal(np.asarray(z), src)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_read_only_survives_in_band(protocol):
    src = np.arange(10.0)
    src.flags.writeable = False
    y = pickle.loads(pickle.dumps(DLPackArray(src), protocol=protocol))
    assert y.readonly  # (NumPy drops this flag in-band)
    with pytest.raises((BufferError, ValueError)):
        np.asarray(y)[0] = 1


def test_out_of_band_shares_writes_both_ways():
    src = np.zeros((3, 5), np.float32)
    x = DLPackArray(src)[:, ::2]
    data, buffers = out_of_band(x)
    y = pickle.loads(data, buffers=buffers)
    np.asarray(y)[1, 1] = 7
    assert src[1, 2] == 7


def test_broadcast_ships_its_real_bytes_only():
    x = DLPackArray(np.broadcast_to(np.int16(-3), (2**40,)))
    assert x.strides == (0,) and byte_extent(x) == 2
    for protocol in PROTOCOLS:
        data = pickle.dumps(x, protocol=protocol)
        assert len(data) < 200
        y = pickle.loads(data)
        assert (y.shape, y.strides, y.readonly) == ((2**40,), (0,), True)
        assert y[2**40 - 1].item() == -3
    data, buffers = out_of_band(x)
    assert [b.raw().nbytes for b in buffers] == [2]
    # Broadcast inner dimension of a 2-D array: each row's one element.
    row = DLPackArray(np.broadcast_to(np.arange(3.0)[:, None], (3, 10**12)))
    assert byte_extent(row) == 24
    y = pickle.loads(pickle.dumps(row))
    assert y.strides == (1, 0) and y[2, 10**12 - 1].item() == 2.0


@pytest.mark.parametrize(
    "src",
    [
        np.array(3.5),
        np.zeros((0,), np.float64),
        np.zeros((3, 0, 2), np.int8),
        np.arange(10)[::-1],
        np.arange(10)[::-3],
        np.arange(60).reshape(3, 4, 5).transpose(2, 0, 1)[::-1, :, ::2],
        np.arange(6, dtype=np.complex64).reshape(2, 3).T,
        np.array([True, False, True])[::-1],
    ],
    ids=["0-d", "empty", "empty-3d", "negative", "negative-step3", "3d", "complex-T", "bool"],
)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_layouts_round_trip(src, protocol):
    x = DLPackArray(src)
    y = pickle.loads(pickle.dumps(x, protocol=protocol))
    assert_same_array(y, x)
    np.testing.assert_array_equal(np.asarray(y), src)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "complex128"])
def test_every_dtype_code_survives(name):
    raw = np.arange(64, dtype=np.uint8)
    x = DLPackArray(raw).view(name)[1::2]
    for protocol in PROTOCOLS:
        y = pickle.loads(pickle.dumps(x, protocol=protocol))
        assert y.dtype.name == name
        assert_same_array(y, x)


def test_host_accessible_cuda_memory_unpickles_as_host_memory():
    # Pinned memory (kDLCUDAHost) is host memory: it is read (nothing is
    # pending on it here) and becomes ordinary host memory on the other side.
    src = np.arange(8, dtype=np.float32)
    p = dc.Producer(src, device=(3, 0))
    x = DLPackArray(p.capsule())
    assert x.device == (DLDeviceType.CPU_PINNED, 0)
    y = pickle.loads(pickle.dumps(x, protocol=5))
    assert y.device == CPU
    np.testing.assert_array_equal(np.asarray(y), src)


@pytest.mark.parametrize("device", [(4, 0), (10, 0), (14, 0)])  # OpenCL, ROCm, oneAPI
def test_devices_that_cannot_leave_the_process_are_refused(device):
    p = dc.Producer(None, shape=(4,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 1), data=0x10000,
                    device=device)  # fmt: skip
    x = DLPackArray(p.capsule())
    with pytest.raises(BufferError, match="cannot pickle a DLPackArray"):
        pickle.dumps(x)


# -- tampered pickles ---------------------------------------------------------------------


def good_args(x=None):
    x = DLPackArray(np.arange(12, dtype=np.int32).reshape(3, 4)) if x is None else x
    _fn, args = x.__reduce_ex__(5)
    return list(args)


def with_arg(i, value):
    args = good_args()
    args[i] = value
    return args


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (with_arg(0, 2), ValueError, "format version 2"),
        (with_arg(0, "1"), ValueError, "format version"),
        (with_arg(1, b"\0" * 47), ValueError, "outside|beyond|reach"),
        (with_arg(1, 12345), TypeError, "bytes-like"),
        (with_arg(1, memoryview(bytes(96))[::2]), BufferError, "contiguous"),
        (with_arg(2, "float128x"), TypeError, "float128x"),
        (with_arg(2, 7), TypeError, "dtype must be a str"),
        (with_arg(3, [3, 4]), TypeError, "shape must be a tuple"),
        (with_arg(3, (3, 5)), ValueError, "outside the source buffer"),
        (with_arg(3, (3, -4)), ValueError, "negative"),
        (with_arg(3, (3, 4, 1)), ValueError, "strides"),
        (with_arg(3, (2**62, 2**62)), OverflowError, "overflows"),
        (with_arg(3, (3, 2**70)), OverflowError, "does not fit"),
        (with_arg(4, (16, 3)), BufferError, "multiple of the item size"),
        (with_arg(4, (16, 4.0)), TypeError, "strides must hold ints"),
        (with_arg(4, (2**61, 4)), ValueError, "outside the source buffer"),
        (with_arg(4, (-16, 4)), ValueError, "outside the source buffer"),
        (with_arg(5, 1), ValueError, "outside the source buffer"),
        (with_arg(5, -4), ValueError, "offset"),
        (with_arg(5, 2**64), OverflowError, "offset"),
        (with_arg(6, 1), TypeError, "readonly must be a bool"),
        (with_arg(7, (4, 0)), ValueError, "device"),
        (with_arg(7, (1, 3)), ValueError, "device"),
        (with_arg(7, [1, 0]), TypeError, "device"),
        (with_arg(7, (2, -1)), ValueError, "device"),
    ],
)
def test_tampered_arguments_raise_clear_errors(args, error, match):
    with pytest.raises(error, match=match) as info:
        rebuild(*args)
    assert "DLPackArray" in str(info.value)


def test_wrong_buffer_sizes_handed_to_loads():
    x = DLPackArray(np.arange(100, dtype=np.float64))[::3]
    data, buffers = out_of_band(x)
    raw = bytes(buffers[0].raw())
    with pytest.raises(ValueError, match="cannot unpickle a DLPackArray"):
        pickle.loads(data, buffers=[raw[:-1]])
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(data)  # no buffers at all
    y = pickle.loads(data, buffers=[raw + b"\0" * 8])  # extra bytes are harmless
    assert_same_array(y, x)


def test_truncated_and_corrupted_pickles_raise():
    x = DLPackArray(np.arange(30, dtype=np.int16).reshape(5, 6))[::2, ::-1]
    for protocol in PROTOCOLS:
        data = pickle.dumps(x, protocol=protocol)
        for cut in range(len(data)):
            with pytest.raises(Exception):  # noqa: B017 -- pickle's own error, whichever it is
                pickle.loads(data[:cut])
        # Flip bytes anywhere: an error, or a valid array within its own memory.
        for i in range(len(data)):
            bad = bytearray(data)
            bad[i] ^= 0x55
            try:
                y = pickle.loads(bytes(bad))
            except Exception:  # noqa: BLE001 -- refused: fine
                continue
            if isinstance(y, DLPackArray):
                element_bytes(y)  # readable: within its memory


@given(
    shape=st.lists(st.integers(-2, 6), max_size=4).map(tuple),
    strides=st.lists(st.integers(-40, 40), max_size=4).map(tuple),
    offset=st.integers(-8, 120),
    length=st.integers(0, 120),
    dtype=st.sampled_from(["uint8", "int16", "float32", "complex128", "bfloat16"]),
    readonly=st.booleans(),
)
def test_rebuild_never_gives_an_out_of_bounds_view(shape, strides, offset, length, dtype,
                                                   readonly):  # fmt: skip
    buffer = bytearray(range(256))[:length]
    try:
        y = rebuild(FORMAT_VERSION, buffer, dtype, shape, strides, offset, readonly, (1, 0))
    except (ValueError, TypeError, OverflowError, BufferError) as e:
        assert "cannot unpickle a DLPackArray" in str(e)
        return
    base = np.frombuffer(buffer, np.uint8).ctypes.data if length else None
    itemsize = y.itemsize
    assert y.shape == shape and y.readonly == readonly
    if y.size:
        lo, hi = extent(shape, [s * itemsize for s in y.strides], itemsize)
        first = y.data_ptr - base
        assert first == offset
        assert 0 <= first + lo and first + hi <= length
        assert element_bytes(y) is not None


def test_format_is_stable():
    # The pickle names dlpackarray._pickle.rebuild and format version 1: pickles
    # written today must stay readable, so changing either is a new version.
    fn, args = DLPackArray(np.arange(3, dtype=np.uint8)).__reduce_ex__(5)
    assert (fn.__module__, fn.__name__) == ("dlpackarray._pickle", "rebuild")
    assert args[0] == FORMAT_VERSION == 1
    assert args[2:] == ("uint8", (3,), (1,), 0, False, (1, 0))
    old = (  # pickle.dumps(DLPackArray(bytes([1, 2, 3])), protocol=4) of format version 1
        b"\x80\x04\x95I\x00\x00\x00\x00\x00\x00\x00\x8c\x13dlpackarray._pickle\x94\x8c\x07"
        b"rebuild\x94\x93\x94(K\x01C\x03\x01\x02\x03\x94\x8c\x05uint8\x94K\x03\x85\x94K\x01"
        b"\x85\x94K\x00\x88K\x01K\x00\x86\x94t\x94R\x94."
    )
    y = pickle.loads(old)
    assert y.tolist() == [1, 2, 3] and y.readonly


# -- weakref -------------------------------------------------------------------------------


def test_weakref_and_weak_value_dictionary():
    x = DLPackArray(np.arange(4))
    r = weakref.ref(x)
    assert r() is x
    cache = weakref.WeakValueDictionary()
    cache["x"] = x
    assert cache["x"] is x
    del x
    gc.collect()
    assert r() is None and "x" not in cache


def test_recycled_instances_drop_their_weak_references():
    # DLPackArray keeps a freelist: a recycled instance must start with no
    # weak references, and a dead one's references must be cleared.
    refs = []
    for _ in range(64):
        a = DLPackArray(b"abcd")
        refs.append(weakref.ref(a))
        del a
    assert all(r() is None for r in refs)
    live = [DLPackArray(b"abcd") for _ in range(64)]
    assert all(r() is None for r in refs)
    assert all(weakref.ref(a)() is a for a in live)


def test_pickling_imports_no_dask():
    code = (
        "import copy, pickle, sys, weakref, dlpackarray, numpy as np\n"
        "x = dlpackarray.DLPackArray(np.arange(3))\n"
        "pickle.loads(pickle.dumps(x, protocol=5)); copy.deepcopy(x); weakref.ref(x)\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]\n"
    )
    assert_clean_exit(run_python(code))
