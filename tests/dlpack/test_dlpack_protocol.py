"""DLPack Python specification rules for DLPackArray as producer and consumer."""

from __future__ import annotations

import enum

import dlpack_ctypes as dc
import numpy as np
import pytest

from dlpackarray import DLPACK_VERSION, DLDeviceType, DLPackArray, from_dlpack


def address(a) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture
def arr():
    return np.arange(12, dtype=np.float32).reshape(3, 4)


# --- __dlpack__ versions ---------------------------------------------------------
@pytest.mark.parametrize(
    "max_version, name",
    [
        (None, "dltensor"),
        ((0, 8), "dltensor"),
        ((1, 0), "dltensor_versioned"),
        ((1, 3), "dltensor_versioned"),
        ((1, 99), "dltensor_versioned"),
        ((2, 0), "dltensor_versioned"),
    ],
)
def test_capsule_kind_follows_max_version(arr, max_version, name):
    cap = DLPackArray(arr).__dlpack__(max_version=max_version)
    assert dc.capsule_name(cap) == name
    f = dc.tensor_fields(cap)
    if name == "dltensor_versioned":
        assert f["version"] == (1, 3) == DLPACK_VERSION
        assert f["flags"] == 0
    assert f["data"] + f["byte_offset"] == address(arr)
    assert f["shape"] == (3, 4) and f["strides"] == (4, 1)
    assert f["dtype"] == (dc.KDL_FLOAT, 32, 1) and f["device"] == (dc.KDL_CPU, 0)


def test_readonly_flag_set_on_readonly_data():
    x = DLPackArray(b"abcdefgh")
    assert dc.tensor_fields(x.__dlpack__(max_version=(1, 0)))["flags"] == dc.FLAG_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        x.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        x.__dlpack__(max_version=(0, 9))


def test_copy_true_sets_is_copied_and_is_c_contiguous(arr):
    view = arr.T[::-1]
    x = DLPackArray(view)
    cap = x.__dlpack__(max_version=(1, 3), copy=True)
    f = dc.tensor_fields(cap)
    assert f["flags"] == dc.FLAG_IS_COPIED
    assert f["strides"] == (3, 1) and f["shape"] == (4, 3)
    assert f["data"] + f["byte_offset"] != address(view)
    np.testing.assert_array_equal(np.from_dlpack(DLPackArray(cap)), view)
    # A copy of read-only data is writable: no READ_ONLY flag.
    ro = DLPackArray(b"abcd").__dlpack__(max_version=(1, 3), copy=True)
    assert dc.tensor_fields(ro)["flags"] == dc.FLAG_IS_COPIED


@pytest.mark.parametrize("copy", [None, False])
def test_copy_false_or_none_shares(arr, copy):
    f = dc.tensor_fields(DLPackArray(arr).__dlpack__(max_version=(1, 3), copy=copy))
    assert f["flags"] == 0 and f["data"] + f["byte_offset"] == address(arr)


# --- argument checking --------------------------------------------------------------
@pytest.mark.parametrize("stream", [None, -1])
def test_cpu_stream_none_or_minus_one(arr, stream):
    assert dc.capsule_name(DLPackArray(arr).__dlpack__(stream=stream)) == "dltensor"


@pytest.mark.parametrize("stream", [0, 1, 2, 12345])
def test_cpu_other_streams_rejected(arr, stream):
    # An incorrect argument (NumPy's tests expect ValueError), not unexportable data.
    with pytest.raises(ValueError, match="not valid for CPU"):
        DLPackArray(arr).__dlpack__(stream=stream)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"stream": "1"}, "stream"),
        ({"stream": 1.0}, "stream"),
        ({"max_version": [1, 3]}, "max_version"),
        ({"max_version": (1,)}, "max_version"),
        ({"max_version": (1, 3, 0)}, "max_version"),
        ({"max_version": ("1", "3")}, "max_version"),
        ({"max_version": 1}, "max_version"),
        ({"copy": 1}, "copy"),
        ({"copy": "yes"}, "copy"),
        ({"dl_device": "cuda"}, "device"),
        ({"dl_device": (1,)}, "device"),
        ({"dl_device": (1.0, 0)}, "device"),
    ],
)
def test_bad_argument_types(arr, kwargs, match):
    with pytest.raises(TypeError, match=match):
        DLPackArray(arr).__dlpack__(**kwargs)


def test_positional_arguments_rejected(arr):
    with pytest.raises(TypeError):
        DLPackArray(arr).__dlpack__(None)


@pytest.mark.parametrize("dl_device", [(2, 0), (1, 1), (13, 0)])
def test_cross_device_request_is_buffer_error(arr, dl_device):
    with pytest.raises(BufferError, match="cannot export"):
        DLPackArray(arr).__dlpack__(max_version=(1, 3), dl_device=dl_device)


def test_same_device_request_is_fine(arr):
    x = DLPackArray(arr)
    for dev in [(1, 0), x.__dlpack_device__(), (DLDeviceType.CPU, 0)]:
        cap = x.__dlpack__(max_version=(1, 3), dl_device=dev)
        assert dc.tensor_fields(cap)["data"] == address(arr)


def test_pinned_memory_exported_as_cpu_without_copy(arr):
    p = dc.Producer(arr, device=(3, 0))  # kDLCUDAHost: host-accessible
    x = DLPackArray(p.capsule())
    assert x.__dlpack_device__() == (DLDeviceType.CPU_PINNED, 0)
    f = dc.tensor_fields(x.__dlpack__(max_version=(1, 3), dl_device=(1, 0)))
    assert f["device"] == (1, 0) and f["data"] == address(arr) and f["flags"] == 0
    f = dc.tensor_fields(x.__dlpack__(max_version=(1, 3)))
    assert f["device"] == (3, 0)


@pytest.mark.no_cuda_driver  # made-up device pointers and streams
def test_cuda_data_streams_and_refusals():
    """Device data is never dereferenced: only its descriptor is checked and passed on."""
    p = dc.Producer(
        None,
        shape=(4,),
        strides=(1,),
        dtype=(dc.KDL_FLOAT, 32, 1),
        data=0x10000,
        device=(dc.KDL_CUDA, 0),
    )
    x = DLPackArray(p.capsule())
    assert x.__dlpack_device__() == (DLDeviceType.CUDA, 0)
    for stream in (None, -1):
        assert dc.tensor_fields(x.__dlpack__(max_version=(1, 3), stream=stream))["data"] == 0x10000
    # The legacy stream is where the data is ready: nothing to order.
    assert dc.tensor_fields(x.__dlpack__(max_version=(1, 3), stream=1))["data"] == 0x10000
    # Other streams are ordered through the CUDA driver (tests/cuda/test_cuda_fake.py);
    # in a process where no driver can be loaded no work can be pending: a bare
    # capsule's token is none and nothing needs ordering (docs/cuda.md).
    for stream in (2, 0x7F00):
        assert dc.tensor_fields(x.__dlpack__(max_version=(1, 3), stream=stream))["data"] == 0x10000
    assert x.__cuda_array_interface__["stream"] is None
    with pytest.raises(ValueError, match="stream=0"):
        x.__dlpack__(stream=0)
    with pytest.raises(ValueError, match=">= -1"):
        x.__dlpack__(stream=-5)
    # Device -> host and device copies need the driver too.
    with pytest.raises(BufferError, match="CUDA driver"):
        x.__dlpack__(max_version=(1, 3), dl_device=(1, 0))
    with pytest.raises(BufferError, match="CUDA driver"):
        x.__dlpack__(max_version=(1, 3), copy=True)
    with pytest.raises(BufferError, match="host memory"):
        memoryview(x)
    del x
    assert p.deleter_calls == 1


def test_rocm_streams():
    p = dc.Producer(
        None, shape=(2,), strides=(1,), dtype=(dc.KDL_INT, 8, 1), data=0x1000, device=(10, 0)
    )
    x = DLPackArray(p.capsule())
    with pytest.raises(BufferError, match="synchronization is not available"):
        x.__dlpack__(stream=0)
    for stream in (1, 2):
        with pytest.raises(ValueError, match="ROCm"):
            x.__dlpack__(stream=stream)


# --- device / info ------------------------------------------------------------------
def test_dlpack_device_and_info(arr):
    x = DLPackArray(arr)
    dev = x.__dlpack_device__()
    assert dev == (1, 0) and isinstance(dev[0], enum.IntEnum) and dev[0] is DLDeviceType.CPU
    assert x.device == dev
    assert x.__dlpack_info__() == (1, 3)


def test_unknown_device_type_reported_as_int():
    p = dc.Producer(
        None, shape=(1,), strides=(1,), dtype=(dc.KDL_INT, 8, 1), data=0x1000, device=(99, 5)
    )
    dev = DLPackArray(p.capsule()).__dlpack_device__()
    assert dev == (99, 5) and type(dev[0]) is int


# --- consuming capsules -----------------------------------------------------------
@pytest.mark.parametrize("max_version", [None, (1, 3)])
@pytest.mark.parametrize("consumer", [DLPackArray, from_dlpack])
def test_raw_capsules_consumed_once(arr, max_version, consumer):
    cap = arr.__dlpack__(max_version=max_version)
    name = dc.capsule_name(cap)
    x = consumer(cap)
    assert dc.capsule_name(cap) == "used_" + name
    assert x.data_ptr + x.byte_offset == address(arr)
    np.testing.assert_array_equal(np.from_dlpack(x), arr)
    with pytest.raises(ValueError, match="already been consumed"):
        consumer(cap)


def test_foreign_capsule_name_is_type_error():
    p = dc.Producer(np.zeros(2))
    cap = p.capsule(dc.NAME_FOREIGN)
    for consumer in (DLPackArray, from_dlpack):
        with pytest.raises(TypeError, match="not_a_tensor"):
            consumer(cap)
    assert dc.capsule_name(cap) == "not_a_tensor" and p.deleter_calls == 0


class LegacyProducer:
    """A pre-1.0 producer: ``__dlpack__`` takes no keywords, returns a legacy capsule."""

    def __init__(self, source):
        self.source = source
        self.calls = 0

    def __dlpack__(self):
        self.calls += 1
        return DLPackArray(self.source).__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("consumer", [DLPackArray, from_dlpack])
def test_legacy_only_producer_through_typeerror_fallback(arr, consumer):
    prod = LegacyProducer(arr)
    x = consumer(prod)
    assert prod.calls == 1  # the keyword call failed before reaching the body
    assert x.data_ptr + x.byte_offset == address(arr)
    y = consumer(prod, copy=True)  # copy requested of a producer that cannot copy
    assert y.data_ptr != address(arr)
    np.testing.assert_array_equal(np.from_dlpack(y), arr)


def test_producer_receives_max_version_and_copy(arr):
    seen = {}

    class Recorder:
        def __dlpack__(self, **kwargs):
            seen.update(kwargs)
            return DLPackArray(arr).__dlpack__(**kwargs)

    from_dlpack(Recorder())
    assert seen == {"max_version": (1, 3)}
    seen.clear()
    y = from_dlpack(Recorder(), copy=True)
    assert seen == {"max_version": (1, 3), "dl_device": None, "copy": True}
    assert y.data_ptr != address(arr)


@pytest.mark.parametrize("obj", [memoryview(b"ab"), b"ab", np.int8, object()])
def test_from_dlpack_requires_dlpack(obj):
    with pytest.raises(AttributeError, match="__dlpack__"):
        from_dlpack(obj)


def test_major_version_2_rejected_and_deleter_called():
    p = dc.Producer(np.zeros(3), version=(2, 0))
    cap = p.capsule()
    with pytest.raises(BufferError, match="version 2.0"):
        DLPackArray(cap)
    assert p.deleter_calls == 1
    assert dc.capsule_name(cap) == "used_dltensor_versioned"
    with pytest.raises(ValueError, match="already been consumed"):
        DLPackArray(cap)
    assert p.deleter_calls == 1


def test_newer_minor_version_accepted():
    p = dc.Producer(np.arange(3.0), version=(1, 9))
    np.testing.assert_array_equal(np.from_dlpack(DLPackArray(p.capsule())), [0, 1, 2])


def test_readonly_flag_on_import_is_respected():
    a = np.arange(4)
    x = DLPackArray(dc.Producer(a, flags=dc.FLAG_READ_ONLY).capsule())
    assert x.readonly
    assert not np.from_dlpack(x).flags.writeable
    mv = memoryview(x)
    assert mv.readonly
    with pytest.raises(TypeError, match="read-only"):
        mv[0] = 1


def test_null_strides_mean_c_contiguous():
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    x = DLPackArray(dc.Producer(a, versioned=False, null_strides=True).capsule())
    assert x.strides == (12, 4, 1)
    np.testing.assert_array_equal(np.from_dlpack(x), a)


def test_byte_offset_honoured():
    a = np.arange(10, dtype=np.int32)
    p = dc.Producer(a[3:], data=address(a), byte_offset=12)
    x = DLPackArray(p.capsule())
    # Folded into data on import, so it is exported as 0 (see test_spec_defects.py).
    assert x.data_ptr == address(a) + 12 and x.byte_offset == 0
    np.testing.assert_array_equal(np.from_dlpack(x), a[3:])
    f = dc.tensor_fields(x.__dlpack__(max_version=(1, 3)))
    assert f["data"] == address(a) + 12 and f["byte_offset"] == 0


def test_size_zero_with_null_data():
    x = DLPackArray(
        dc.Producer(
            None, shape=(0, 3), strides=(3, 1), dtype=(dc.KDL_FLOAT, 64, 1), data=0
        ).capsule()
    )
    assert x.shape == (0, 3) and x.size == 0
    assert np.from_dlpack(x).shape == (0, 3)


def test_zero_dim_export_has_no_shape_pointer_requirement():
    x = DLPackArray(np.array(3.5))
    f = dc.tensor_fields(x.__dlpack__(max_version=(1, 3)))
    assert f["ndim"] == 0 and f["shape"] == ()
    assert np.from_dlpack(x)[()] == 3.5
