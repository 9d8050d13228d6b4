"""The fake driver's own checks: each function shows one rule of its model
(README.md) by calling the driver entry points directly through ctypes, as
libcuda would be called.  tests/cuda/test_fake_cuda_model.py runs each in a fresh
child with DLPACKARRAY_CUDA_DRIVER naming a fresh build; dlpackarray is not
imported.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fake_cuda import (  # noqa: E402
    CU_STREAM_NON_BLOCKING,
    CUDA_ERROR_CONTEXT_IS_DESTROYED,
    CUDA_ERROR_ILLEGAL_ADDRESS,
    CUDA_ERROR_INVALID_CONTEXT,
    CUDA_ERROR_INVALID_DEVICE,
    CUDA_ERROR_INVALID_HANDLE,
    CUDA_ERROR_INVALID_VALUE,
    CUDA_ERROR_NOT_INITIALIZED,
    CUDA_ERROR_NOT_READY,
    CUDA_ERROR_OUT_OF_MEMORY,
    KIND_DEVICE,
    KIND_HOST,
    KIND_MANAGED,
    LEGACY,
    PER_THREAD,
    FakeCuda,
)

vp = ctypes.c_void_p


def fake(init: bool = True) -> FakeCuda:
    f = FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])
    if init:
        assert f.lib.cuInit(0) == 0
    return f


def push(f, ctx) -> None:
    assert f.lib.cuCtxPushCurrent_v2(vp(ctx)) == 0


def pop(f) -> None:
    assert f.lib.cuCtxPopCurrent_v2(None) == 0


def event(f) -> int:
    ev = vp()
    assert f.lib.cuEventCreate(ctypes.byref(ev), 2) == 0
    return ev.value


def in_thread(fn):
    box = {}

    def run():
        box["result"] = fn()

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return box["result"]


class Memcpy2D(ctypes.Structure):
    _fields_ = [
        ("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t),
        ("srcMemoryType", ctypes.c_int), ("srcHost", vp), ("srcDevice", ctypes.c_ulonglong),
        ("srcArray", vp), ("srcPitch", ctypes.c_size_t),
        ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t),
        ("dstMemoryType", ctypes.c_int), ("dstHost", vp), ("dstDevice", ctypes.c_ulonglong),
        ("dstArray", vp), ("dstPitch", ctypes.c_size_t),
        ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t),
    ]  # fmt: skip


def copy2d(f, src, dst, width, height, spitch, dpitch, stream=LEGACY) -> int:
    c = Memcpy2D(srcMemoryType=2, srcDevice=src, srcPitch=spitch, dstMemoryType=2,
                 dstDevice=dst, dstPitch=dpitch, WidthInBytes=width, Height=height)  # fmt: skip
    return f.lib.cuMemcpy2DAsync_v2(ctypes.byref(c), vp(stream))


# ---------------------------------------------------------------------------------------------
def contexts_are_per_thread_and_required():
    f = fake(init=False)
    ev = vp()
    assert f.lib.cuEventCreate(ctypes.byref(ev), 0) == CUDA_ERROR_NOT_INITIALIZED
    assert f.lib.cuInit(0) == 0
    # No current context: every call that needs one says so.
    assert f.lib.cuEventCreate(ctypes.byref(ev), 0) == CUDA_ERROR_INVALID_CONTEXT
    assert f.lib.cuStreamSynchronize(vp(LEGACY)) == CUDA_ERROR_INVALID_CONTEXT
    assert f.lib.cuCtxSynchronize() == CUDA_ERROR_INVALID_CONTEXT
    p = ctypes.c_ulonglong()
    assert f.lib.cuMemAlloc_v2(ctypes.byref(p), 16) == CUDA_ERROR_INVALID_CONTEXT
    assert f.lib.cuCtxPopCurrent_v2(None) == CUDA_ERROR_INVALID_CONTEXT
    dev = ctypes.c_int()
    assert f.lib.cuDeviceGet(ctypes.byref(dev), 2) == CUDA_ERROR_INVALID_DEVICE
    # Primary contexts: one per device, the same handle on every retain.
    c0, c1, again = vp(), vp(), vp()
    assert f.lib.cuDevicePrimaryCtxRetain(ctypes.byref(c0), 0) == 0
    assert f.lib.cuDevicePrimaryCtxRetain(ctypes.byref(c1), 1) == 0
    assert f.lib.cuDevicePrimaryCtxRetain(ctypes.byref(again), 0) == 0
    assert c0.value == again.value == f.primary_ctx(0) and c1.value != c0.value
    # The current context is per thread.
    push(f, c0.value)
    assert f.current_ctx() == c0.value
    assert in_thread(lambda: f.current_ctx()) is None
    assert in_thread(lambda: f.lib.cuEventCreate(ctypes.byref(vp()), 0)) == (
        CUDA_ERROR_INVALID_CONTEXT
    )
    assert f.lib.cuEventCreate(ctypes.byref(ev), 0) == 0
    # Push/pop nest; cuCtxSetCurrent replaces the top (the runtime's way).
    push(f, c1.value)
    assert f.current_ctx() == c1.value and f.ctx_depth() == 2
    pop(f)
    assert f.lib.cuCtxSetCurrent(vp(c1.value)) == 0
    assert f.current_ctx() == c1.value and f.ctx_depth() == 1
    assert f.lib.cuCtxSetCurrent(None) == 0 and f.current_ctx() is None
    # A destroyed context cannot be made current; its streams are gone.
    other = f.create_ctx(0)
    s = f.stream(ctx=other)
    f.destroy_ctx(other)
    assert f.lib.cuCtxPushCurrent_v2(vp(other)) == CUDA_ERROR_CONTEXT_IS_DESTROYED
    assert f.lib.cuStreamSynchronize(vp(s)) == CUDA_ERROR_INVALID_HANDLE
    assert f.lib.cuCtxPushCurrent_v2(vp(0x1234)) == CUDA_ERROR_INVALID_CONTEXT


def events_and_streams_of_different_contexts():
    f = fake()
    c0, c1 = f.primary_ctx(0), f.primary_ctx(1)
    s0, s1 = f.stream(device=0), f.stream(device=1)
    push(f, c0)
    ev0 = event(f)
    # Recording needs the event's and the stream's context to match.
    assert f.lib.cuEventRecord(vp(ev0), vp(s1)) == CUDA_ERROR_INVALID_HANDLE
    assert f.lib.cuEventRecord(vp(ev0), vp(s0)) == 0
    pop(f)
    # Waiting accepts an event of another context (documented).
    push(f, c1)
    assert f.lib.cuStreamWaitEvent(vp(s1), vp(ev0), 0) == 0
    assert f.lib.cuStreamWaitEvent(vp(LEGACY), vp(ev0), 0) == 0  # device 1's legacy stream
    assert f.lib.cuStreamWaitEvent(vp(s1), vp(ev0), 1) == CUDA_ERROR_INVALID_VALUE
    # A copy on a stream of another context than the current one is refused.
    a = f.alloc(64, device=1)
    b = f.alloc(64, device=1)
    assert f.lib.cuMemcpyDtoDAsync_v2(vp(b), vp(a), 64, vp(s0)) == CUDA_ERROR_INVALID_HANDLE
    assert f.lib.cuMemcpyDtoDAsync_v2(vp(b), vp(a), 64, vp(s1)) == 0
    ctx = vp()
    assert f.lib.cuStreamGetCtx(vp(s0), ctypes.byref(ctx)) == 0 and ctx.value == c0
    assert f.lib.cuStreamGetCtx(vp(LEGACY), ctypes.byref(ctx)) == 0 and ctx.value == c1
    pop(f)
    # Destroyed events and unknown streams are invalid handles.
    push(f, c0)
    assert f.lib.cuEventDestroy_v2(vp(ev0)) == 0
    assert f.lib.cuEventDestroy_v2(vp(ev0)) == CUDA_ERROR_INVALID_HANDLE
    assert f.lib.cuEventRecord(vp(ev0), vp(s0)) == CUDA_ERROR_INVALID_HANDLE
    assert f.lib.cuStreamSynchronize(vp(0xDEAD00)) == CUDA_ERROR_INVALID_HANDLE
    pop(f)


def pending_work_lands_only_when_waited_for():
    f = fake()
    c0 = f.primary_ctx(0)
    for kind in (KIND_DEVICE, KIND_HOST, KIND_MANAGED):
        p = f.alloc(8, kind=kind)
        f.write(p, b"old.old.")
        side = f.stream(flags=CU_STREAM_NON_BLOCKING)  # like torch's side streams
        f.launch_write(side, p, b"NEW!")
        assert f.read(p, 8) == b"old.old." and f.pending(side) == 1
        if kind != KIND_DEVICE:  # the host sees the memory itself: still old
            assert ctypes.string_at(p, 8) == b"old.old."
        push(f, c0)
        # The legacy stream does not wait for a non-blocking stream.
        assert f.lib.cuStreamSynchronize(vp(LEGACY)) == 0
        assert f.read(p, 4) == b"old."
        assert f.lib.cuStreamQuery(vp(side)) == CUDA_ERROR_NOT_READY
        # Event record + stream wait: the consumer's stream now depends on it.
        consumer = f.stream(flags=CU_STREAM_NON_BLOCKING)
        ev = event(f)
        assert f.lib.cuEventRecord(vp(ev), vp(side)) == 0
        assert f.lib.cuEventQuery(vp(ev)) == CUDA_ERROR_NOT_READY
        assert f.lib.cuStreamWaitEvent(vp(consumer), vp(ev), 0) == 0
        assert f.read(p, 4) == b"old."
        assert f.lib.cuStreamSynchronize(vp(consumer)) == 0
        assert f.read(p, 8) == b"NEW!old." and f.pending(side) == 0
        pop(f)
    # Event synchronisation and context synchronisation land work too.
    p = f.alloc(4)
    push(f, c0)
    side = f.stream(flags=CU_STREAM_NON_BLOCKING)
    f.launch_write(side, p, b"ev..")
    ev = event(f)
    assert f.lib.cuEventRecord(vp(ev), vp(side)) == 0
    f.launch_write(side, p, b"late")  # after the record: not covered by the event
    assert f.lib.cuEventSynchronize(vp(ev)) == 0
    assert f.read(p, 4) == b"ev.." and f.pending(side) == 1
    assert f.lib.cuCtxSynchronize() == 0
    assert f.read(p, 4) == b"late" and f.pending_total() == 0
    # Copies are stream work as well: ordered after the write before them.
    q = f.alloc(4)
    f.launch_write(side, p, b"copy")
    assert f.lib.cuMemcpyDtoDAsync_v2(vp(q), vp(p), 4, vp(side)) == 0
    assert f.read(q, 4) == b"\0\0\0\0"
    assert f.lib.cuStreamSynchronize(vp(side)) == 0 and f.read(q, 4) == b"copy"
    pop(f)


def legacy_stream_synchronises_with_blocking_streams():
    f = fake()
    c0 = f.primary_ctx(0)
    p = f.alloc(4)
    blocking = f.stream()  # CU_STREAM_DEFAULT flags, like CuPy's Stream()
    f.launch_write(blocking, p, b"blk.")
    q = f.alloc(4)
    push(f, c0)
    # Work on the legacy stream waits for blocking streams' earlier work:
    # waiting for that work lands theirs.
    f.launch_write(LEGACY, q, b"leg.")
    assert f.lib.cuStreamSynchronize(vp(LEGACY)) == 0 and f.read(p, 4) == b"blk."
    # And a blocking stream's later work waits for the legacy stream's.
    f.launch_write(LEGACY, p, b"leg.")
    f.launch_write(blocking, q, b"blk.")
    assert f.lib.cuStreamSynchronize(vp(blocking)) == 0 and f.read(p, 4) == b"leg."
    # A legacy-stream sync with no legacy work after it does not cover it.
    f.launch_write(blocking, p, b"late")
    assert f.lib.cuStreamSynchronize(vp(LEGACY)) == 0 and f.read(p, 4) == b"leg."
    # Per device: device 1's legacy stream does not wait for device 0's streams.
    c1 = f.primary_ctx(1)
    f.launch_write(LEGACY, f.alloc(4, device=1), b"dev1", ctx=c1)
    push(f, c1)
    assert f.lib.cuStreamSynchronize(vp(LEGACY)) == 0 and f.read(p, 4) == b"leg."
    pop(f)
    pop(f)


def per_thread_default_stream_differs_per_thread():
    f = fake()
    c0 = f.primary_ctx(0)
    p = f.alloc(4)
    f.launch_write(PER_THREAD, p, b"main")  # this thread's per-thread stream
    assert f.pending(PER_THREAD) == 1
    assert in_thread(lambda: f.pending(PER_THREAD)) == 0  # another thread's is empty

    def sync_in_other_thread():
        push(f, c0)
        r = f.lib.cuStreamSynchronize(vp(PER_THREAD))
        pop(f)
        return r

    assert in_thread(sync_in_other_thread) == 0
    assert f.read(p, 4) == b"\0\0\0\0", "another thread's per-thread stream landed our work"
    push(f, c0)
    assert f.lib.cuStreamSynchronize(vp(PER_THREAD)) == 0 and f.read(p, 4) == b"main"
    pop(f)


def blocking_calls_hold_the_caller():
    f = fake()
    c0 = f.primary_ctx(0)
    f.close_gate()
    results = []

    def sync():
        push(f, c0)
        results.append(f.lib.cuCtxSynchronize())
        pop(f)

    t = threading.Thread(target=sync)
    t.start()
    while f.blocked() == 0:  # ctypes released the GIL around the call
        pass
    assert results == []
    f.open_gate()
    t.join()
    assert results == [0] and f.blocked() == 0 and f.gate_timeouts() == 0
    # A configured delay applies to every blocking call (not timed here).
    f.set_sync_delay(0.001)
    push(f, c0)
    assert f.lib.cuStreamSynchronize(vp(LEGACY)) == 0
    pop(f)


def limits_on_copy_arguments():
    f = fake()
    c0 = f.primary_ctx(0)
    push(f, c0)
    value, dev = ctypes.c_int(), ctypes.c_int()
    assert f.lib.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert f.lib.cuDeviceGetAttribute(ctypes.byref(value), 11, dev) == 0
    assert value.value == 2**31 - 1  # CU_DEVICE_ATTRIBUTE_MAX_PITCH of current GPUs
    # Pitches beyond the limit fail, even for one row; 1-D copies have none.
    big = 3 << 30
    a = f.alloc(big + 64)  # address space only: nothing is touched
    b = f.alloc(64)
    assert copy2d(f, a, b, 16, 2, big, 16) == CUDA_ERROR_INVALID_VALUE
    assert copy2d(f, a, b, 16, 1, big, 16) == CUDA_ERROR_INVALID_VALUE
    assert copy2d(f, a + big, b, 16, 1, 16, 16) == 0
    f.set_max_pitch(32)
    assert f.lib.cuDeviceGetAttribute(ctypes.byref(value), 11, dev) == 0 and value.value == 32
    assert copy2d(f, b, b, 8, 2, 40, 8) == CUDA_ERROR_INVALID_VALUE
    assert copy2d(f, b, b, 8, 2, 32, 8) == 0
    assert f.lib.cuMemcpyDtoDAsync_v2(vp(b), vp(a), 64, vp(LEGACY)) == 0
    # Widths over the pitch, ranges outside an allocation, zero-byte allocations.
    assert copy2d(f, b, b, 16, 2, 8, 16) == CUDA_ERROR_INVALID_VALUE
    assert f.lib.cuMemcpyDtoDAsync_v2(vp(b), vp(b + 8), 64, vp(LEGACY)) == CUDA_ERROR_INVALID_VALUE
    assert f.lib.cuStreamSynchronize(vp(LEGACY)) == 0  # the copies above were valid
    f.free(a)
    f.free(b)
    p = ctypes.c_ulonglong()
    assert f.lib.cuMemAlloc_v2(ctypes.byref(p), 0) == CUDA_ERROR_INVALID_VALUE
    f.set_memory_limit(1024)
    assert f.lib.cuMemAlloc_v2(ctypes.byref(p), 2048) == CUDA_ERROR_OUT_OF_MEMORY
    assert f.lib.cuMemAlloc_v2(ctypes.byref(p), 512) == 0
    assert f.lib.cuMemFree_v2(ctypes.c_ulonglong(p.value)) == 0
    assert f.lib.cuMemFree_v2(ctypes.c_ulonglong(p.value)) == CUDA_ERROR_INVALID_VALUE
    assert f.lib.cuEventCreate(ctypes.byref(vp()), 0x100) == CUDA_ERROR_INVALID_VALUE
    pop(f)


def error_names_are_the_real_ones():
    f = fake(init=False)
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    for code, expected in (
        (0, "CUDA_SUCCESS"),
        (1, "CUDA_ERROR_INVALID_VALUE"),
        (2, "CUDA_ERROR_OUT_OF_MEMORY"),
        (3, "CUDA_ERROR_NOT_INITIALIZED"),
        (101, "CUDA_ERROR_INVALID_DEVICE"),
        (201, "CUDA_ERROR_INVALID_CONTEXT"),
        (400, "CUDA_ERROR_INVALID_HANDLE"),
        (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
        (709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"),
    ):
        assert (
            f.lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value.decode() == expected
        )
        assert f.lib.cuGetErrorString(code, ctypes.byref(text)) == 0 and text.value
    assert f.lib.cuGetErrorName(12345, ctypes.byref(name)) == CUDA_ERROR_INVALID_VALUE
    assert name.value is None


def pointer_queries():
    f = fake()
    p = f.alloc(16, device=1)
    h = f.alloc(16, kind=KIND_HOST)
    value = ctypes.c_int()
    # cuPointerGetAttribute needs a context, cuPointerGetAttributes does not.
    assert f.lib.cuPointerGetAttribute(ctypes.byref(value), 9, ctypes.c_ulonglong(p)) == (
        CUDA_ERROR_INVALID_CONTEXT
    )
    kinds = (ctypes.c_int * 3)(2, 8, 9)
    mem, managed, ordinal = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_int()
    data = (vp * 3)(*(ctypes.addressof(x) for x in (mem, managed, ordinal)))
    for ptr, expected in ((p, (2, 0, 1)), (h + 8, (1, 0, 0)), (0x1000, (0, 0, -2))):
        assert f.lib.cuPointerGetAttributes(3, kinds, data, ctypes.c_ulonglong(ptr)) == 0
        assert (mem.value, managed.value, ordinal.value) == expected, ptr


def work_on_freed_memory_is_an_async_error():
    f = fake()
    p = f.alloc(8)
    side = f.stream()
    f.launch_write(side, p, b"gone")
    f.free(p)  # another library freed it without waiting
    push(f, f.primary_ctx(0))
    assert f.lib.cuStreamSynchronize(vp(side)) == CUDA_ERROR_ILLEGAL_ADDRESS
    assert f.sticky_error() == CUDA_ERROR_ILLEGAL_ADDRESS
    assert any("illegal address" in line for line in f.log())
    pop(f)


def forked_child_cannot_use_the_driver():
    f = fake()
    push(f, f.primary_ctx(0))
    pid = os.fork()
    if pid == 0:
        ev = vp()
        codes = (f.lib.cuEventCreate(ctypes.byref(ev), 0), f.lib.cuInit(0),
                 f.lib.cuStreamSynchronize(vp(LEGACY)))  # fmt: skip
        os._exit(0 if codes == (CUDA_ERROR_NOT_INITIALIZED,) * 3 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert f.lib.cuEventCreate(ctypes.byref(vp()), 0) == 0  # the parent is unaffected
    pop(f)
