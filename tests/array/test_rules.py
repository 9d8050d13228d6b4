"""Each request rule has one home in the core (cpp/include/dlpackarray/rules.hpp), so every
protocol path applies it identically: same exception type, same wording.
"""

from __future__ import annotations

import dlpack_ctypes as dc
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlpackarray import DLPackArray, from_dlpack

KDL_VULKAN = 7  # device memory dlpackarray can neither read nor copy


def on_device(device=(KDL_VULKAN, 0)):
    p = dc.Producer(None, shape=(4,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 1), data=0x1000,
                    device=device)  # fmt: skip
    return DLPackArray(p.capsule())


@pytest.mark.parametrize(
    "call",
    [
        lambda: DLPackArray(b"ab", copy=1),
        lambda: from_dlpack(np.arange(2), copy="yes"),
        lambda: DLPackArray(b"ab").__dlpack__(max_version=(1, 3), copy=0),
        lambda: DLPackArray(b"ab").__array__(copy=[]),
    ],
)
def test_copy_rule(call):
    with pytest.raises(TypeError, match=r"^copy must be None, True or False, got "):
        call()


HOST_RULE = "the data is on device VULKAN:0 and dlpackarray reads host memory only"


@pytest.mark.parametrize(
    "call, action",
    [
        (lambda x: x.copy(), "copy"),
        (lambda x: x.__dlpack__(max_version=(1, 3), copy=True), "copy"),
        (lambda x: DLPackArray(x, copy=True), "copy"),
        (lambda x: memoryview(x), "export the data through the buffer protocol"),
        (lambda x: x.__array__(), "export the data through __array__"),
    ],
)
def test_host_rule(call, action):
    with pytest.raises(BufferError) as info:
        call(on_device())
    assert str(info.value) == f"cannot {action}: {HOST_RULE}"


@pytest.mark.parametrize("attr", ["__array_interface__", "__array_struct__"])
def test_host_rule_on_protocol_probes_reads_as_a_missing_attribute(attr):
    x = on_device()
    with pytest.raises(AttributeError) as info:
        getattr(x, attr)
    assert str(info.value) == (f"cannot describe the data with {attr}: {HOST_RULE}; use __dlpack__")
    assert not hasattr(x, attr)


def test_host_rule_names_the_host_copy_for_cuda_data():
    # CUDA device memory can be copied to the host (through the driver, docs/cuda.md).
    with pytest.raises(BufferError) as info:
        memoryview(on_device((dc.KDL_CUDA, 0)))
    assert str(info.value) == (
        "cannot export the data through the buffer protocol: the data is on device CUDA:0 and "
        "dlpackarray reads host memory only; for a host copy use DLPackArray(x, device='cpu') "
        "or __dlpack__(dl_device=(1, 0))"
    )


def test_device_rule_consumer_and_producer():
    x = on_device()
    reach = "dlpackarray copies between host memory and from CUDA devices to the host only"
    with pytest.raises(BufferError) as consumer:
        DLPackArray(x, device="cpu")
    # The refusal names the device asked for and the ones that would be accepted.
    accepted = "; accepted: None or (7, 0) for VULKAN:0"
    assert str(consumer.value) == (
        f"cannot move data from device VULKAN:0 to CPU:0: {reach}{accepted}"
    )
    with pytest.raises(ValueError) as no_copy:
        from_dlpack(x, device="cpu", copy=False)
    assert str(no_copy.value) == (
        "data on device VULKAN:0 cannot reach device CPU:0 without a copy, and copy=False was "
        f"given{accepted}"
    )
    with pytest.raises(BufferError) as producer:
        x.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False)
    assert str(producer.value) == (
        f"cannot export data on device VULKAN:0 to device CPU:0: {reach}{accepted}"
    )
    # CUDA data reaches the CPU through a copy, so only copy=False is refused.
    cuda = on_device((dc.KDL_CUDA, 0))
    with pytest.raises(ValueError, match="CUDA:0 cannot reach device CPU:0 without a copy"):
        from_dlpack(cuda, device="cpu", copy=False)
    with pytest.raises(BufferError, match="CUDA:0 cannot reach device CPU:0 without a copy"):
        cuda.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError) as cuda_to_other:
        cuda.__dlpack__(max_version=(1, 3), dl_device=(2, 1))
    assert str(cuda_to_other.value).endswith(
        "; accepted: None or (2, 0) for CUDA:0, or (1, 0) for CPU:0"
    )


@pytest.mark.parametrize("device", [(2, 0), (99, 3), (1, 5)])
def test_a_producer_refusing_device_is_named_with_what_it_accepts(device):
    # NumPy's own refusal says only "unsupported device requested"; the error a user sees
    # names the device asked for and the producer's own device.
    np = pytest.importorskip("numpy", reason="numpy is not installed: the producer here")
    with pytest.raises(BufferError) as refused:
        DLPackArray(np.arange(3.0), device=device)
    message = str(refused.value)
    if _takes_dl_device(np.arange(1.0)):
        assert message.startswith(f"ndarray refused device={device!r} (")
    else:  # NumPy 2.0: asked without dl_device, dlpackarray refuses the device itself
        assert message.startswith("cannot move data from device CPU:0 to ")
    assert message.endswith("; accepted: None or (1, 0) for CPU:0")


def _takes_dl_device(producer) -> bool:
    """Whether ``producer.__dlpack__`` takes ``dl_device`` (NumPy from 2.1)."""
    try:
        producer.__dlpack__(dl_device=(1, 0))
    except TypeError:
        return False
    return True


@pytest.mark.no_cuda_driver  # made-up device pointers and streams
@pytest.mark.parametrize("device", [(3, 0), (13, 1)])  # CUDA_HOST, CUDA_MANAGED
def test_device_rule_host_accessible_memory_is_cpu_data_on_both_sides(device):
    x = on_device(device)
    assert DLPackArray(x, device="cpu").device == (1, 0)
    fields = dc.tensor_fields(x.__dlpack__(max_version=(1, 3), dl_device=(1, 0)))
    assert fields["device"] == (1, 0) and fields["data"] == x.data_ptr
    # CPU is device 0: another id is another device, refused alike.
    with pytest.raises(BufferError, match="to CPU:3"):
        DLPackArray(x, device=(1, 3))
    with pytest.raises(BufferError, match="to device CPU:3"):
        x.__dlpack__(max_version=(1, 3), dl_device=(1, 3))


def test_stride_rule_buffer_protocol_and_array_interface():
    packed = np.zeros(4, dtype=[("a", "<i4"), ("b", "u1")])["a"]  # stride 5 bytes
    rule = "has a stride of 5 bytes in dimension 0, not a multiple of the item size 4"
    with pytest.raises(BufferError, match=f"the buffer of a 'memoryview' object {rule}"):
        DLPackArray(memoryview(packed))

    class Iface:
        __array_interface__ = dict(packed.__array_interface__, descr=[("", "<i4")])

    with pytest.raises(BufferError, match=rule):
        DLPackArray(Iface())


class _RefusesDevice:
    """A CPU producer that refuses every ``dl_device`` with ``error``, as NumPy
    does (BufferError from NumPy 2.4, ValueError before)."""

    def __init__(self, error):
        self._a = np.arange(3.0)
        self._error = error

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is not None:
            raise self._error("unsupported device requested")
        return self._a.__dlpack__(stream=stream)  # what any NumPy 2 takes


class _NoDeviceKeyword:
    """A CPU producer from before ``dl_device`` (NumPy 2.0 takes none):
    dlpackarray applies the device rule itself."""

    def __init__(self):
        self._a = np.arange(3.0)

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, stream=None):
        return self._a.__dlpack__(stream=stream)


def _outcome(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the outcome under comparison
        return type(e), str(e)
    return None


@given(
    device=st.tuples(st.sampled_from([2, 3, 4, 7, 8, 13, 99]), st.integers(0, 7)),
    copy=st.sampled_from([None, True, False]),
    via_from_dlpack=st.booleans(),
)
def test_a_producers_device_refusal_reads_the_same_whatever_type_it_raised(
    device, copy, via_from_dlpack
):
    """A producer refusing ``dl_device`` gives the device rule's error
    (BufferError, ValueError with copy=False), the same one whether the
    producer raised BufferError (the DLPack spec's type) or ValueError (NumPy
    before 2.4), and of the type dlpackarray's own refusal has for a producer
    that takes no ``dl_device`` (NumPy 2.0): no exception type of ours depends
    on the installed NumPy."""
    make = from_dlpack if via_from_dlpack else DLPackArray
    outcomes = {
        error: _outcome(lambda error=error: make(_RefusesDevice(error), device=device, copy=copy))
        for error in (BufferError, ValueError)
    }
    assert outcomes[BufferError] == outcomes[ValueError]
    kind, message = outcomes[BufferError]
    assert kind is (ValueError if copy is False else BufferError)
    own_rule, _ = _outcome(lambda: make(_NoDeviceKeyword(), device=device, copy=copy))
    assert own_rule is kind
    assert message.startswith(f"_RefusesDevice refused device={device!r} (")
    assert message.endswith("; accepted: None or (1, 0) for CPU:0")


def test_a_producers_value_error_without_a_device_request_propagates():
    """Only a refused device request is reworded: a producer's ValueError for
    anything else is raised as it was."""

    class Broken:
        def __dlpack__(self, **kwargs):
            raise ValueError("broken producer")

    with pytest.raises(ValueError, match="^broken producer$"):
        DLPackArray(Broken(), copy=True)
