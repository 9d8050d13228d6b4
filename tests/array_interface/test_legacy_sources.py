"""Legacy sources -> DLPackArray -> numpy / torch / jax.

Every source is checked bit for bit against values read back independently
of dlpackarray, and writes through each zero-copy consumer must reach the
source.  Where a consumer copies (jax: alignment, read-only data; Pillow's own
interface hands out a copy) the test states it; docs/legacy_protocols.md
explains each case.
"""

import array
import ctypes
import mmap
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from conftest import require

from dlpackarray import DLPackArray

torch = require("torch", "these tests exchange data with it")
jax = require("jax", "these tests exchange data with it")
jnp = require("jax.numpy", "these tests exchange data with it")
Image = require("PIL.Image", "these tests exchange data with it")


@dataclass
class Case:
    source: object  # the object the user owns
    wrap: Callable  # source -> DLPackArray
    readback: Callable  # () -> ndarray of the source's current values, read independently
    writable: bool
    keep: list = field(default_factory=list)  # files, mmaps to close afterwards


# -- sources ------------------------------------------------------------------------


def file_with(tmp_path, values):
    path = tmp_path / "data.bin"
    path.write_bytes(values.tobytes())
    return path


def mmap_case(tmp_path, writable):
    values = np.arange(12, dtype=np.float32) * 1.5
    path = file_with(tmp_path, values)
    f = open(path, "r+b" if writable else "rb")  # noqa: SIM115 - closed by the fixture
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)

    def readback():
        mm.flush() if writable else None
        return np.frombuffer(path.read_bytes(), np.float32).reshape(3, 4)

    return Case(
        mm,
        lambda m: DLPackArray.from_buffer(m, "float32", shape=(3, 4)),
        readback,
        writable,
        [mm, f],
    )


def mmap_bytes_case(tmp_path):
    values = np.arange(10, dtype=np.uint8)
    path = file_with(tmp_path, values)
    f = open(path, "rb")  # noqa: SIM115 - closed by the fixture
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return Case(mm, DLPackArray, lambda: np.frombuffer(path.read_bytes(), np.uint8), False, [mm, f])


def np_memmap_case(tmp_path, writable):
    values = np.arange(20, dtype=np.int16).reshape(4, 5)
    path = file_with(tmp_path, values)
    mm = np.memmap(path, dtype=np.int16, mode="r+" if writable else "r", shape=(4, 5))

    def readback():
        if writable:
            mm.flush()
        return np.frombuffer(path.read_bytes(), np.int16).reshape(4, 5)

    return Case(mm, DLPackArray, readback, writable, [mm._mmap])


def ctypes_array_case(_):
    arr = (ctypes.c_double * 6)(*[i / 3 for i in range(6)])
    return Case(arr, DLPackArray, lambda: np.array(list(arr), dtype=np.float64), True)


def ctypes_2d_case(_):
    arr = ((ctypes.c_int32 * 3) * 2)((1, -2, 3), (4, 5, -6))
    return Case(arr, DLPackArray, lambda: np.array([list(r) for r in arr], dtype=np.int32), True)


class Point(ctypes.Structure):
    _fields_ = [("x", ctypes.c_double), ("y", ctypes.c_double)]


def ctypes_struct_array_case(_):
    pts = (Point * 3)(Point(1, 2), Point(3, 4), Point(5, 6.5))
    return Case(
        pts,
        lambda p: DLPackArray.from_buffer(p, "float64", shape=(3, 2)),
        lambda: np.array([[p.x, p.y] for p in pts]),
        True,
    )


class Record(ctypes.Structure):
    _fields_ = [("values", ctypes.c_float * 4), ("count", ctypes.c_int32)]


def ctypes_struct_case(_):
    rec = Record((ctypes.c_float * 4)(0.5, 1.5, -2.0, 8.0), 4)
    return Case(
        rec,
        lambda r: DLPackArray.from_buffer(r, "float32", shape=(4,)),
        lambda: np.array(list(rec.values), dtype=np.float32),
        True,
    )


def pillow_case(_):
    img = Image.new("RGB", (5, 3), (10, 20, 30))
    img.putpixel((4, 2), (250, 128, 1))
    # Pillow's __array_interface__ hands out a fresh bytes copy: read-only.
    return Case(
        img, DLPackArray, lambda: np.frombuffer(img.tobytes(), np.uint8).reshape(3, 5, 3), False
    )


def pillow_float_case(_):
    img = Image.new("F", (4, 2), 0.25)
    img.putpixel((1, 1), -3.5)
    return Case(
        img, DLPackArray, lambda: np.frombuffer(img.tobytes(), np.float32).reshape(2, 4), False
    )


SEED = np.array([1, 2, 3, 4, 5])


def seed_case(kind):
    def make(_):
        data = SEED.copy()

        class A1:
            def __array__(self):  # the seed's pre-NumPy-2 signature
                return data

        class A2:
            __array_interface__ = data.__array_interface__

        class A3:
            __array_struct__ = data.__array_struct__

        obj = {"A1": A1, "A2": A2, "A3": A3}[kind]() if kind != "memoryview" else memoryview(data)
        case = Case(obj, DLPackArray, lambda: data.copy(), True)
        case.keep.append(data)
        return case

    return make


def array_case(typecode):
    def make(_):
        a = array.array(
            typecode, [0, 1, 2, 3, 100] if typecode not in "fd" else [0.5, -1.25, 3.0, 1e10, -0.0]
        )
        np_type = np.dtype(typecode).newbyteorder("=")
        return Case(a, DLPackArray, lambda: np.frombuffer(a.tobytes(), np_type), True)

    return make


SOURCES = {
    "mmap-readonly": lambda p: mmap_case(p, False),
    "mmap-writable": lambda p: mmap_case(p, True),
    "mmap-bytes": mmap_bytes_case,
    "np.memmap-r": lambda p: np_memmap_case(p, False),
    "np.memmap-r+": lambda p: np_memmap_case(p, True),
    "ctypes-array": ctypes_array_case,
    "ctypes-2d": ctypes_2d_case,
    "ctypes-struct-array": ctypes_struct_array_case,
    "ctypes-struct": ctypes_struct_case,
    "pillow-rgb": pillow_case,
    "pillow-F": pillow_float_case,
    "seed-A1": seed_case("A1"),
    "seed-A2": seed_case("A2"),
    "seed-A3": seed_case("A3"),
    "seed-memoryview": seed_case("memoryview"),
    **{f"array-{tc}": array_case(tc) for tc in "bBhHiIlLqQfd"},
}


@pytest.fixture(params=list(SOURCES))
def case(request, tmp_path):
    c = SOURCES[request.param](tmp_path)
    yield c
    for obj in c.keep:
        if hasattr(obj, "close"):
            c.source = c.wrap = None
            import gc

            gc.collect()
            try:
                obj.close()
            except BufferError:
                pass  # still exported by a consumer the test kept; released at exit


@pytest.fixture
def jax_x64():
    # Without x64 jax narrows 64-bit data (a conversion, not bit-exact).
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


def first_element_value(a):
    return a.dtype.type(7 if a.dtype.kind in "iub" else 7.25) if a.dtype != bool else True


# -- consumers ---------------------------------------------------------------------------


def test_numpy(case):
    d = case.wrap(case.source)
    assert d.readonly is (not case.writable)
    out = np.asarray(d)
    expected = case.readback()
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert out.tobytes() == expected.tobytes()
    assert out.flags.writeable is case.writable
    if case.writable:
        out.reshape(-1)[0] = first_element_value(out)
        assert case.readback().reshape(-1)[0] == first_element_value(out)


def test_torch(case):
    d = case.wrap(case.source)
    t = torch.from_dlpack(d)
    expected = case.readback()
    assert tuple(t.shape) == expected.shape
    assert t.contiguous().view(torch.uint8).numpy().tobytes() == expected.tobytes()
    assert t.data_ptr() == d.data_ptr + d.byte_offset  # zero-copy
    if case.writable:
        value = first_element_value(expected)
        t.view(-1)[0] = value.item()
        assert case.readback().reshape(-1)[0] == value


def test_jax(case, jax_x64):
    d = case.wrap(case.source)
    expected = case.readback()
    if d.readonly:
        # jax asks for a legacy capsule, which cannot carry the read-only
        # flag: exporting read-only memory through it is refused, so jax
        # needs an explicit copy.
        with pytest.raises(BufferError, match="read-only"):
            jnp.from_dlpack(d)
        d = (
            DLPackArray(case.source, copy=True)
            if not isinstance(case.source, mmap.mmap)
            else case.wrap(case.source).copy()
        )
    j = jnp.from_dlpack(d)
    assert j.dtype == expected.dtype and j.shape == expected.shape
    assert np.asarray(j).tobytes() == expected.tobytes()


def test_seed_example_roundtrip():
    """The seed document's example, through DLPackArray instead of NumPy."""
    data = np.array([1, 2, 3, 4, 5])

    class A1:
        def __array__(self):
            return data

    class A2:
        __array_interface__ = data.__array_interface__

    class A3:
        __array_struct__ = data.__array_struct__

    t1 = torch.from_dlpack(DLPackArray(A1()))
    t1[0] = 101
    t2 = torch.from_dlpack(DLPackArray(A2()))
    t2[1] = 102
    t3 = torch.from_dlpack(DLPackArray(A3()))
    t3[2] = 103
    t4 = torch.from_dlpack(DLPackArray(memoryview(data)))
    t4[3] = 104
    assert data.tolist() == [101, 102, 103, 104, 5]


def test_ctypes_structure_needs_from_buffer():
    with pytest.raises(BufferError, match="T{"):
        DLPackArray((Point * 2)())


def test_array_wchar_typecode_through_from_buffer():
    a = array.array("u", "héllo")
    with pytest.raises(BufferError, match="format 'w'"):
        DLPackArray(a)
    d = DLPackArray.from_buffer(a, f"uint{8 * a.itemsize}")
    assert [chr(c) for c in np.asarray(d)] == list("héllo")


def test_mmap_cannot_close_while_wrapped(tmp_path):
    c = mmap_case(tmp_path, True)
    mm, f = c.keep
    d = c.wrap(mm)
    with pytest.raises(BufferError):
        mm.close()  # the Py_buffer held by d pins the mapping
    del d
    mm.close()
    f.close()


@pytest.mark.skipif(sys.byteorder != "little", reason="typestr literals are little-endian")
def test_pillow_interface_modes():
    for mode, typestr in [("L", "|u1"), ("I;16", "<u2"), ("I", "<i4"), ("F", "<f4"), ("1", "|b1")]:
        img = Image.new(mode, (3, 2))
        assert img.__array_interface__["typestr"] == typestr
        d = DLPackArray(img)
        assert d.shape == (2, 3) and d.readonly
        np.testing.assert_array_equal(np.asarray(d), np.asarray(img))
