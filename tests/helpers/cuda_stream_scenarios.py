"""Stream-semantics scenarios on the fake driver's pending-work model.

tests/cuda/test_cuda_streams.py runs each function in a child interpreter whose
DLPACKARRAY_CUDA_DRIVER names the fake driver.  Producers are the torch-like
and CuPy-like fakes of tests/helpers/cuda_fakes.py with work pending on a
non-blocking side stream: a consumer that reads before the right
synchronisation sees the old bytes (zeros) instead of the new ones.
"""

from __future__ import annotations

import gc
import os
import pathlib
import re
import sys
import threading
import weakref

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "fake_cuda")]

import numpy as np  # noqa: E402
from cuda_fakes import LEGACY, Driver, FakeCupy, FakeTorch, install  # noqa: E402
from fake_cuda import KIND_HOST, KIND_MANAGED, FakeCuda, cai  # noqa: E402

import dlpackarray  # noqa: E402
from dlpackarray import DLDeviceType, DLPackArray  # noqa: E402

N = 8
ONES = [1.0] * N
ONES_BYTES = np.ones(N, np.float32).tobytes()


def fake() -> FakeCuda:
    return FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])


def _torch_tensor_pending(torch, *, pinned=False):
    """A torch-like tensor filled with ones on a side stream, still pending."""
    side = torch.cuda.Stream()
    t = torch.zeros(N, device="cpu", pin_memory=True) if pinned else None
    with torch.cuda.stream(side):
        if t is None:
            t = torch.zeros(N)
        t.fill_(1.0)
    return t, side


def _values(ptr, f, stream):
    """What a kernel on ``stream`` reads at ``ptr``: the bytes once the stream's
    own work (and what it waits for) has run."""
    Driver(f).synchronize(stream)
    return np.frombuffer(f.read(ptr, 4 * N), np.float32).tolist()


# -- 1. foreign producers ------------------------------------------------------------------------
def torch_producer_wrapped_then_torch_consumer():
    f = fake()
    torch = FakeTorch(f)
    t, side = _torch_tensor_pending(torch)
    with torch.cuda.stream(side):
        d = DLPackArray(t)  # no stream given: torch alone would order nothing
    assert f.pending_total() > 0, "the fill ran early: the test would prove nothing"
    other = torch.cuda.Stream()
    with torch.cuda.stream(other):
        u = torch.from_dlpack(d)
        assert u.cpu().tolist() == ONES


def torch_producer_wrapped_then_cupy_consumer():
    f = fake()
    torch, cupy = FakeTorch(f), FakeCupy(f)
    t, side = _torch_tensor_pending(torch)
    with torch.cuda.stream(side):
        d = DLPackArray(t)
    with cupy.cuda.Stream(non_blocking=True):
        c = cupy.from_dlpack(d)
        assert cupy.asnumpy(c).tolist() == ONES


def torch_producer_through_cuda_array_interface():
    f = fake()
    torch, cupy = FakeTorch(f), FakeCupy(f)
    t, side = _torch_tensor_pending(torch)
    with torch.cuda.stream(side):
        d = DLPackArray(t)
    assert d.__cuda_array_interface__["stream"] == LEGACY
    with cupy.cuda.Stream(non_blocking=True):
        c = cupy.asarray(d)  # CAI v3: CuPy's stream waits on the reported one
        assert cupy.asnumpy(c).tolist() == ONES


def torch_producer_with_consumer_streams():
    """Every stream value a user may give, on a torch-like producer (which
    refuses 2): the data is ready on that stream afterwards."""
    f = fake()
    torch = FakeTorch(f)
    for value in (1, 2, "handle"):
        t, side = _torch_tensor_pending(torch)
        stream = f.stream(flags=1) if value == "handle" else value
        with torch.cuda.stream(side):
            d = DLPackArray(t, stream=stream)
        assert _values(d.data_ptr, f, stream) == ONES, value
    # -1: the consumer takes charge; nothing is ordered, so it is still pending.
    t, side = _torch_tensor_pending(torch)
    with torch.cuda.stream(side):
        d = DLPackArray(t, stream=-1)
    assert d.__cuda_array_interface__["stream"] is None
    assert _values(d.data_ptr, f, LEGACY) == [0.0] * N


def cupy_producer_wrapped_then_torch_consumer():
    f = fake()
    torch, cupy = FakeTorch(f), FakeCupy(f)
    with cupy.cuda.Stream(non_blocking=True):
        c = cupy.zeros(N)
        cupy.launch(c.ptr, ONES_BYTES)
        d = DLPackArray(c)
        d2 = DLPackArray(c, stream=2)  # CuPy would take 2: asked with 1 all the same
    assert d.__cuda_array_interface__["stream"] == LEGACY
    other = torch.cuda.Stream()
    with torch.cuda.stream(other):
        assert torch.from_dlpack(d).cpu().tolist() == ONES
    assert _values(d2.data_ptr, f, 2) == ONES


def pinned_torch_tensor_to_numpy():
    f = fake()
    torch = FakeTorch(f)
    t, side = _torch_tensor_pending(torch, pinned=True)
    d = DLPackArray(t)  # torch takes no stream for pinned memory: the device is synchronised
    assert d.device == (DLDeviceType.CPU_PINNED, 0)
    assert np.from_dlpack(d).tolist() == ONES


def pinned_torch_tensor_with_a_stream():
    # torch raises AssertionError for a stream on pinned memory: dlpackarray
    # never passes one, so the user's stream works.
    f = fake()
    torch = FakeTorch(f)
    for stream in (1, 2, f.stream(flags=1)):
        t, side = _torch_tensor_pending(torch, pinned=True)
        d = DLPackArray(t, stream=stream)
        assert np.asarray(d).tolist() == ONES
        assert dlpackarray.from_dlpack(t, stream=stream).tolist() == ONES


# -- 2. pinned and managed memory read by the host ----------------------------------------------
def pinned_and_managed_exports_to_the_host_wait():
    f = fake()
    cupy = FakeCupy(f)
    reads = {
        "np.from_dlpack": np.from_dlpack,
        "buffer protocol": lambda a: np.asarray(memoryview(a)),
        "__array_interface__": lambda a: np.asarray(a),
        "tolist": lambda a: a.tolist(),
    }
    for kind in (KIND_HOST, KIND_MANAGED):
        for name, read in reads.items():
            # A CUDA array interface ready on a side stream with a pending kernel.
            side = f.stream(flags=1)
            p = f.alloc(4 * N, kind=kind)
            f.write(p, bytes(4 * N))
            f.launch_write(side, p, ONES_BYTES)
            x = DLPackArray(cai(p, (N,), stream=side))
            got = np.asarray(read(x)).tolist()
            assert got == ONES, (kind, name, got)
    # A CuPy-like managed array produced on a side stream, through DLPack (CuPy
    # orders its current stream: the one the array was produced on).
    with cupy.cuda.Stream(non_blocking=True):
        for name, read in reads.items():
            c = cupy.zeros(N, managed=True)
            cupy.launch(c.ptr, ONES_BYTES)
            assert np.asarray(read(DLPackArray(c))).tolist() == ONES, name


# -- 3. the per-thread default stream ----------------------------------------------------------
def per_thread_stream_is_resolved_per_thread():
    f = fake()
    p = f.alloc(4 * N)
    box = {}

    def producer():
        # Another library in thread A: a kernel on A's per-thread stream, exported
        # through the CUDA array interface with stream 2.
        f.launch_write(2, p, ONES_BYTES)
        box["x"] = DLPackArray(cai(p, (N,), stream=2))

    a = threading.Thread(target=producer)
    a.start()
    a.join()
    # Thread B (this one) consumes on its own per-thread stream.
    box["x"].__dlpack__(stream=2, max_version=(1, 3))
    assert _values(p, f, 2) == ONES


def per_thread_consumer_stream_given_in_another_thread():
    f = fake()
    side = f.stream(flags=1)
    p = f.alloc(4 * N)
    f.launch_write(side, p, ONES_BYTES)
    x = DLPackArray(cai(p, (N,), stream=side))
    box = {}
    # Thread B imports for its per-thread stream; this thread exports for its own.
    b = threading.Thread(target=lambda: box.setdefault("y", DLPackArray(x, stream=2)))
    b.start()
    b.join()
    box["y"].__dlpack__(stream=2, max_version=(1, 3))
    assert _values(p, f, 2) == ONES


# -- 7. the source of a pending device copy -------------------------------------------------------
class _OwnedDeviceArray:
    """A CUDA array interface object that frees its memory when it dies."""

    def __init__(self, f, stream):
        self.f, self.p = f, f.alloc(4 * N)
        self.__cuda_array_interface__ = cai(self.p, (N,), stream=stream).__cuda_array_interface__

    def __del__(self):
        self.f.lib.fake_free(self.p)


def device_copy_keeps_its_source_alive():
    f = fake()
    side = f.stream(flags=1)
    src = _OwnedDeviceArray(f, side)
    f.launch_write(side, src.p, ONES_BYTES)  # the copy queues behind this
    x = DLPackArray(src)[::2]
    cap = x.__dlpack__(max_version=(1, 3), copy=True, stream=side)
    alive = weakref.ref(src)
    del x, src
    gc.collect()
    assert alive() is not None, "the copy's source was released while the copy was pending"
    y = DLPackArray(cap, stream=side)
    assert np.asarray(DLPackArray(y, device="cpu")).tolist() == [1.0] * (N // 2)
    assert f.sticky_error() == 0
    del y, cap
    gc.collect()
    assert alive() is None, "the source outlived the copy"


def arrow_device_copy_keeps_its_source_alive():
    f = fake()
    side = f.stream(flags=1)
    src = _OwnedDeviceArray(f, side)
    f.launch_write(side, src.p, ONES_BYTES)
    x = DLPackArray(src)[::2]  # gaps: the Arrow export copies on the device
    pair = x.__arrow_c_device_array__()
    alive = weakref.ref(src)
    del x, src
    gc.collect()
    assert alive() is not None, "the Arrow copy's source was released while the copy was pending"

    class Pair:
        def __init__(self, pair):
            self.pair = pair

        def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
            return self.pair

    holder = Pair(pair)
    y = DLPackArray(holder)  # waits on the export's sync event, after the copy
    assert np.asarray(DLPackArray(y, device="cpu")).tolist() == [1.0] * (N // 2)
    assert f.sticky_error() == 0
    del y, pair, holder
    gc.collect()
    assert alive() is None, "the source outlived the Arrow copy"


# -- 9. CAI export when nothing is pending --------------------------------------------------------
def cai_reports_no_stream_when_nothing_is_pending():
    f = fake()
    cupy = FakeCupy(f)
    p = f.alloc(4 * N)
    x = DLPackArray(cai(p, (N,), stream=None))
    assert x.__cuda_array_interface__["stream"] is None
    f.clear()
    with cupy.cuda.Stream(non_blocking=True):
        cupy.asarray(x)
    assert not f.calls("cuEventRecord", "cuStreamWaitEvent"), f.log()
    # Something pending: the stream it is ready on.
    side = f.stream(flags=1)
    assert DLPackArray(cai(p, (N,), stream=side)).__cuda_array_interface__["stream"] == side


# -- docs/cuda.md ----------------------------------------------------------------------------------
def docs_worked_example():
    f = fake()
    install(f)
    text = (HERE.parents[1] / "docs" / "cuda.md").read_text()
    blocks = re.findall(r"<!-- worked-example -->\s*```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/cuda.md must hold exactly one worked example"
    exec(compile(blocks[0], "docs/cuda.md (worked example)", "exec"), {"__name__": "example"})
    assert f.sticky_error() == 0


def docs_streams_page_example():
    """docs/cuda_streams.md's example runs on the fakes; without its a.synchronize()
    (step 6) the last read sees the first kernel's values, as the page says."""
    text = (HERE.parents[1] / "docs" / "cuda_streams.md").read_text()
    blocks = re.findall(r"<!-- streams-example -->\s*```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/cuda_streams.md must hold exactly one example"
    code = blocks[0]
    f = fake()
    install(f)
    exec(compile(code, "docs/cuda_streams.md", "exec"), {"__name__": "example"})
    assert f.sticky_error() == 0

    assert code.count("a.synchronize()") == 1
    unsynchronised = code.replace("a.synchronize()", "pass")
    last = next(n for n, line in enumerate(code.splitlines(), 1) if "[2.0] * 1024" in line)
    install(f)
    try:
        exec(compile(unsynchronised, "unsynchronised", "exec"), {"__name__": "example"})
    except AssertionError as exc:
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        assert tb.tb_lineno == last, f"failed at line {tb.tb_lineno}, expected {last}"
    else:
        raise AssertionError("the example passes without a.synchronize(): the fake missed it")


# -- the class: any producer, import stream and consumer -----------------------------------------
def random_routes_never_read_early():
    """Property: whatever the producer (torch-like, CuPy-like, a CUDA array
    interface), its memory (device, pinned, managed), the stream given at
    import and the consumer, the consumer reads the producer's finished data."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    f = fake()
    torch, cupy = FakeTorch(f), FakeCupy(f)
    host_kinds = (KIND_HOST, KIND_MANAGED)

    def produce(producer, kind):
        """Ones pending on a side stream; returns (object, side stream, wrap context)."""
        if producer == "torch":
            t, side = _torch_tensor_pending(torch, pinned=kind == KIND_HOST)
            return t, lambda: torch.cuda.stream(side)
        if producer == "cupy":
            s = cupy.cuda.Stream(non_blocking=True)
            with s:
                c = cupy.zeros(N, managed=kind == KIND_MANAGED)
                cupy.launch(c.ptr, ONES_BYTES)
            return c, lambda: s
        side = f.stream(flags=1)
        p = f.alloc(4 * N, kind=kind)
        f.write(p, bytes(4 * N))
        f.launch_write(side, p, ONES_BYTES)
        return cai(p, (N,), stream=side), lambda: cupy.using(0)

    def consume(consumer, d, kind):
        if consumer == "torch":
            with torch.cuda.stream(torch.cuda.Stream()):
                return torch.from_dlpack(d).cpu().tolist()
        if consumer in ("cupy", "cupy-cai"):
            with cupy.cuda.Stream(non_blocking=True):
                c = cupy.from_dlpack(d) if consumer == "cupy" else cupy.asarray(d)
                return cupy.asnumpy(c).tolist()
        if consumer == "numpy" and kind in host_kinds:
            return np.from_dlpack(d).tolist()
        if consumer == "buffer" and kind in host_kinds:
            return np.asarray(memoryview(d)).tolist()
        return np.asarray(DLPackArray(d, device="cpu")).tolist()

    @settings(max_examples=80, deadline=None, database=None)
    @given(
        producer=st.sampled_from(["torch", "cupy", "cai"]),
        kind=st.sampled_from([0, KIND_HOST, KIND_MANAGED]),
        stream=st.sampled_from([None, 1, 2, "handle"]),
        consumer=st.sampled_from(["torch", "cupy", "cupy-cai", "numpy", "buffer", "host"]),
        reexport=st.booleans(),
    )
    def check(producer, kind, stream, consumer, reexport):
        if producer == "torch" and kind == KIND_MANAGED:
            kind = 0  # torch makes no managed memory
        if producer == "cupy" and kind == KIND_HOST:
            kind = KIND_MANAGED  # CuPy arrays are device or managed memory
        if kind == KIND_HOST and consumer in ("cupy", "cupy-cai"):
            consumer = "numpy"  # CuPy imports no pinned memory
        obj, wrap_ctx = produce(producer, kind)
        s = f.stream(flags=1) if stream == "handle" else stream
        with wrap_ctx():
            d = DLPackArray(obj, stream=s)
        if reexport:
            d = DLPackArray(d.__dlpack__(max_version=(1, 3), stream=s), stream=s)
        got = consume(consumer, d, kind)
        assert got == ONES, (producer, kind, stream, consumer, reexport, got)

    check()
    assert f.sticky_error() == 0
