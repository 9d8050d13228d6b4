"""NumPy array interface family: import (precedence, __array_interface__,
__array_struct__, __array__, from_buffer) and export (__array_interface__,
__array_struct__, __array__)."""

import gc
import subprocess
import sys

import numpy as np
import pytest
from array_struct_ctypes import (
    ALIGNED,
    ARR_HAS_DESCR,
    C_CONTIGUOUS,
    F_CONTIGUOUS,
    NOTSWAPPED,
    WRITEABLE,
    StructExporter,
    read_struct,
)
from dtype_names import NUMPY_DTYPES

from dlpackarray import DLPackArray

ml_dtypes = pytest.importorskip("ml_dtypes")


class Iface:
    def __init__(self, iface, keep=None):
        self.__array_interface__ = iface
        self.keep = keep


class Struct:
    def __init__(self, capsule):
        self.__array_struct__ = capsule


def sample(dtype, shape=(3, 4)):
    return (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)


# -- export: __array_interface__ ------------------------------------------------


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_export_interface_equals_numpys_own(dtype):
    src = sample(dtype)
    assert DLPackArray(src).__array_interface__ == src.__array_interface__
    view = src[::2, ::-1]
    assert DLPackArray(view).__array_interface__ == view.__array_interface__
    assert DLPackArray(view).__array_interface__["strides"] is not None


def test_export_interface_data_and_readonly():
    d = DLPackArray(b"0123456789abcdef").view("uint32")[1:]
    iface = d.__array_interface__
    assert iface["data"] == (d.data_ptr + d.byte_offset, True)
    assert iface["strides"] is None and iface["typestr"] == "<u4" and iface["version"] == 3
    out = np.asarray(Iface(iface, d))
    assert not out.flags.writeable
    assert out.tobytes() == b"456789abcdef"


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_export_interface_absent_for_dtypes_without_typestr(dtype):
    d = (
        DLPackArray(np.zeros(4, np.uint8)).view(dtype)
        if dtype != "bfloat16"
        else DLPackArray(np.zeros(4, np.uint16)).view(dtype)
    )
    assert not hasattr(d, "__array_interface__")
    assert not hasattr(d, "__array_struct__")
    with pytest.raises(AttributeError, match=dtype):
        _ = d.__array_interface__


# -- export: __array_struct__ ----------------------------------------------------

FLAG_BITS = C_CONTIGUOUS | F_CONTIGUOUS | ALIGNED | NOTSWAPPED | WRITEABLE


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,
        lambda a: a[::2, ::-1],
        lambda a: a.T,
        lambda a: a[1],
        lambda a: a[1, 2],
        lambda a: a[:, :0],
    ],
    ids=["c", "strided", "fortran", "row", "0-d", "empty"],
)
def test_export_struct_equals_numpys_own(dtype, make):
    src = make(sample(dtype))
    ours, theirs = read_struct(DLPackArray(src).__array_struct__), read_struct(src.__array_struct__)
    for key in ("two", "nd", "typekind", "itemsize", "shape"):
        assert ours[key] == theirs[key], key
    assert ours["two"] == 2
    if src.size:
        assert ours["data"] == theirs["data"]
        assert ours["flags"] & FLAG_BITS == theirs["flags"] & FLAG_BITS
        big = [i for i, n in enumerate(src.shape) if n > 1]
        assert [ours["strides"][i] for i in big] == [theirs["strides"][i] for i in big]
    assert not ours["flags"] & ARR_HAS_DESCR


def test_export_struct_readonly_and_unaligned_flags():
    raw = np.zeros(9, np.uint8)
    d = DLPackArray(raw[1:]).view("int32")  # 4-byte items at an odd address
    flags = read_struct(d.__array_struct__)["flags"]
    assert flags & WRITEABLE and not flags & ALIGNED
    ro = DLPackArray(bytes(8)).view("int32")
    assert not read_struct(ro.__array_struct__)["flags"] & WRITEABLE
    out = np.asarray(Struct(ro.__array_struct__))
    assert not out.flags.writeable


def test_export_struct_capsule_keeps_array_alive():
    src = bytearray(range(16))
    d = DLPackArray(src).view("uint16")
    before = sys.getrefcount(d)
    cap = d.__array_struct__
    assert sys.getrefcount(d) == before + 1
    assert read_struct(cap)["context"] == id(d)
    del d, src
    gc.collect()
    out = np.asarray(Struct(cap))
    np.testing.assert_array_equal(out, np.arange(16, dtype=np.uint8).view(np.uint16))
    del cap, out
    gc.collect()


def test_numpy_consumes_struct_zero_copy():
    src = sample("float32")
    out = np.asarray(Struct(DLPackArray(src).T.__array_struct__))
    out[1, 2] = 99
    assert src[2, 1] == 99


# -- export: __array__ -----------------------------------------------------------


def test_array_shares_memory_and_readonly():
    src = sample("int16")
    out = np.asarray(DLPackArray(src))
    assert np.shares_memory(out, src)
    assert out.base is not None
    assert not DLPackArray(b"ab").__array__().flags.writeable


def test_array_numpy2_semantics():
    src = sample("float32")
    d = DLPackArray(src)
    assert np.shares_memory(d.__array__(copy=None), src)
    assert np.shares_memory(d.__array__(copy=False), src)
    assert np.shares_memory(d.__array__(dtype=np.float32, copy=False), src)
    assert not np.shares_memory(d.__array__(copy=True), src)
    converted = d.__array__(dtype="float64")
    assert converted.dtype == np.float64 and not np.shares_memory(converted, src)
    with pytest.raises(ValueError, match="needs a copy"):
        d.__array__(dtype=np.float64, copy=False)
    with pytest.raises(TypeError, match="copy must be"):
        d.__array__(copy="yes")
    assert not np.shares_memory(np.array(d), src)  # np.array copies by default
    assert np.shares_memory(np.asarray(d), src)
    with pytest.raises(ValueError):
        np.asarray(d, dtype=np.int8, copy=False)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz"])
def test_array_uses_ml_dtypes(name):
    ref = np.arange(-4, 4, dtype=np.float32).astype(getattr(ml_dtypes, name))
    d = DLPackArray(ref.view(np.uint8 if ref.itemsize == 1 else np.uint16)).view(name)
    out = np.asarray(d)
    assert out.dtype == np.dtype(getattr(ml_dtypes, name))
    assert out.tobytes() == ref.tobytes()
    assert np.shares_memory(out.view(np.uint8), np.asarray(d.view("uint8")))


def test_numpy_is_imported_lazily():
    code = (
        "import sys, dlpackarray; d = dlpackarray.DLPackArray(b'abcd'); "
        "d.view('int16')[::-1].__array_interface__; d.__array_struct__; "
        "assert 'numpy' not in sys.modules, 'numpy imported'; "
        "d.__array__(); assert 'numpy' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- import precedence -------------------------------------------------------------

LEVELS = ["__dlpack__", "__array_struct__", "__array_interface__", "buffer", "__array__"]


def exporter_with(levels):
    """An object offering the protocols in `levels`, each describing distinct
    memory (value = level index + 1); with "buffer" it is a bytearray."""
    arrays = {name: np.full(3, LEVELS.index(name) + 1, dtype=np.uint8) for name in LEVELS}
    ns = {}
    if "__dlpack__" in levels:
        ns["__dlpack__"] = lambda self, **kw: arrays["__dlpack__"].__dlpack__(**kw)
        ns["__dlpack_device__"] = lambda self: arrays["__dlpack__"].__dlpack_device__()
    if "__array_struct__" in levels:
        ns["__array_struct__"] = property(lambda self: arrays["__array_struct__"].__array_struct__)
    if "__array_interface__" in levels:
        ns["__array_interface__"] = property(
            lambda self: arrays["__array_interface__"].__array_interface__
        )
    if "__array__" in levels:
        ns["__array__"] = lambda self, dtype=None, copy=None: arrays["__array__"]
    if "buffer" in levels:
        obj = type("Exporter", (bytearray,), ns)([4, 4, 4])
    else:
        obj = type("Exporter", (), ns)()
    obj.arrays = arrays  # keeps the memory alive
    return obj


@pytest.mark.parametrize("first", range(len(LEVELS)), ids=LEVELS)
def test_precedence(first):
    levels = LEVELS[first:]
    obj = exporter_with(levels)
    d = DLPackArray(obj)
    assert np.asarray(d).tolist() == [first + 1] * 3


def test_precedence_without_buffer():
    class Both:
        def __init__(self):
            self.a = np.ones(2)
            self.b = np.zeros(2)
            self.__array_interface__ = self.b.__array_interface__  # instance attribute

        def __array__(self, dtype=None, copy=None):
            return self.a

    assert np.asarray(DLPackArray(Both())).tolist() == [0.0, 0.0]


def test_buffer_only_fast_path_still_follows_precedence():
    # Exact bytes/bytearray/memoryview/array/mmap skip the probes; a subclass
    # with a richer protocol must not.
    data = np.arange(3, dtype=np.uint8)

    class WithInterface(bytearray):
        __array_interface__ = data.__array_interface__

    assert np.asarray(DLPackArray(WithInterface(b"\x09\x09\x09"))).tolist() == [0, 1, 2]
    assert np.asarray(DLPackArray(bytearray(b"\x09\x09\x09"))).tolist() == [9, 9, 9]


# -- import: __array_interface__ ---------------------------------------------------


def test_interface_pointer_data_writable_and_readonly():
    src = sample("float64")
    owner = Iface(src.__array_interface__, src)
    d = DLPackArray(owner)
    assert not d.readonly
    np.asarray(d)[0, 0] = 42
    assert src[0, 0] == 42
    iface = dict(src.__array_interface__, data=(src.ctypes.data, True))
    assert DLPackArray(Iface(iface, src)).readonly


def test_interface_keeps_exporter_alive():
    src = sample("int32")
    exporter = Iface(src.__array_interface__, src)
    before = sys.getrefcount(exporter)
    d = DLPackArray(exporter)
    assert sys.getrefcount(exporter) == before + 1
    del d


def test_interface_negative_strides_and_offset_ignored_with_pointer():
    src = sample("int64")[::-1, ::2]
    iface = dict(src.__array_interface__, offset=8)  # spec: ignored with a pointer
    np.testing.assert_array_equal(np.asarray(DLPackArray(Iface(iface, src))), src)


def test_interface_data_from_own_buffer_with_offset():
    class Raw(bytearray):
        @property
        def __array_interface__(self):
            return {"version": 3, "shape": (2, 3), "typestr": "|u1", "offset": 2, "strides": (4, 1)}

    raw = Raw(range(10))
    d = DLPackArray(raw)
    np.testing.assert_array_equal(np.asarray(d), [[2, 3, 4], [6, 7, 8]])
    np.asarray(d)[1, 2] = 200
    assert raw[8] == 200


@pytest.mark.parametrize(
    "buf, readonly",
    [
        (bytes(range(12)), True),
        (bytearray(range(12)), False),
        (memoryview(bytearray(range(12))), False),
    ],
)
def test_interface_data_as_buffer_object(buf, readonly):
    iface = {"version": 3, "shape": (2,), "typestr": "<u4", "data": buf, "offset": 4}
    d = DLPackArray(Iface(iface))
    assert d.readonly is readonly
    np.testing.assert_array_equal(np.asarray(d), np.frombuffer(bytes(range(12)), "<u4")[1:])


def test_interface_void_typestr_with_basic_descr():
    src = sample("float32")
    iface = dict(src.__array_interface__, typestr="|V4", descr=[("", "<f4")])
    d = DLPackArray(Iface(iface, src))
    assert d.dtype == "float32"
    np.testing.assert_array_equal(np.asarray(d), src)


# -- import: __array_struct__ ------------------------------------------------------


@pytest.mark.parametrize(
    "make", [lambda a: a, lambda a: a.T, lambda a: a[::-1, 1::2], lambda a: a[0, 0]]
)
def test_struct_from_numpy(make):
    src = make(sample("complex64", (4, 6)))
    d = DLPackArray(Struct(src.__array_struct__))
    np.testing.assert_array_equal(np.asarray(d), src)
    assert d.readonly is False


def test_struct_null_strides_readonly_and_lifetime():
    buf = (np.arange(6, dtype=np.int32)).copy()
    exp = StructExporter(
        nd=2,
        shape=(2, 3),
        strides=None,
        data=buf.ctypes.data,
        flags=NOTSWAPPED | ALIGNED | C_CONTIGUOUS,
    )
    exp.buf = buf
    d = DLPackArray(exp)
    assert d.readonly and d.shape == (2, 3) and d.strides == (3, 1)
    del exp
    gc.collect()
    np.testing.assert_array_equal(np.asarray(d), np.arange(6).reshape(2, 3))


def test_struct_with_descr():
    buf = np.arange(4, dtype=np.int32)
    exp = StructExporter(
        data=buf.ctypes.data, descr=[("", "<i4")], flags=NOTSWAPPED | WRITEABLE | ARR_HAS_DESCR
    )
    exp.buf = buf
    np.testing.assert_array_equal(np.asarray(DLPackArray(exp)), buf)


# -- import: __array__ --------------------------------------------------------------


def test_array_method_numpy2_signature_gets_copy():
    calls = []
    data = np.arange(4)

    class New:
        def __array__(self, dtype=None, copy=None):
            calls.append(copy)
            return data.copy() if copy else data

    assert np.shares_memory(np.asarray(DLPackArray(New())), data)
    d = DLPackArray(New(), copy=True)
    assert not np.shares_memory(np.asarray(d), data)
    DLPackArray(New(), copy=False)
    assert calls == [None, True, False]


def test_array_method_old_signature():
    data = np.arange(4)

    class Old:
        def __array__(self):
            return data

    assert np.shares_memory(np.asarray(DLPackArray(Old())), data)
    copied = DLPackArray(Old(), copy=True)
    assert not np.shares_memory(np.asarray(copied), data)
    np.testing.assert_array_equal(np.asarray(copied), data)


def test_array_method_returning_nonsense():
    class Bad:
        def __array__(self, dtype=None, copy=None):
            return [1, 2, 3]

    class Loop:
        def __array__(self, dtype=None, copy=None):
            return Loop()

    with pytest.raises(TypeError, match="returned a 'list'"):
        DLPackArray(Bad())
    with pytest.raises(TypeError, match="returned a 'Loop'"):
        DLPackArray(Loop())


def test_nothing_to_wrap():
    with pytest.raises(TypeError, match="none of __dlpack__, __array_struct__"):
        DLPackArray(object())


# -- from_buffer ---------------------------------------------------------------------


def test_from_buffer_like_frombuffer():
    raw = bytearray(np.arange(10, dtype=np.int32).tobytes())
    d = DLPackArray.from_buffer(raw, "int32", offset=8)
    np.testing.assert_array_equal(np.asarray(d), np.frombuffer(raw, np.int32, offset=8))
    np.asarray(d)[0] = -1
    assert np.frombuffer(raw, np.int32)[2] == -1


def test_from_buffer_nd_strided_and_readonly():
    raw = bytes(range(24))
    d = DLPackArray.from_buffer(raw, np.uint16, shape=(3, 2), strides=(8, -2), offset=2)
    ref = np.ndarray((3, 2), np.uint16, buffer=raw, offset=2, strides=(8, -2))
    np.testing.assert_array_equal(np.asarray(d), ref)
    assert d.readonly
    assert DLPackArray.from_buffer(raw, "uint8", shape=6, strides=[4]).shape == (6,)


@pytest.mark.parametrize(
    "kwargs, exc, text",
    [
        ({"shape": (4, 4)}, ValueError, "outside the source buffer of 24 bytes"),
        ({"shape": (2,), "strides": (24,)}, ValueError, "outside"),
        ({"shape": (2,), "offset": 24}, ValueError, "outside"),
        ({"shape": (2,), "strides": (-4,)}, ValueError, "outside"),
        ({"offset": 30}, ValueError, "beyond the end"),
        ({"offset": 2, "dtype": "int32"}, ValueError, "not a multiple of the item size"),
        ({"strides": (4,)}, ValueError, "explicit shape"),
        ({"shape": (2,), "strides": (3,)}, BufferError, "not a multiple of the item size"),
        ({"offset": -1}, ValueError, ">= 0"),
        ({"shape": (-1,)}, ValueError, "negative"),
        ({"shape": ("2",)}, TypeError, "must be an integer"),
        ({"dtype": "nope"}, TypeError, "unknown dtype"),
    ],
)
def test_from_buffer_errors(kwargs, exc, text):
    kwargs.setdefault("dtype", "uint16")
    with pytest.raises(exc, match=text):
        DLPackArray.from_buffer(bytes(24), **kwargs)


def test_from_buffer_needs_contiguous_buffer():
    with pytest.raises(BufferError, match="contiguous"):
        DLPackArray.from_buffer(np.zeros((4, 4))[:, ::2], "float64")
    with pytest.raises(TypeError):
        DLPackArray.from_buffer(object(), "float64")
