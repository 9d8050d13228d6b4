"""DLPack spec rules a consumer and producer easily get wrong:

- the consumer's keyword fallback, in stages, with one producer error;
- byte_offset folded into data for every device whose data is an address;
- one exception type per error on every import route;
- device streams refused, never accepted and ignored.
"""

from __future__ import annotations

import ctypes
import warnings

import dlpack_ctypes as dc
import numpy as np
import pytest
from conftest import require

from dlpackarray import DLPackArray, from_dlpack

KDL_CUDA_HOST, KDL_OPENCL, KDL_VULKAN, KDL_METAL, KDL_ROCM, KDL_CUDA_MANAGED = 3, 4, 7, 8, 10, 13


def address(a) -> int:
    return a.__array_interface__["data"][0]


def readonly_array():
    a = np.arange(6, dtype=np.float64)
    a.flags.writeable = False
    return a


# --- item 5: keyword fallback ---------------------------------------------------------
class LegacyProducer:
    """DLPack 0.x era: a positional ``stream`` and no other keyword."""

    def __init__(self, a):
        self.a = a
        self.calls = []

    def __dlpack__(self, stream=None):
        self.calls.append({"stream": stream})
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class Version10Producer(LegacyProducer):
    """DLPack 1.0 era: ``max_version`` but neither ``dl_device`` nor ``copy``."""

    def __dlpack__(self, *, stream=None, max_version=None):
        self.calls.append({"max_version": max_version})
        return self.a.__dlpack__(stream=stream, max_version=max_version)


class FullProducer(LegacyProducer):
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"max_version": max_version, "dl_device": dl_device, "copy": copy})
        return self.a.__dlpack__(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )


def test_version_1_0_producer_gets_max_version_and_consumer_copies():
    src = readonly_array()
    p = Version10Producer(src)
    x = from_dlpack(p, copy=True)
    # The retry kept max_version, so read-only data came back (with its flag)
    # and the copy was made on this side.
    assert p.calls[-1] == {"max_version": (1, 3)}
    assert not x.readonly and x.data_ptr != address(src)
    np.testing.assert_array_equal(np.from_dlpack(x), src)


def test_version_1_0_producer_device_and_copy_false_applied_here():
    src = readonly_array()
    p = Version10Producer(src)
    x = DLPackArray(p, device="cpu", copy=False)
    assert p.calls[-1] == {"max_version": (1, 3)}
    assert x.readonly and x.data_ptr == address(src)
    with pytest.raises(BufferError, match="cannot move data"):
        from_dlpack(Version10Producer(src), device=(2, 0))


def test_each_producer_era_gets_the_newest_call_it_takes():
    src = readonly_array()
    full = FullProducer(src)
    from_dlpack(full, copy=True, device="cpu")
    assert full.calls == [{"max_version": (1, 3), "dl_device": (1, 0), "copy": True}]
    v10 = Version10Producer(src)
    x = from_dlpack(v10, copy=True, device="cpu")
    assert v10.calls[-1] == {"max_version": (1, 3)} and not x.readonly
    writable = np.arange(5, dtype=np.int16)
    legacy = LegacyProducer(writable)
    x = from_dlpack(legacy, copy=True)
    assert legacy.calls[-1] == {"stream": None} and x.data_ptr != address(writable)
    np.testing.assert_array_equal(np.from_dlpack(x), writable)


class OwnTypeError(FullProducer):
    """Refuses with a TypeError of its own (not about keywords) on every call;
    its signature takes every keyword, so the refusal is not retried."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"max_version": max_version, "dl_device": dl_device, "copy": copy})
        raise TypeError("this producer cannot export its data")


class OwnTypeErrorKwargs(FullProducer):
    """The same refusal behind ``**kwargs``: the signature does not say which
    keywords it takes, so the fixed retry order runs."""

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        raise TypeError("this producer cannot export its data")


@pytest.mark.parametrize("kwargs", [{}, {"copy": True}, {"device": "cpu"}])
@pytest.mark.parametrize("consumer", [from_dlpack, DLPackArray])
@pytest.mark.parametrize("producer", [OwnTypeError, OwnTypeErrorKwargs])
def test_producer_type_error_raised_once_unchained(producer, consumer, kwargs):
    p = producer(np.arange(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match="cannot export its data") as info:
            consumer(p, **kwargs)
    if producer is OwnTypeError:
        assert len(p.calls) == 1
    else:
        # All keywords, max_version only when dl_device/copy were passed, none.
        assert p.calls[-2:] == [{"max_version": (1, 3)}, {}]
        assert len(p.calls) == (2 if not kwargs else 3)
    assert info.value.__context__ is None and info.value.__cause__ is None


class LegacyOwnTypeError(LegacyProducer):
    def __dlpack__(self, stream=None):
        self.calls.append({"stream": stream})
        raise TypeError("legacy producer refuses this array")


def test_legacy_producer_own_error_is_the_one_raised():
    p = LegacyOwnTypeError(np.arange(3))
    with pytest.raises(TypeError, match="legacy producer refuses") as info:
        from_dlpack(p, copy=True)
    assert info.value.__context__ is None
    # All keywords, then straight to none (the error named max_version).
    assert len(p.calls) == 1


@pytest.mark.parametrize(
    "message",
    [
        "P.__dlpack__() takes no keyword arguments",  # C METH_NOARGS / METH_O
        # pybind11 / nanobind list the call's keywords.
        "__dlpack__(): incompatible function arguments.\n"
        "Invoked with: <P>; kwargs: max_version=(1, 3)",
    ],
)
def test_other_keyword_refusal_spellings_retry(message):
    class CStyle(LegacyProducer):
        def __dlpack__(self, *args, **kwargs):
            self.calls.append(kwargs)
            if kwargs:
                raise TypeError(message)
            if self.a is None:
                raise TypeError("C-style producer has no data")
            return self.a.__dlpack__()

    p = CStyle(np.arange(4, dtype=np.int32))
    x = from_dlpack(p, copy=True)
    assert p.calls[-1] == {}
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(4))
    # Its own error on the keyword-free call is the one raised, unchained.
    with pytest.raises(TypeError, match="has no data") as info:
        from_dlpack(CStyle(None), copy=True)
    assert info.value.__context__ is None


def test_pyarrow_refusal_of_nulls_is_one_error_without_warning():
    pa = require("pyarrow", "these tests exchange data with it")
    arr = pa.array([1, None])
    # DLPackArray falls back to pyarrow's Arrow capsules, whose import names
    # the null count (tests/arrow/test_arrow_import.py); from_dlpack, which speaks
    # DLPack only, raises that same error instead of pyarrow's refusal (one
    # error for nulls on every route) -- still one error.
    for consumer in (from_dlpack, DLPackArray):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError, match="1 null") as info:
                consumer(arr)
        assert info.value.__context__ is None and info.value.__cause__ is None


# --- item 6: byte_offset folded into data -----------------------------------------------
def test_from_buffer_offset_folded_and_accepted_by_torch():
    torch = require("torch", "these tests exchange data with it")
    raw = bytearray(16)
    raw[8:12] = (1234).to_bytes(4, "little")
    x = DLPackArray.from_buffer(raw, "int32", shape=(), offset=8)
    base = ctypes.addressof(ctypes.c_char.from_buffer(raw))
    assert x.byte_offset == 0 and x.data_ptr == base + 8
    f = dc.tensor_fields(x.__dlpack__(max_version=(1, 3)))
    assert f["byte_offset"] == 0 and f["data"] == base + 8
    t = torch.from_dlpack(x)
    assert int(t) == 1234 and t.data_ptr() == base + 8


class InterfaceWithBuffer:
    """Exposes only an array interface whose data is a buffer plus an offset."""

    def __init__(self, buf, offset, shape, typestr="<i4"):
        self.__array_interface__ = {
            "version": 3,
            "shape": shape,
            "typestr": typestr,
            "data": buf,
            "offset": offset,
        }


@pytest.mark.parametrize("shape", [(), (2,)])
def test_array_interface_offset_folded_for_every_consumer(shape):
    raw = bytearray(np.arange(6, dtype=np.int32).tobytes())
    base = ctypes.addressof(ctypes.c_char.from_buffer(raw))
    x = DLPackArray(InterfaceWithBuffer(raw, 12, shape))
    assert x.byte_offset == 0 and x.data_ptr == base + 12
    expected = np.arange(3, 3 + (shape[0] if shape else 1), dtype=np.int32).reshape(shape)
    np.testing.assert_array_equal(np.from_dlpack(x), expected)
    torch = require("torch", "these tests exchange data with it")
    assert torch.from_dlpack(x).tolist() == expected.tolist()
    jnp = require("jax.numpy", "these tests exchange data with it")
    assert jnp.from_dlpack(x).tolist() == expected.tolist()


@pytest.mark.parametrize("versioned", [True, False])
def test_capsule_byte_offset_folded_on_import(versioned):
    a = np.arange(10, dtype=np.int32)
    p = dc.Producer(a[3:], data=address(a), byte_offset=12, versioned=versioned)
    x = DLPackArray(p.capsule())
    assert x.data_ptr == address(a) + 12 and x.byte_offset == 0
    f = dc.tensor_fields(x.__dlpack__(max_version=(1, 3)))
    assert (f["data"], f["byte_offset"]) == (address(a) + 12, 0)
    torch = require("torch", "these tests exchange data with it")
    assert torch.from_dlpack(x[0]).item() == 3  # a 0-d view: torch demands byte_offset 0


def test_device_byte_offset_folded_unless_data_is_a_handle():
    # Never dereferenced.  CUDA-family data is an address: folded.  OpenCL,
    # Vulkan and Metal data is an opaque handle: byte_offset must stay.
    for device_type, folded in [
        (dc.KDL_CUDA, True),
        (KDL_ROCM, True),
        (KDL_CUDA_MANAGED, True),
        (KDL_OPENCL, False),
        (KDL_VULKAN, False),
        (KDL_METAL, False),
    ]:
        p = dc.Producer(
            None, shape=(4,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 1), data=0x10000,
            byte_offset=256, device=(device_type, 0),
        )  # fmt: skip
        x = DLPackArray(p.capsule())
        expected = (0x10000 + 256, 0) if folded else (0x10000, 256)
        assert (x.data_ptr, x.byte_offset) == expected, device_type
        f = dc.tensor_fields(x.__dlpack__(max_version=(1, 3)))
        assert (f["data"], f["byte_offset"]) == expected, device_type


def test_empty_null_data_with_byte_offset_stays_null():
    p = dc.Producer(
        None, shape=(0,), strides=(1,), dtype=(dc.KDL_INT, 32, 1), data=0, byte_offset=8
    )
    x = DLPackArray(p.capsule())
    assert (x.data_ptr, x.byte_offset) == (0, 0)


# --- item 9: one exception type per error -----------------------------------------------
class OnlyInterface:
    def __init__(self, a):
        self.__array_interface__ = a.__array_interface__
        self._keep = a


class OnlyStruct:
    def __init__(self, a):
        self.__array_struct__ = a.__array_struct__
        self._keep = a


UNSUPPORTED_NUMPY = [
    ("datetime64", lambda: np.array(["2020-01-01"], dtype="datetime64[D]")),
    ("timedelta64", lambda: np.array([1], dtype="timedelta64[s]")),
    ("str", lambda: np.array(["ab"])),
    ("object", lambda: np.array([object()], dtype=object)),
    ("structured", lambda: np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")])),
]


# NumPy exports no PEP 3118 buffer for object, datetime64 and timedelta64 arrays.
ROUTES = [
    pytest.param(route, name, make, id=f"{route}-{name}")
    for route in ["dlpack", "from_dlpack", "interface", "struct", "buffer"]
    for name, make in UNSUPPORTED_NUMPY
    if not (route == "buffer" and name in ("object", "datetime64", "timedelta64"))
]


@pytest.mark.parametrize("route, name, make", ROUTES)
def test_unsupported_dtype_is_buffer_error_on_every_route(route, name, make):
    a = make()
    wrap = {
        "dlpack": DLPackArray,
        "from_dlpack": from_dlpack,
        "interface": lambda a: DLPackArray(OnlyInterface(a)),
        "struct": lambda a: DLPackArray(OnlyStruct(a)),
        "buffer": lambda a: DLPackArray(memoryview(a)),
    }[route]
    with pytest.raises(BufferError, match="supported dtypes are bool, int8") as info:
        wrap(a)
    assert info.value.__context__ is None


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "float4_e2m1fn", "float6_e2m3fn"])
@pytest.mark.parametrize("consumer", [DLPackArray, from_dlpack])
def test_sub_byte_ml_dtypes_named_in_buffer_error(name, consumer):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not hasattr(ml_dtypes, name):
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {name}")
    a = np.zeros(4, dtype=getattr(ml_dtypes, name))
    with pytest.raises(BufferError, match=rf"dtype '{name}'.*supported dtypes are bool"):
        consumer(a)


def test_sub_byte_capsule_message_lists_supported():
    p = dc.Producer(None, shape=(2,), strides=(1,), dtype=(dc.KDL_FLOAT4_E2M1FN, 4, 1), data=0x10)
    with pytest.raises(BufferError, match="sub-byte.*supported dtypes are bool"):
        DLPackArray(p.capsule())


@pytest.mark.parametrize("stream", [0, 1, 2, 99])
def test_cpu_stream_is_value_error(stream):
    x = DLPackArray(np.arange(3))
    with pytest.raises(ValueError, match="not valid for CPU data"):
        x.__dlpack__(stream=stream)
    x.__dlpack__(stream=-1)  # documented: -1 (no synchronisation) is always accepted


@pytest.mark.parametrize(
    "name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e8m0fnu"]
)
def test_from_dlpack_imports_ml_dtypes_like_dlpackarray(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not hasattr(ml_dtypes, name):
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {name}")
    src = np.arange(12, dtype=np.float32).reshape(3, 4).astype(getattr(ml_dtypes, name))[:, ::2]
    a, b = DLPackArray(src), from_dlpack(src)
    for attr in ("dtype", "shape", "strides", "data_ptr", "byte_offset", "readonly", "device"):
        assert getattr(a, attr) == getattr(b, attr), attr
    assert b.dtype.name == name
    c = from_dlpack(src, copy=True, device="cpu")
    assert c.data_ptr != b.data_ptr and c.c_contiguous
    np.testing.assert_array_equal(
        np.asarray(c).view(np.uint8), np.ascontiguousarray(src).view(np.uint8)
    )


# --- item 10: device streams ------------------------------------------------------------
def device_array(device_type, data=0x10000):
    p = dc.Producer(
        None, shape=(4,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 1), data=data,
        device=(device_type, 0),
    )  # fmt: skip
    return DLPackArray(p.capsule())


@pytest.mark.no_cuda_driver  # made-up device pointers and streams
@pytest.mark.parametrize(
    "device_type, stream, error",
    [
        # CUDA streams are ordered through the driver (tests/cuda/test_cuda_fake.py
        # checks the event calls).  Where no driver can be loaded no work can be
        # pending: a capsule's token is none and there is nothing to order
        # (docs/cuda.md, "Stream rules"); tests/cuda/test_cuda_streams.py checks the
        # ordering where work is pending.
        (dc.KDL_CUDA, 2, None),
        (dc.KDL_CUDA, 0x7F00, None),
        (KDL_CUDA_MANAGED, 0x7F00, None),
        (KDL_CUDA_HOST, 2, None),
        # No ROCm runtime is loaded: refused rather than ignored.
        (KDL_ROCM, 0, "synchronization is not available"),
        (KDL_ROCM, 0x7F00, "synchronization is not available"),
    ],
)
def test_device_stream_refused_not_ignored(device_type, stream, error):
    x = device_array(device_type)
    if error is None:
        assert dc.tensor_fields(x.__dlpack__(max_version=(1, 3), stream=stream))["data"] == 0x10000
    else:
        with pytest.raises(BufferError, match=error):
            x.__dlpack__(max_version=(1, 3), stream=stream)
    for ok in (None, -1):
        assert dc.tensor_fields(x.__dlpack__(max_version=(1, 3), stream=ok))["data"] == 0x10000


@pytest.mark.parametrize("device_type", [KDL_CUDA_HOST, KDL_CUDA_MANAGED])
def test_relabel_to_cpu_with_a_stream_is_refused(device_type):
    src = np.arange(4, dtype=np.float32)
    x = device_array(device_type, data=address(src))
    # The stream would be a CPU stream: an incorrect argument (the host
    # synchronisation itself is checked in tests/cuda/test_cuda_fake.py).
    with pytest.raises(ValueError, match="not valid for CPU data"):
        x.__dlpack__(max_version=(1, 3), dl_device=(1, 0), stream=1)
    f = dc.tensor_fields(x.__dlpack__(max_version=(1, 3), dl_device=(1, 0), stream=-1))
    assert f["device"] == (1, 0) and f["data"] == address(src)


def test_views_of_opaque_handle_data_keep_the_offset_in_byte_offset():
    # Slicing moves the first element; where data is a handle the move must
    # land in byte_offset, never in the pointer (DLPack header rule).
    for device_type, folded in [(dc.KDL_CUDA, True), (KDL_OPENCL, False), (KDL_VULKAN, False)]:
        p = dc.Producer(
            None, shape=(4, 3), strides=(3, 1), dtype=(dc.KDL_FLOAT, 32, 1), data=0x10000,
            byte_offset=256, device=(device_type, 0),
        )  # fmt: skip
        v = DLPackArray(p.capsule())[1:, 2]
        expected = (0x10000 + 256 + 20, 0) if folded else (0x10000, 256 + 20)
        assert (v.data_ptr, v.byte_offset) == expected, device_type
        assert v.shape == (3,) and v.strides == (3,)
