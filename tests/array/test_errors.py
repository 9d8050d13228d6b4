"""Every error path of the C++ core and the Cython modules raises the documented
exception type with a message naming the problem.

Paths covered in other files: capsule version/name/reuse, stream/max_version/
copy/dl_device arguments, cross-device export, read-only legacy export
(test_dlpack_protocol.py); PyBUF writable/contiguity/format refusals and byte
order (test_buffer_protocol.py).
"""

from __future__ import annotations

import ctypes
import sys

import dlpack_ctypes as dc
import numpy as np
import pytest

from dlpackarray import MAX_NDIM, DLPackArray, DType, from_dlpack


def consume(**kwargs):
    """DLPackArray from a hand-made capsule; returns (exception info, producer)."""
    source = kwargs.pop("source", None)
    kwargs.setdefault("dtype", (dc.KDL_FLOAT, 32, 1))
    kwargs.setdefault("data", 0x1000)
    p = dc.Producer(source, **kwargs)
    return DLPackArray(p.capsule()), p


def assert_rejected(exc, match, **kwargs):
    """The capsule is consumed (renamed), the error raised, and the deleter run once."""
    kwargs.setdefault("dtype", (dc.KDL_FLOAT, 32, 1))
    kwargs.setdefault("data", 0x1000)
    p = dc.Producer(kwargs.pop("source", None), **kwargs)
    cap = p.capsule()
    with pytest.raises(exc, match=match):
        DLPackArray(cap)
    assert p.deleter_calls == 1
    assert dc.capsule_name(cap).startswith("used_")


# --- dtypes (dtype.cpp) ----------------------------------------------------------
def test_lanes_not_one():
    assert_rejected(
        BufferError, r"lanes != 1", shape=(2,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 4)
    )


@pytest.mark.parametrize(
    "dtype",
    [(dc.KDL_INT, 4, 1), (dc.KDL_UINT, 1, 1), (dc.KDL_FLOAT4_E2M1FN, 4, 1), (15, 6, 1), (16, 8, 1)],
)
def test_sub_byte_dtypes(dtype):
    assert_rejected(BufferError, "sub-byte", shape=(2,), strides=(1,), dtype=dtype)


@pytest.mark.parametrize(
    "dtype",
    [
        (dc.KDL_OPAQUE, 64, 1),
        (dc.KDL_FLOAT, 8, 1),
        (dc.KDL_INT, 128, 1),
        (dc.KDL_BOOL, 16, 1),
        (99, 8, 1),
    ],
)
def test_unsupported_dtypes(dtype):
    assert_rejected(
        BufferError, r"unsupported dtype DLDataType\(code=", shape=(2,), strides=(1,), dtype=dtype
    )


def test_unknown_dtype_name():
    with pytest.raises(TypeError, match="unknown dtype name 'float7'"):
        DType("float7")


def test_uninterpretable_dtype_object():
    with pytest.raises(TypeError, match="cannot interpret 3.5 as a dtype"):
        DType(3.5)


class FakeNumpyDtype:
    """Duck-types a NumPy dtype: parse_dtype reads ``kind`` and ``str``."""

    def __init__(self, kind, typestr):
        self.kind = kind
        self.str = typestr


@pytest.mark.parametrize(
    "typestr, exc, match",
    [
        ("<q4", TypeError, "invalid array-interface typestr"),
        ("<i", TypeError, "invalid array-interface typestr"),
        # Well-formed but unsupported (any width DLPack lacks, however wide):
        # BufferError, like every unsupported dtype.
        ("<i99", BufferError, "792-bit signed integer type, a width dlpackarray does not"),
        (
            "<i3",
            BufferError,
            "24-bit signed integer type, a width dlpackarray does not exchange; "
            "supported dtypes are",
        ),
        ("|V8", BufferError, r"void/structured data \(kind 'V'\)"),
        ("|O8", BufferError, r"Python object data \(kind 'O'\)"),
        (">f4" if sys.byteorder == "little" else "<f4", BufferError, "byte order"),
    ],
)
def test_typestr_errors(typestr, exc, match):
    with pytest.raises(exc, match=match):
        DType(FakeNumpyDtype("i", typestr))


def test_non_native_dtype_name_is_buffer_error():
    with pytest.raises(BufferError, match="byte order"):
        DType(">f8" if sys.byteorder == "little" else "<f8")
    assert DType("<f8" if sys.byteorder == "little" else ">f8") == "float64"


@pytest.mark.parametrize(
    "make",
    [
        lambda: memoryview(
            (
                type(
                    "S",
                    (ctypes.Structure,),
                    {"_fields_": [("a", ctypes.c_int32), ("b", ctypes.c_int8)]},
                )
                * 2
            )()
        ),
        lambda: memoryview(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")])),
        lambda: memoryview(np.zeros(2, dtype=np.longdouble)),
        lambda: memoryview((ctypes.c_void_p * 2)()),
        lambda: memoryview(np.zeros((2, 3), np.int8)).cast("B").cast("c"),
    ],
    ids=["ctypes_struct", "numpy_structured", "long_double", "pointer", "char_ok"],
)
def test_unrepresentable_buffer_formats(make):
    mv = make()
    if mv.format == "c":  # raw chars are bytes: accepted
        assert DLPackArray(mv).dtype.name == "uint8"
        return
    if mv.format == "g" and np.dtype(np.longdouble).itemsize == 8:
        pytest.skip("long double is plain double on this platform")
    with pytest.raises(BufferError, match=f"buffer format '{mv.format[:1]}"):
        DLPackArray(mv)


def test_wchar_array_format():
    import array

    # 'w' (Python 3.13) replaces the deprecated 'u'; both are wchar_t text.
    code = "w" if "w" in array.typecodes else "u"
    with pytest.raises(BufferError, match="not a single native scalar type"):
        DLPackArray(array.array(code, "xy"))


# --- DLTensor checks (managed_tensor.cpp, tensor_view.cpp) ------------------------------
@pytest.mark.parametrize("ndim", [-1, MAX_NDIM + 1, 1000])
def test_ndim_out_of_range(ndim):
    assert_rejected(
        BufferError,
        f"ndim {ndim}, outside the supported range 0..64",
        shape=(1,),
        strides=(1,),
        ndim=ndim,
    )


def test_ndim_64_is_fine():
    x, _ = consume(shape=(1,) * 64, strides=(1,) * 64)
    assert x.ndim == 64


def test_null_shape_pointer():
    assert_rejected(BufferError, "NULL shape pointer", shape=(3,), strides=(1,), null_shape=True)


def test_negative_shape():
    assert_rejected(ValueError, r"shape\[1\] = -2 is negative", shape=(3, -2), strides=(1, 1))


def test_element_count_overflow():
    assert_rejected(
        OverflowError, "number of elements overflows int64", shape=(2**62, 8), strides=(8, 1)
    )


def test_stride_in_bytes_overflow():
    assert_rejected(
        OverflowError,
        "stride in bytes overflows int64",
        shape=(2,),
        strides=(2**62,),
        dtype=(dc.KDL_FLOAT, 64, 1),
    )


def test_extent_overflow():
    assert_rejected(
        OverflowError,
        "array extent overflows int64",
        shape=(2, 2),
        strides=(2**62, 2**62),
        dtype=(dc.KDL_UINT, 8, 1),
    )
    assert_rejected(
        OverflowError,
        "array extent overflows int64",
        shape=(4,),
        strides=(2**62,),
        dtype=(dc.KDL_UINT, 8, 1),
    )


def test_byte_offset_overflow():
    assert_rejected(
        OverflowError,
        "byte_offset 9223372036854775808 overflows int64",
        shape=(1,),
        strides=(1,),
        byte_offset=2**63,
    )


def test_extent_wraps_address_space():
    assert_rejected(
        OverflowError, "wraps around the address space", shape=(16,), strides=(1,), data=2**64 - 64
    )
    assert_rejected(
        OverflowError, "wraps around the address space", shape=(16,), strides=(-1,), data=0x8
    )


def test_null_data_with_elements():
    assert_rejected(
        ValueError,
        r"data pointer is NULL but the array has 6 element\(s\)",
        shape=(2, 3),
        strides=(3, 1),
        data=0,
    )


def test_strides_not_multiple_of_itemsize():
    a = np.zeros(4, dtype=[("a", "<i4"), ("b", "u1")])  # packed: stride 5
    with pytest.raises(BufferError, match="stride of 5 bytes in dimension 0, not a multiple"):
        DLPackArray(memoryview(a["a"]))


def test_suboffsets_refused():
    testbuffer = pytest.importorskip(
        "_testbuffer", reason="CPython's _testbuffer makes PIL-style (suboffset) buffers"
    )
    pil = testbuffer.ndarray(list(range(12)), shape=[3, 4], format="i", flags=testbuffer.ND_PIL)
    # We never request PyBUF_INDIRECT, so a conforming exporter must refuse.
    with pytest.raises(BufferError, match="suboffsets"):
        DLPackArray(pil)


# --- copies (strided_copy.cpp, _common.pyx) -----------------------------------------
def test_copy_allocation_failure_is_memory_error():
    huge = np.broadcast_to(np.zeros(1), (2**47,))  # 1 PiB if materialised
    x = DLPackArray(huge)
    with pytest.raises(MemoryError, match="1125899906842624 bytes"):
        x.copy()
    with pytest.raises(MemoryError):
        x.__dlpack__(max_version=(1, 3), copy=True)


@pytest.mark.no_cuda_driver  # made-up device pointers and streams
def test_copy_of_device_memory_refused():
    x, _ = consume(shape=(4,), strides=(1,), device=(7, 0))  # Vulkan
    with pytest.raises(BufferError, match=r"cannot copy: the data is on device VULKAN:0"):
        x.copy()
    # CUDA memory is copied by the driver (tests/cuda/test_cuda_fake.py); without
    # one the error says so.
    x, _ = consume(shape=(4,), strides=(1,), device=(dc.KDL_CUDA, 0))
    with pytest.raises(BufferError, match="CUDA driver"):
        x.copy()


# --- DLPackArray construction (_array.pyx) --------------------------------------------
@pytest.mark.parametrize("copy", [1, 0, "true", []])
def test_bad_copy_argument(copy):
    with pytest.raises(TypeError, match="copy must be None, True or False"):
        DLPackArray(b"ab", copy=copy)
    with pytest.raises(TypeError, match="copy must be None, True or False"):
        from_dlpack(np.arange(2), copy=copy)


@pytest.mark.parametrize(
    "device, exc, match",
    [
        ("gpu", TypeError, "device must be None, 'cpu' or a"),
        ((1, 0, 0), TypeError, "device must be None, 'cpu' or a"),
        (("1", 0), TypeError, "device tuple must hold two ints"),
        ((0, 0), ValueError, "invalid device"),
        ((1, -1), ValueError, "invalid device"),
        ((2**31, 0), ValueError, "invalid device"),
        ((2, 0), BufferError, "between host memory and from CUDA devices to the host only"),
    ],
)
def test_bad_device_argument(device, exc, match):
    with pytest.raises(exc, match=match):
        DLPackArray(b"abc", device=device)  # (NumPy's producer would refuse first)


def test_device_object_accepted():
    x = DLPackArray(np.arange(3))
    assert DLPackArray(x, device=x).device == x.device
    assert DLPackArray(x, device="cpu").device == x.device


@pytest.mark.no_cuda_driver  # made-up device pointers and streams
def test_device_data_to_cpu():
    p = dc.Producer(
        None,
        shape=(4,),
        strides=(1,),
        dtype=(dc.KDL_FLOAT, 32, 1),
        data=0x1000,
        device=(dc.KDL_CUDA, 0),
    )
    cap = p.capsule()
    with pytest.raises(ValueError, match="without a copy, and copy=False was given"):
        DLPackArray(cap, device="cpu", copy=False)
    assert p.deleter_calls == 1
    q = dc.Producer(
        None,
        shape=(4,),
        strides=(1,),
        dtype=(dc.KDL_FLOAT, 32, 1),
        data=0x1000,
        device=(dc.KDL_CUDA, 0),
    )
    # A device -> host copy through the CUDA driver (tests/cuda/test_cuda_fake.py);
    # this machine has none, which the error says.
    with pytest.raises(BufferError, match="CUDA driver"):
        DLPackArray(q.capsule(), device="cpu")
    assert q.deleter_calls == 1


@pytest.mark.parametrize("obj", [object(), 3, "text", [1, 2], None])
def test_unsupported_objects(obj):
    with pytest.raises(TypeError, match="implements none of __dlpack__, __array_struct__"):
        DLPackArray(obj)


def test_len_of_zero_dim():
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d DLPackArray"):
        len(DLPackArray(np.array(1.0)))
    assert len(DLPackArray(np.zeros((5, 2)))) == 5


def test_producer_errors_propagate():
    class Failing:
        def __dlpack__(self, **kwargs):
            raise BufferError("producer says no")

    with pytest.raises(BufferError, match="producer says no"):
        from_dlpack(Failing())

    class NotACapsule:
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(TypeError, match="expected a DLPack PyCapsule, got a 'int' object"):
        DLPackArray(NotACapsule())


# --- uninitialised and re-initialised arrays ---------------------------------------------
def test_uninitialised_array_refuses_to_answer():
    # Every member is checked in tests/array/test_init_once.py; none of them
    # may answer as an empty placeholder array.
    x = DLPackArray.__new__(DLPackArray)
    held = sys.getrefcount(x)  # relative: 3.14 no longer counts a local's own reference
    for use in (
        lambda: x.shape,
        lambda: len(x),
        lambda: memoryview(x),
        lambda: x.copy(),
        lambda: np.from_dlpack(x),
        lambda: x.__dlpack__(max_version=(1, 3)),
    ):
        with pytest.raises(ValueError, match="not initialised"):
            use()
    assert repr(x) == "<DLPackArray (uninitialised)>"
    assert sys.getrefcount(x) == held  # no refusal kept a reference to the array
    # __init__ on a fresh instance is allowed exactly once.
    x.__init__(b"abc")
    assert x.shape == (3,)
    with pytest.raises(TypeError, match="cannot be initialised twice"):
        x.__init__(b"zz")
    assert x.shape == (3,)


def test_init_twice_raises():
    src = np.arange(3)
    x = DLPackArray(src)
    before = sys.getrefcount(src)
    with pytest.raises(TypeError, match="immutable"):
        x.__init__(np.arange(5))
    assert x.shape == (3,) and sys.getrefcount(src) == before
