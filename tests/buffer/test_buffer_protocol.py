"""PEP 3118: importing every kind of buffer exporter and exporting DLPackArray."""

from __future__ import annotations

import array
import ctypes
import mmap
import sys
import warnings

import buffers
import dlpack_ctypes as dc
import numpy as np
import pytest
from buffers import (
    PyBUF_FORMAT,
    PyBUF_ND,
    PyBUF_SIMPLE,
    PyBUF_STRIDES,
    PyBUF_WRITABLE,
    get_buffer,
    used_strides,
)
from conftest import require_ml_dtypes, require_torch
from hypothesis import given
from hypothesis import strategies as st

from dlpackarray import DLPackArray


def address(obj) -> int:
    return np.asarray(obj).__array_interface__["data"][0]


# --- import ------------------------------------------------------------------


def test_import_bytes_is_readonly_uint8():
    data = b"\x01\x02\x03\x04"
    x = DLPackArray(data)
    assert (x.shape, x.strides, x.dtype.name, x.readonly) == ((4,), (1,), "uint8", True)
    assert np.from_dlpack(x).tobytes() == data
    assert not np.from_dlpack(x).flags.writeable


def test_import_bytearray_is_writable_and_shared():
    data = bytearray(b"abcdef")
    x = DLPackArray(data)
    assert not x.readonly
    np.asarray(x)[0] = ord("z")  # the array interface: NumPy before 2.2 imports DLPack read-only
    assert data[0] == ord("z")


def test_import_memoryview_cast_and_strided():
    raw = bytearray(range(48))
    mv = memoryview(raw).cast("i")
    x = DLPackArray(mv)
    assert (x.shape, x.dtype.name) == ((12,), "int32")
    stepped = DLPackArray(mv[1::3])
    assert (stepped.shape, stepped.strides) == ((4,), (3,))
    np.testing.assert_array_equal(np.from_dlpack(stepped), np.frombuffer(raw, np.int32)[1::3])
    reverse = DLPackArray(mv[::-2])
    assert reverse.strides == (-2,)
    assert reverse.data_ptr + reverse.byte_offset == address(raw) + 11 * 4
    np.testing.assert_array_equal(np.from_dlpack(reverse), np.frombuffer(raw, np.int32)[::-2])


def test_import_memoryview_multidim_cast():
    raw = bytearray(range(24))
    x = DLPackArray(memoryview(raw).cast("H", (3, 4)))
    assert (x.shape, x.strides, x.dtype.name) == ((3, 4), (4, 1), "uint16")
    np.testing.assert_array_equal(np.from_dlpack(x), np.frombuffer(raw, np.uint16).reshape(3, 4))


ARRAY_TYPECODES = {
    "b": "int8",
    "B": "uint8",
    "h": "int16",
    "H": "uint16",
    "i": "int32",
    "I": "uint32",
    "l": f"int{8 * ctypes.sizeof(ctypes.c_long)}",
    "L": f"uint{8 * ctypes.sizeof(ctypes.c_long)}",
    "q": "int64",
    "Q": "uint64",
    "f": "float32",
    "d": "float64",
    # CPython 3.15's half-precision and complex typecodes (the buffer formats 'e', 'Zf', 'Zd').
    "e": "float16",
    "Zf": "complex64",
    "Zd": "complex128",
}


@pytest.mark.parametrize("code", sorted(set(array.typecodes)))
def test_import_array_array_every_typecode(code):
    if code in ("u", "w"):
        # wchar_t arrays export format 'u'/'w': text, not numbers.  Python 3.13
        # deprecates 'u' for 'w' but still offers it, so it is still checked.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            text = array.array(code, "ab")
        with pytest.raises(BufferError, match="not a single native scalar type"):
            DLPackArray(text)
        return
    a = array.array(code, [1, 2, 3])
    x = DLPackArray(a)
    assert x.dtype.name == ARRAY_TYPECODES[code]
    assert x.itemsize == a.itemsize and x.shape == (3,)
    assert x.data_ptr + x.byte_offset == a.buffer_info()[0]
    np.testing.assert_array_equal(np.from_dlpack(x), [1, 2, 3])
    # array.array cannot be resized while exported.
    with pytest.raises(BufferError):
        a.append(4)


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(np.arange(16, dtype=np.int32).tobytes())
    return path


def test_import_mmap_readonly(data_file):
    with open(data_file, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    x = DLPackArray(mm)
    assert x.readonly and x.shape == (64,)
    assert np.from_dlpack(x).view(np.int32)[5] == 5
    with pytest.raises(BufferError):
        mm.close()  # exported memory cannot be unmapped under the array
    del x
    mm.close()


def test_import_mmap_writable_writes_reach_the_file(data_file):
    with open(data_file, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_WRITE)
    x = DLPackArray(mm)
    assert not x.readonly
    np.asarray(x).view(np.int32)[3] = (
        1234  # the array interface: NumPy before 2.2 imports DLPack read-only
    )
    del x
    mm.flush()
    mm.close()
    assert np.fromfile(data_file, np.int32)[3] == 1234


def test_import_ctypes_arrays():
    a = (ctypes.c_double * 3 * 2)()
    a[1][2] = 7.5
    x = DLPackArray(a)
    assert (x.shape, x.dtype.name) == ((2, 3), "float64")
    assert x.data_ptr == ctypes.addressof(a)
    assert np.from_dlpack(x)[1, 2] == 7.5
    for ct, name in [
        (ctypes.c_int8, "int8"),
        (ctypes.c_uint16, "uint16"),
        (ctypes.c_int64, "int64"),
        (ctypes.c_long, ARRAY_TYPECODES["l"]),
        (ctypes.c_float, "float32"),
        (ctypes.c_bool, "bool"),
    ]:
        assert DLPackArray((ct * 2)()).dtype.name == name


def test_import_numpy_through_buffer_route_matches_dlpack_route():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, ::-3]
    via_buffer = DLPackArray(memoryview(a))
    via_dlpack = DLPackArray(a)
    assert via_buffer.shape == via_dlpack.shape
    assert via_buffer.strides == via_dlpack.strides
    assert (
        via_buffer.data_ptr + via_buffer.byte_offset
        == via_dlpack.data_ptr + via_dlpack.byte_offset
        == address(a)
    )


# --- export ------------------------------------------------------------------
PEP3118 = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
    "complex64": "Zf",
    "complex128": "Zd",
}


@pytest.mark.parametrize("name", sorted(PEP3118))
def test_export_format_every_dtype(name):
    a = np.zeros((2, 3), dtype=name)
    mv = memoryview(DLPackArray(a))
    assert mv.format == PEP3118[name]
    assert mv.itemsize == a.itemsize and mv.shape == (2, 3) and mv.strides == a.strides
    assert np.asarray(mv).dtype == a.dtype
    assert address(np.asarray(mv)) == address(a)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_export_ml_dtypes_has_no_format(name):
    require_ml_dtypes()
    raw = np.zeros(4, np.uint8 if name.startswith("float8") else np.uint16)
    x = DLPackArray(dc.Producer(raw, dtype=dc.numpy_dl_dtype(name)).capsule())
    with pytest.raises(BufferError, match=name):
        memoryview(x)
    # A plain byte view (PyBUF_SIMPLE) of contiguous data needs no format.
    info = get_buffer(x, PyBUF_SIMPLE)
    assert info["format"] is None and info["len"] == raw.nbytes and info["itemsize"] == 1
    with pytest.raises(BufferError, match=name):
        get_buffer(x, PyBUF_SIMPLE | PyBUF_FORMAT | PyBUF_ND)


def test_export_writable_request_on_readonly():
    x = DLPackArray(b"abcd")
    with pytest.raises(BufferError, match="read-only"):
        get_buffer(x, PyBUF_WRITABLE)
    assert get_buffer(x, PyBUF_SIMPLE)["readonly"]
    y = DLPackArray(bytearray(b"abcd"))
    assert not get_buffer(y, PyBUF_WRITABLE)["readonly"]


@pytest.mark.parametrize("layout", ["c", "f", "strided", "scalar_like"])
@pytest.mark.parametrize(
    "flag_name",
    [
        "SIMPLE",
        "ND",
        "STRIDES",
        "C_CONTIGUOUS",
        "F_CONTIGUOUS",
        "ANY_CONTIGUOUS",
        "RECORDS_RO",
        "FULL_RO",
    ],
)
def test_export_contiguity_flags(layout, flag_name):
    base = np.arange(24, dtype=np.int16).reshape(4, 6)
    a = {
        "c": base,
        "f": np.asfortranarray(base),
        "strided": base[:, ::2],
        "scalar_like": base[:1, :1],
    }[layout]
    x = DLPackArray(a)
    flags = getattr(buffers, f"PyBUF_{flag_name}")
    c_ok = a.flags.c_contiguous
    f_ok = a.flags.f_contiguous
    allowed = {
        "SIMPLE": c_ok,
        "ND": c_ok,
        "STRIDES": True,
        "C_CONTIGUOUS": c_ok,
        "F_CONTIGUOUS": f_ok,
        "ANY_CONTIGUOUS": c_ok or f_ok,
        "RECORDS_RO": True,
        "FULL_RO": True,
    }[flag_name]
    if not allowed:
        with pytest.raises(BufferError, match="contiguous"):
            get_buffer(x, flags)
        return
    info = get_buffer(x, flags)
    assert info["buf"] == address(a) and info["obj_is_exporter"]
    assert not info["suboffsets"]
    assert info["len"] == a.nbytes
    if flags & PyBUF_ND != PyBUF_ND:
        assert (info["ndim"], info["itemsize"], info["shape"]) == (1, 1, None)
    else:
        assert info["shape"] == a.shape and info["itemsize"] == 2
    if flags & PyBUF_STRIDES == PyBUF_STRIDES:
        assert used_strides(a.shape, info["strides"]) == used_strides(a.shape, a.strides)
    else:
        assert info["strides"] is None
    assert info["format"] == (
        "h"
        if flags & PyBUF_FORMAT and flags & PyBUF_ND == PyBUF_ND
        else "B"
        if flags & PyBUF_FORMAT
        else None
    )


def test_export_bfloat16_raises_naming_dtype():
    torch = require_torch()

    x = DLPackArray(torch.zeros(3, dtype=torch.bfloat16))
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(x)


@pytest.mark.parametrize("source", ["numpy", "memoryview"])
def test_non_native_byte_order_raises_naming_order(source):
    big = np.arange(4, dtype=">i4")
    obj = big if source == "numpy" else memoryview(big)
    order = "big-endian" if sys.byteorder == "little" else "little-endian"
    with pytest.raises(BufferError) as info:
        DLPackArray(obj)
    msg = str(info.value).lower()
    assert "byte order" in msg or "endian" in msg or "byteorder" in msg
    if source == "memoryview":  # our own message (NumPy refuses first for ndarrays)
        assert order in str(info.value)
    # A single-byte type has no byte order, whatever the prefix says.
    assert DLPackArray(memoryview(np.arange(3, dtype=">u1"))).dtype.name == "uint8"


def test_bytearray_cannot_resize_while_wrapped():
    data = bytearray(b"0123")
    x = DLPackArray(data)
    with pytest.raises(BufferError):
        data.extend(b"45")
    cap = x.__dlpack__(max_version=(1, 3))
    del x
    with pytest.raises(BufferError):  # the capsule still holds the buffer
        data.extend(b"45")
    del cap
    data.extend(b"45")
    assert data == bytearray(b"012345")


@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.data())
def test_memoryview_export_matches_numpy(shape, data):
    """Any strided numpy view exported through memoryview(DLPackArray) is the same memory."""
    a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    idx = tuple(slice(None, None, data.draw(st.sampled_from([1, 2, -1, -2]))) for _ in shape)
    v = a[idx]
    mv = memoryview(DLPackArray(v))
    assert mv.shape == v.shape
    assert used_strides(v.shape, mv.strides) == used_strides(v.shape, v.strides)
    np.testing.assert_array_equal(np.asarray(mv), v)
    assert address(np.asarray(mv)) == address(v)
    assert mv.c_contiguous == v.flags.c_contiguous


@given(st.lists(st.integers(1, 3), min_size=1, max_size=12), st.data())
def test_repeated_exports_keep_the_strides_of_the_first(shape, data):
    """The byte strides are made on the first export (inside the object up to 8
    dimensions, in a vector beyond) and reused: every export of a fresh or
    already-exported array, before and after a refused one, has the view's strides."""
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    idx = tuple(slice(None, None, data.draw(st.sampled_from([1, 2, -1]))) for _ in shape)
    v = a[idx]
    readonly = data.draw(st.booleans())
    if readonly:
        v = v.view()
        v.flags.writeable = False
    d = DLPackArray(v)
    if readonly and data.draw(st.booleans()):
        with pytest.raises(BufferError, match="read-only"):
            get_buffer(d, PyBUF_WRITABLE)
    for _ in range(2):
        mv = memoryview(d)
        assert mv.shape == v.shape
        assert used_strides(v.shape, mv.strides) == used_strides(v.shape, v.strides)
        np.testing.assert_array_equal(np.asarray(mv), v)
        assert address(np.asarray(mv)) == address(v)
        mv.release()
