"""Scenarios for dlpackarray's CUDA driver layer (GIL, copies, pointer queries,
contexts, driver errors),
each run by tests/cuda/test_cuda_driver_layer.py in a fresh child interpreter whose
DLPACKARRAY_CUDA_DRIVER names the fake driver (README.md: its model).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dlpackarray import DLDeviceType, DLPackArray  # noqa: E402
from fake_cuda import (  # noqa: E402
    CU_STREAM_NON_BLOCKING,
    KIND_HOST,
    FakeCuda,
    cai,
)

vp = ctypes.c_void_p


def fake() -> FakeCuda:
    return FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])


def host_copy(x) -> np.ndarray:
    return np.asarray(DLPackArray(x, device="cpu"))


def synchronize(f, stream, device=0, ctx=None) -> None:
    """What a consumer does before reading: waits for its stream."""
    assert f.lib.cuCtxPushCurrent_v2(vp(ctx or f.primary_ctx(device))) == 0
    r = f.lib.cuStreamSynchronize(vp(stream))
    assert f.lib.cuCtxPopCurrent_v2(None) == 0
    assert r == 0, f"cuStreamSynchronize: CUDA error {r}"


def expect(kind, text, action) -> str:
    try:
        action()
    except kind as e:
        assert text in str(e), (text, str(e))
        return str(e)
    raise AssertionError(f"no {kind.__name__} ({text!r})")


# -- item 4: the GIL is released around every blocking driver call -----------------------------
def _python_runs_while_blocked(f, action, what: str) -> None:
    """Runs ``action`` in a thread while the fake holds blocking calls at its gate;
    this thread must keep running Python meanwhile and open the gate itself."""
    f.set_gate_timeout(5)
    f.close_gate()
    failure = []

    def run():
        try:
            action()
        except BaseException as e:  # noqa: BLE001 -- reported below
            failure.append(e)

    t = threading.Thread(target=run)
    t.start()
    while f.blocked() == 0 and t.is_alive():
        pass
    held = f.blocked()
    steps = sum(range(10_000))  # Python work while the other thread waits in the driver
    f.open_gate()
    t.join()
    assert f.gate_timeouts() == 0, f"{what}: the GIL was held during a blocking driver call"
    assert held == 1 and steps and not failure, (what, held, failure)


def blocking_calls_release_the_gil():
    f = fake()
    f.standard_streams()
    src = np.arange(48, dtype=np.float32).reshape(4, 12)
    # Host read of pinned memory: cuStreamSynchronize on its ready stream.
    pinned = DLPackArray(cai(f.device_array(src, kind=KIND_HOST), src.shape, stream=0x5000))
    _python_runs_while_blocked(f, lambda: np.asarray(pinned), "host read of pinned memory")
    # Device-to-host copy: the copy's synchronisation.
    x = DLPackArray(cai(f.device_array(src), src.shape, stream=0x5000))
    _python_runs_while_blocked(f, lambda: host_copy(x[:, ::3]), "device-to-host copy")
    # A device copy's owner freed by the thread dropping it: cuMemFree.
    held = [DLPackArray(x[:, ::2].__dlpack__(max_version=(1, 3), copy=True))]
    _python_runs_while_blocked(f, held.clear, "freeing a device copy (cuMemFree)")
    gc.collect()
    assert f.live_allocations() == 2, "device copies leaked"


def arrow_release_releases_the_gil():
    import pyarrow  # noqa: F401 -- the Arrow export below needs it importable

    f = fake()
    f.standard_streams()
    src = np.arange(48, dtype=np.float32).reshape(4, 12)
    x = DLPackArray(cai(f.device_array(src), src.shape, stream=0x5000))
    # An Arrow export's device copy released from Python: cuMemFree.
    arrays = [x[:, ::2].__arrow_c_device_array__()]
    _python_runs_while_blocked(f, arrays.clear, "releasing an Arrow device copy")
    gc.collect()
    assert f.live_allocations() == 1, "the Arrow device copy leaked"


# -- item 5: copies within the driver's pitch limit, and over 2 GiB ------------------------------
def copies_respect_the_device_pitch_limit():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    f = fake()
    f.set_max_pitch(64)  # before the driver is first asked: it is asked once per device
    base = np.arange(6 * 10 * 12, dtype=np.int16).reshape(6, 10, 12)
    p = f.device_array(base)
    x = DLPackArray(cai(p, base.shape, typestr="<i2"))
    steps = st.sampled_from([1, 2, 3, -1, -2])

    @settings(max_examples=100, deadline=None, database=None)
    @given(s0=steps, s1=steps, s2=steps, perm=st.permutations([0, 1, 2]), lo=st.integers(0, 3),
           on_device=st.booleans())  # fmt: skip
    def check(s0, s1, s2, perm, lo, on_device):
        key = (slice(lo, None, s0) if s0 > 0 else slice(None, lo, s0), slice(None, None, s1),
               slice(None, None, s2))  # fmt: skip
        view, ref = x[key].transpose(perm), base[key].transpose(perm)
        f.clear()
        if on_device:
            view = DLPackArray(view.__dlpack__(max_version=(1, 3), copy=True))
        np.testing.assert_array_equal(host_copy(view), ref)
        for c in f.copies():
            if c["call"] == "cuMemcpy2DAsync":
                assert int(c["spitch"]) <= 64 and int(c["dpitch"]) <= 64, c
        assert not [line for line in f.log() if line.startswith("LIMIT")], f.log()

    check()
    assert f.calls("cuDeviceGetAttribute") == [], "the limit is asked once per device"


def copies_over_2_gib():
    f = fake()
    f.set_copy_data_limit(1 << 20)  # the GiB-sized copies move nothing here
    n = 3 << 30
    p = f.alloc(n)  # address space only
    x = DLPackArray(cai(p, (n,), typestr="|u1"))
    # Contiguous data: one 1-D copy, whatever its size.
    f.clear()
    cap = x.__dlpack__(max_version=(1, 3), copy=True)
    assert [(c["call"], c["bytes"]) for c in f.copies()] == [("cuMemcpyDtoDAsync", n)], f.log()
    del cap
    gc.collect()
    # Rows wider than the pitch limit: one 1-D copy per row.
    w = (2 << 30) + 64
    q = f.alloc(2 * w + 64)
    rows = DLPackArray(cai(q, (2, w), typestr="|u1", strides=(w + 32, 1)))
    f.clear()
    cap = rows.__dlpack__(max_version=(1, 3), copy=True)
    assert [(c["call"], c["bytes"]) for c in f.copies()] == [("cuMemcpyDtoDAsync", w)] * 2
    del cap
    gc.collect()
    # Rows a pitch over 2 GiB apart: split by rows, and the bytes arrive.
    pitch = 1 << 31
    r = f.alloc(2 * pitch + 16)
    for i in range(3):
        f.write(r + i * pitch, bytes(range(16 * i, 16 * i + 16)))
    apart = DLPackArray(cai(r, (3, 16), typestr="|u1", strides=(pitch, 1)))
    f.clear()
    np.testing.assert_array_equal(host_copy(apart), np.arange(48, dtype=np.uint8).reshape(3, 16))
    assert not [line for line in f.log() if line.startswith("LIMIT")], f.log()
    assert len(f.copies()) == 3


def failed_host_copies_leave_nothing_pending():
    # A copy to the host that fails part-way must not leave earlier copies
    # queued: the caller frees the host buffer when the error arrives.
    f = fake()
    f.standard_streams()
    f.set_max_pitch(16)  # rows of 24 bytes: one 1-D copy each
    src = np.arange(32, dtype=np.float32).reshape(4, 8)
    x = DLPackArray(cai(f.device_array(src), src.shape, stream=0x5000))[:, :6]
    cases = [("cuMemcpyDtoHAsync_v2", 1, 2), ("cuMemcpyDtoHAsync_v2", 1, 0),
             ("cuStreamSynchronize", 400, 0)]  # fmt: skip
    for entry, code, skip in cases:
        f.fail_next(entry, code, skip)
        expect(BufferError, "CUDA_ERROR", lambda: host_copy(x))
        assert f.pending_total() == 0, (entry, skip, f.log())
    f.clear()
    np.testing.assert_array_equal(host_copy(x), src[:, :6])
    assert len(f.calls("cuMemcpyDtoHAsync")) == 4


# -- item 6: the device of a pointer needs no current context -----------------------------------
def pointer_device_needs_no_current_context():
    f = fake()
    src = np.arange(4, dtype=np.float32)
    for device in (0, 1):
        p = f.device_array(src, device=device)
        f.clear()
        x = DLPackArray(cai(p, (4,)))
        assert x.device == (DLDeviceType.CUDA, device)
        assert f.calls("cuPointerGetAttributes") and not f.calls("cuCtxPushCurrent"), f.log()
        assert f.current_ctx() is None
    pinned = f.device_array(src, kind=KIND_HOST)
    assert DLPackArray(cai(pinned, (4,))).device == (DLDeviceType.CPU_PINNED, 0)
    # A pointer CUDA does not know, and a failing query naming the driver's error.
    expect(BufferError, "does not know the pointer", lambda: DLPackArray(cai(0x7000_0000, (4,))))
    f.fail_next("cuPointerGetAttributes", 201)
    expect(BufferError, "CUDA_ERROR_INVALID_CONTEXT", lambda: DLPackArray(cai(p, (4,))))
    f.fail_next("cuPointerGetAttributes", 999)
    expect(BufferError, "CUDA_ERROR_UNKNOWN", lambda: DLPackArray(cai(p, (4,))))


# -- item 8: events and streams of different contexts --------------------------------------------
def streams_of_other_contexts():
    f = fake()
    old = np.zeros(8, dtype=np.float32)
    new = np.arange(8, dtype=np.float32)
    # Pinned memory (reported as device 0) written by a kernel on device 1's stream.
    p = f.device_array(old, kind=KIND_HOST)
    s1 = f.stream(device=1, flags=CU_STREAM_NON_BLOCKING)
    f.launch_write(s1, p, new.tobytes(), device=1)
    x = DLPackArray(cai(p, (8,), stream=s1))
    consumer = f.stream(device=0, flags=CU_STREAM_NON_BLOCKING)
    f.clear()
    x.__dlpack__(max_version=(1, 3), stream=consumer)
    assert [line.split()[-1] for line in f.calls("cuEventCreate")] == ["dev=1"], f.log()
    assert not [line for line in f.log() if line.startswith("MISMATCH")], f.log()
    # Ordered on the device, not waited for by the host: nothing landed yet.
    assert f.read(p, 32) == old.tobytes() and f.pending(s1, device=1) > 0
    synchronize(f, consumer)  # the consumer's stream waited for device 1's work
    assert f.pending(s1, device=1) == 0 and f.read(p, 32) == new.tobytes()
    np.testing.assert_array_equal(np.asarray(x), new)
    # The host read of pinned memory waits in the stream's context too.
    f.launch_write(s1, p, old.tobytes(), device=1)
    np.testing.assert_array_equal(np.asarray(x), old)

    # Device memory whose producer used a context that is not primary.
    ctx = f.create_ctx(0)
    s = f.stream(ctx=ctx, flags=CU_STREAM_NON_BLOCKING)
    q = f.device_array(old)
    f.launch_write(s, q, new.tobytes(), ctx=ctx)
    y = DLPackArray(cai(q, (8,), stream=s))
    f.clear()
    np.testing.assert_array_equal(host_copy(y), new)  # copied on s, in s's context
    assert not [line for line in f.log() if line.startswith("MISMATCH")], f.log()
    f.launch_write(s, q, old.tobytes(), ctx=ctx)
    y.__dlpack__(max_version=(1, 3), stream=2)  # this thread's per-thread stream, device 0
    synchronize(f, 2)
    assert f.read(q, 32) == old.tobytes()
    # A device copy: allocated on the data's device, copied in the stream's context.
    f.launch_write(s, q, new.tobytes(), ctx=ctx)
    cap = y.__dlpack__(max_version=(1, 3), copy=True, stream=s)
    z = DLPackArray(cap, stream=-1)
    synchronize(f, s, ctx=ctx)
    np.testing.assert_array_equal(host_copy(DLPackArray(z.__dlpack__(max_version=(1, 3)))), new)

    # The Arrow sync event of pinned data ready on device 1's stream: made there.
    f.clear()
    _, array = x.__arrow_c_device_array__()
    assert [line.split()[-1] for line in f.calls("cuEventCreate")] == ["dev=1"], f.log()
    assert not [line for line in f.log() if line.startswith("MISMATCH")], f.log()
    del array


# -- item 9: out of memory, cuInit failures, fork -------------------------------------------------
def out_of_memory_is_memory_error():
    f = fake()
    src = np.arange(64, dtype=np.float32).reshape(8, 8)
    x = DLPackArray(cai(f.device_array(src), src.shape))
    before = f.live_allocations()
    f.set_memory_limit(16)
    text = expect(MemoryError, "CUDA_ERROR_OUT_OF_MEMORY",
                  lambda: x[:, ::2].__dlpack__(max_version=(1, 3), copy=True))  # fmt: skip
    assert "cuMemAlloc" in text
    expect(MemoryError, "CUDA_ERROR_OUT_OF_MEMORY", lambda: x[:, ::2].__arrow_c_device_array__())
    gc.collect()
    assert f.live_allocations() == before
    f.set_memory_limit(1 << 40)
    np.testing.assert_array_equal(
        host_copy(DLPackArray(x[:, ::2].__dlpack__(max_version=(1, 3), copy=True))), src[:, ::2]
    )


def failing_cuinit_names_the_error():
    f = fake()  # loaded, not initialised: dlpackarray's first use runs cuInit
    p = f.alloc(16)
    f.fail_next("cuInit", 100)
    text = expect(BufferError, "CUDA_ERROR_NO_DEVICE", lambda: DLPackArray(cai(p, (4,))))
    assert "cuInit" in text and "error 100" not in text, text


def forked_child_gets_a_clear_error():
    f = fake()
    src = np.arange(16, dtype=np.float32).reshape(4, 4)
    p = f.device_array(src)
    x = DLPackArray(cai(p, src.shape))  # the parent loads and initialises the driver
    copy = DLPackArray(x[:, ::2].__dlpack__(max_version=(1, 3), copy=True))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            outcome = "no error"
            try:
                DLPackArray(cai(p, src.shape))
            except BufferError as e:
                outcome = str(e)
            try:
                host_copy(x)
            except BufferError as e:
                outcome += " | " + str(e)
            del copy  # the inherited device copy's owner frees nothing, quietly
            gc.collect()
            os.write(w, outcome.encode())
        finally:
            os._exit(0)
    os.close(w)
    outcome = b""
    while chunk := os.read(r, 4096):
        outcome += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    first, second = outcome.decode().split(" | ")
    assert "fork()" in first and "fork()" in second, outcome
    # The parent is unaffected.
    np.testing.assert_array_equal(host_copy(copy), src[:, ::2])
