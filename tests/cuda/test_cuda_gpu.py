"""CUDA on a real GPU: round trips, stream ordering, device copies (docs/cuda.md).

Skipped as a whole where no CUDA device is usable (every CI machine without a
GPU); tests/cuda/test_cuda_fake.py covers the same logic against a fake driver on
every run.  Results of the runs on real GPUs: docs/cuda_gpu_results.md.
"""

from __future__ import annotations

import copy
import pickle

import c_api_ctypes as capi
import numpy as np
import pytest
from conftest import require

import dlpackarray
from dlpackarray import DLDeviceType, DLPackArray

torch = require("torch", "torch with CUDA drives the real-GPU tests")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device is available", allow_module_level=True)

SPIN_CYCLES = 500_000_000  # ~0.3 s of GPU time: the producer is still busy when read


def _import(name):
    try:
        return __import__(name)
    except Exception:  # noqa: BLE001 -- any import failure means "not usable here"
        return None


def test_torch_round_trip_zero_copy():
    x = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)
    d = DLPackArray(x, stream=1)
    assert d.device == (DLDeviceType.CUDA, x.device.index) and d.data_ptr == x.data_ptr()
    y = torch.from_dlpack(d)
    assert y.data_ptr() == x.data_ptr() and torch.equal(y, x)
    cai = d.__cuda_array_interface__
    assert cai["data"][0] == x.data_ptr() and cai["shape"] == (4, 6) and cai["version"] == 3


@pytest.mark.parametrize("library", ["cupy", "jax", "numba"])
def test_round_trips_with_other_libraries(library):
    mod = _import(library)
    if mod is None:
        pytest.skip(f"{library} is not installed")
    x = torch.arange(10, dtype=torch.float32, device="cuda")
    d = DLPackArray(x)
    if library == "cupy":
        c = mod.asarray(d)  # through __cuda_array_interface__ or DLPack
        assert int(c.data.ptr) == x.data_ptr()
        back = DLPackArray(c)
        only_cai = type("OnlyCAI", (), {"__cuda_array_interface__": c.__cuda_array_interface__})
        assert DLPackArray(only_cai()).data_ptr == x.data_ptr()
    elif library == "jax":
        import jax.dlpack

        # "gpu" in older JAX, "cuda" where the CUDA plugin names its platform.
        if not any(dev.platform in ("gpu", "cuda") for dev in mod.devices()):
            # tests/conftest.py defaults JAX_PLATFORMS to cpu; tools/gpu_run.sh sets cuda,cpu.
            pytest.skip("jax has no GPU backend here (JAX_PLATFORMS=cuda,cpu enables it)")
        j = jax.dlpack.from_dlpack(d)
        back = DLPackArray(j)
        np.testing.assert_array_equal(np.asarray(j), np.arange(10, dtype=np.float32))
    else:
        from numba import cuda as ncuda

        n = ncuda.as_cuda_array(d)
        assert n.__cuda_array_interface__["data"][0] == x.data_ptr()
        back = DLPackArray(n)
    assert back.device[0] == DLDeviceType.CUDA
    np.testing.assert_array_equal(np.asarray(DLPackArray(back, device="cpu")), np.arange(10))


def _ones_after_a_spin(ready_on_producer=True):
    """``x``, zeros that a producer stream fills with ones after a long spin,
    and ``DLPackArray(x)`` made on that stream: ready on the producer stream
    (``stream=`` its handle) or, with ``ready_on_producer`` false, with no
    stream given.  A reader not ordered after the producer sees zeros."""
    producer = torch.cuda.Stream()
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SPIN_CYCLES)
        x.fill_(1.0)
        d = DLPackArray(x, stream=producer.cuda_stream) if ready_on_producer else DLPackArray(x)
    return x, d


def _race(consumer_stream_arg):
    """A producer fills x with ones on a side stream after a long spin; the consumer
    clones it on another stream.  Returns the consumer's view of the values."""
    consumer = torch.cuda.Stream()
    _, d = _ones_after_a_spin()
    stream = consumer.cuda_stream if consumer_stream_arg == "consumer" else -1
    cap = d.__dlpack__(stream=stream, max_version=(1, 3))
    y = torch.from_dlpack(cap)
    with torch.cuda.stream(consumer):
        z = y.clone()
    consumer.synchronize()
    out = z.cpu()
    torch.cuda.synchronize()
    return out


def test_race_is_visible_without_synchronisation_and_gone_with_it():
    assert bool((_race("consumer") == 1).all()), "stream-ordered export read stale data"
    stale = _race(-1)
    # stream=-1 orders nothing: the consumer ran during the producer's spin.
    assert bool((stale == 0).any()), "the race did not show; raise SPIN_CYCLES"


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t[:, ::2],
        lambda t: t.T,
        lambda t: t[3:9, 1:7],
        lambda t: t.reshape(4, 8, 16).permute(2, 0, 1)[::3],
    ],
)
def test_strided_device_to_host_copies(make):
    base = torch.arange(32 * 16, dtype=torch.float64, device="cuda").reshape(32, 16)
    view = make(base)
    h = DLPackArray(view, device="cpu")
    np.testing.assert_array_equal(np.asarray(h), view.cpu().numpy())
    cap = DLPackArray(view).__dlpack__(max_version=(1, 3), dl_device=(1, 0))
    np.testing.assert_array_equal(np.from_dlpack(DLPackArray(cap)), view.cpu().numpy())


def test_negative_strides_copy_to_host():
    base = torch.arange(64, dtype=torch.int32, device="cuda").reshape(8, 8)
    d = DLPackArray(base)[::-1, ::-2]
    ref = base.cpu().numpy()[::-1, ::-2]
    np.testing.assert_array_equal(np.asarray(DLPackArray(d, device="cpu")), ref)


def test_copy_on_device_and_pinned_memory():
    x = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)[:, 1:]
    cap = DLPackArray(x).__dlpack__(max_version=(1, 3), copy=True, stream=1)
    y = torch.from_dlpack(cap)
    assert y.is_cuda and y.data_ptr() != x.data_ptr() and torch.equal(y, x)
    pinned = torch.arange(8, dtype=torch.float32).pin_memory()
    p = DLPackArray(pinned)
    assert np.asarray(DLPackArray(p, device="cpu")).tolist() == list(range(8))


def test_second_gpu_device_ids():
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU only")
    # torch exports only tensors of its current device (BufferError otherwise):
    # device 1 is selected before allocating and exporting there.
    with torch.cuda.device(1):
        x = torch.arange(6, device="cuda:1")
        d = dlpackarray.from_dlpack(x, stream=1)
        assert d.device == (DLDeviceType.CUDA, 1)
        assert DLPackArray(_CAI(x)).device == (DLDeviceType.CUDA, 1)
        np.testing.assert_array_equal(np.asarray(DLPackArray(d, device="cpu")), np.arange(6))


def test_wrapping_without_a_stream_orders_the_producer():
    # torch's __dlpack__ synchronises nothing when no stream is passed (its
    # default is -1): dlpackarray asks with the legacy stream (docs/cuda.md).
    consumer = torch.cuda.Stream()
    _, d = _ones_after_a_spin(ready_on_producer=False)
    with torch.cuda.stream(consumer):
        z = torch.from_dlpack(d).clone()
    consumer.synchronize()
    assert bool((z == 1).all()), "a wrapped torch tensor was read before its producer's work"


class _StreamHandle:
    """A raw stream handle under the CUDA stream protocol (``__cuda_stream__``)."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def _cupy_stream(cupy, handle):
    """CuPy's view of another library's stream (ExternalStream before CuPy 14)."""
    if hasattr(cupy.cuda.Stream, "from_external"):
        return cupy.cuda.Stream.from_external(_StreamHandle(handle))
    return cupy.cuda.ExternalStream(handle)


def _cupy_race(cupy, import_stream):
    """CuPy fills an array on a producer stream after a spin; DLPackArray
    imports it asking for ``import_stream``, and torch clones it on the
    consumer stream.  Returns whether the consumer saw every value."""
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    c = cupy.zeros(1 << 20, dtype=cupy.float32)
    torch.cuda.synchronize()
    cupy.cuda.Device().synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SPIN_CYCLES)
    with _cupy_stream(cupy, producer.cuda_stream):
        c.fill(1.0)
        # CuPy orders the stream asked for after its current stream (the producer's).
        stream = consumer.cuda_stream if import_stream == "consumer" else -1
        d = DLPackArray(c, stream=stream)
    with torch.cuda.stream(consumer):
        z = torch.from_dlpack(d.__dlpack__(stream=-1, max_version=(1, 3))).clone()
    consumer.synchronize()
    ok = bool((z == 1).all())
    torch.cuda.synchronize()
    return ok


def test_cached_import_route_keeps_cupy_stream_order():
    # CuPy arrays have no C exchange table, so after the first import their type
    # takes the cached plain-__dlpack__ route (src/dlpackarray/_array.pyx): every
    # later import must still pass the consumer's stream to the producer.
    cupy = _import("cupy")
    if cupy is None:
        pytest.skip("cupy is not installed")
    for attempt in range(3):  # the first fills the route cache, the rest hit it
        assert _cupy_race(cupy, "consumer"), f"stale data on import {attempt}"
    # The control: with stream=-1 nothing is ordered and the race shows.
    assert not _cupy_race(cupy, -1), "the race did not show; raise SPIN_CYCLES"


def test_pinned_tensor_is_ready_for_the_host():
    # A non-blocking copy into pinned memory is pending on a side stream;
    # torch takes no stream for pinned tensors, so dlpackarray waits for the
    # device before numpy reads the memory.
    side = torch.cuda.Stream()
    src = torch.ones(1 << 20, device="cuda")
    pinned = torch.zeros(1 << 20).pin_memory()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SPIN_CYCLES)
        pinned.copy_(src, non_blocking=True)
    for stream in (None, 1, 2, side.cuda_stream):
        d = DLPackArray(pinned, stream=stream)
        assert bool((np.from_dlpack(d) == 1).all()), stream


class _CAI:
    def __init__(self, t):
        self.__cuda_array_interface__ = t.__cuda_array_interface__


# -- Arrow C Device Data interface (docs/arrow.md, "CUDA data") --------------------------------


class _DevicePair:
    """An object speaking only __arrow_c_device_array__, returning given capsules."""

    def __init__(self, pair):
        self.pair = pair

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return self.pair


def test_arrow_device_array_round_trip_waits_on_the_sync_event():
    # pyarrow's wheels cannot build CUDA device arrays (that needs pyarrow.cuda),
    # so dlpackarray is both producer and consumer here.
    from arrow_ctypes import ArrowDeviceArray, struct_of

    consumer = torch.cuda.Stream()
    x, d = _ones_after_a_spin()
    schema, array = d.__arrow_c_device_array__()
    dev = struct_of(array, ArrowDeviceArray)
    assert (dev.device_type, dev.device_id) == (DLDeviceType.CUDA, x.device.index)
    assert dev.array.buffers[1] == x.data_ptr() and dev.sync_event
    back = DLPackArray(_DevicePair((schema, array)))
    assert back.data_ptr == x.data_ptr() and back.device == d.device
    # stream=-1 orders nothing: only the import's wait on the event (recorded
    # after fill_ on the producer stream) makes the consumer see the ones.
    y = torch.from_dlpack(back.__dlpack__(stream=-1, max_version=(1, 3)))
    with torch.cuda.stream(consumer):
        z = y.clone()
    consumer.synchronize()
    assert bool((z == 1).all()), "the import did not wait for the producer's event"


def test_arrow_device_array_round_trip_of_cupy_and_strided_views():
    cupy = _import("cupy")
    if cupy is None:
        pytest.skip("cupy is not installed")
    c = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    d = DLPackArray(c)
    back = DLPackArray(_DevicePair(d.__arrow_c_device_array__()))
    assert back.data_ptr == int(c.data.ptr) and back.shape == (3, 4)
    np.testing.assert_array_equal(
        np.asarray(DLPackArray(back, device="cpu")), np.arange(12, dtype=np.float32).reshape(3, 4)
    )
    # A view with gaps is copied on the device (freed when the capsule goes).
    v = DLPackArray(c[:, ::2])
    back = DLPackArray(_DevicePair(v.__arrow_c_device_array__()))
    assert back.device == v.device and back.data_ptr != v.data_ptr
    np.testing.assert_array_equal(
        np.asarray(DLPackArray(back, device="cpu")), cupy.asnumpy(c[:, ::2])
    )


def test_pyarrow_cuda_reads_the_device_array():
    pa = _import("pyarrow")
    if pa is None or _import("pyarrow.cuda") is None:
        pytest.skip("pyarrow without CUDA support (pyarrow.cuda)")
    x = torch.arange(16, dtype=torch.float64, device="cuda")
    arr = pa.Array._import_from_c_device_capsule(*DLPackArray(x).__arrow_c_device_array__())
    assert not arr.is_cpu and arr.buffers()[1].address == x.data_ptr()
    back = DLPackArray(_DevicePair(arr.__arrow_c_device_array__()))
    assert back.data_ptr == x.data_ptr() and back.device[0] == DLDeviceType.CUDA


# -- Pickling and copying CUDA data (docs/cuda.md, "Pickling and copying") --------------------


def test_pickle_waits_for_the_ready_stream_and_lands_on_the_device():
    _, d = _ones_after_a_spin()
    # dumps copies to the host after the producer's work, not during its spin.
    for protocol in (4, 5):
        e = pickle.loads(pickle.dumps(d, protocol=protocol))
        assert e.device == d.device and e.data_ptr != d.data_ptr, protocol
        assert bool((np.asarray(DLPackArray(e, device="cpu")) == 1).all()), protocol
    # A strided view pickles the elements it covers, in order.
    base = torch.arange(48, dtype=torch.float64, device="cuda").reshape(6, 8)
    v = DLPackArray(base[::2, 1::3])
    w = pickle.loads(pickle.dumps(v, protocol=5))
    np.testing.assert_array_equal(
        np.asarray(DLPackArray(w, device="cpu")), base[::2, 1::3].cpu().numpy()
    )
    # copy and deepcopy copy on the device.
    for c in (copy.copy(v), copy.deepcopy(v)):
        assert c.device == v.device and c.data_ptr != v.data_ptr
        assert torch.equal(torch.from_dlpack(c), base[::2, 1::3])


@pytest.mark.parametrize(
    "device_type", [DLDeviceType.CPU_PINNED, DLDeviceType.CUDA_MANAGED], ids=["pinned", "managed"]
)
def test_host_accessible_memory_unpickles_as_host_memory(device_type):
    p = capi.empty([6], 2, 32, int(device_type), 0)  # DLPackArray_Empty: the driver allocates
    assert p.__dlpack_device__() == (device_type, 0)
    np.asarray(DLPackArray(p, device="cpu"))[...] = np.arange(6)
    q = pickle.loads(pickle.dumps(p, protocol=5))
    assert q.device == (DLDeviceType.CPU, 0) and q.data_ptr != p.data_ptr
    assert np.asarray(q).tolist() == list(range(6))


# -- C API 1.1: DLPackArray_Empty on the real driver (docs/cuda.md) ---------------------------


@pytest.mark.parametrize(
    "device_type, pointer_kind",
    [(DLDeviceType.CUDA, 2), (DLDeviceType.CPU_PINNED, 1), (DLDeviceType.CUDA_MANAGED, 3)],
    ids=["device", "pinned", "managed"],
)
def test_empty_allocates_what_the_driver_reports(device_type, pointer_kind):
    cupy = _import("cupy")
    if cupy is None:
        pytest.skip("cupy is not installed (its runtime reads the pointer's memory kind)")
    a = capi.empty([3, 4], 2, 32, int(device_type), 0)
    assert a.__dlpack_device__() == (device_type, 0) and a.shape == (3, 4)
    # cudaPointerGetAttributes: 1 host (pinned), 2 device, 3 managed.
    assert cupy.cuda.runtime.pointerGetAttributes(a.data_ptr).type == pointer_kind
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    if device_type == DLDeviceType.CUDA:
        torch.from_dlpack(a).copy_(torch.from_numpy(values))
        torch.cuda.synchronize()
    else:
        np.asarray(DLPackArray(a, device="cpu"))[...] = values  # host-accessible
    # A kernel reads the memory where it is (no copy): a sum on the GPU.
    mem = cupy.cuda.UnownedMemory(a.data_ptr, 48, a)
    on_gpu = cupy.ndarray((3, 4), cupy.float32, cupy.cuda.MemoryPointer(mem, 0))
    assert float(on_gpu.sum()) == float(values.sum())
    np.testing.assert_array_equal(np.asarray(DLPackArray(a, device="cpu")), values)


def test_empty_device_memory_is_freed_with_the_last_user():
    # Asked of the allocation itself, not of the device's free memory, which
    # other processes (pytest-xdist workers) change meanwhile: the H100 run of
    # 2026-11-27 saw 90 MB less free after the free, with 14 workers.
    cupy = _import("cupy")
    if cupy is None:
        pytest.skip("cupy is not installed (its runtime reads the pointer's memory kind)")
    attributes = cupy.cuda.runtime.pointerGetAttributes
    a = capi.empty([512 << 20], 1, 8, int(DLDeviceType.CUDA), 0)
    ptr = a.data_ptr
    t = torch.from_dlpack(a)  # a consumer keeps the memory alive
    del a
    assert attributes(ptr).type == 2  # still device memory
    t.fill_(3)
    assert int(t[-1]) == 3
    del t
    torch.cuda.synchronize()
    # cuMemFree_v2 returned it (torch's caching allocator never held it): the
    # address is no allocation any more (0: unregistered).
    assert attributes(ptr).type == 0
