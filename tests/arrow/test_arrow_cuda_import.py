"""Importing CUDA data through the Arrow C Device Data interface, on every CI
run, against the fake CUDA driver (tests/helpers/fake_cuda; docs/arrow.md,
"CUDA data"); exporting it is test_arrow_cuda_export.py.

A device array's sync_event is waited on before its data is exposed; foreign
devices are refused by name; device chunks are never concatenated; exports
round-trip through the device capsules.

Each scenario runs in a child interpreter whose DLPACKARRAY_CUDA_DRIVER names
the fake driver, whose "device" memory is mapped PROT_NONE: a host read of it
by dlpackarray kills that child and fails one test.  The checks read the fake
driver's call log (tests/helpers/arrow_device_capsules.py).
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
from arrow_ctypes import ArrowDeviceArray, struct_of
from arrow_device_capsules import (
    CUDA,
    CUDA_HOST,
    HandBuilt,
    HandStream,
    Pair,
    Stream,
    _event,
    _fake,
    _host,
    _move,
    _names,
    _release,
    _schema,
)
from conftest import run_scenario_on_fake_driver

# -- running scenarios -----------------------------------------------------------------------


def run_scenario(name: str, driver) -> None:
    run_scenario_on_fake_driver(__file__, name, driver)


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
