"""A torch-like and a CuPy-like CUDA library on the fake driver (tests/helpers/fake_cuda).

Each follows its library's stream rules for the DLPack and CUDA array
interface protocols (read from torch 2.13's ``torch/_tensor.py`` and
``torch/utils/dlpack.py`` and CuPy's ``cupy/_core/core.pyx``; no code copied):

torch, producer (``Tensor.__dlpack__``): ``stream`` defaults to -1 (no
synchronisation).  CUDA tensors: ``None`` and 1 mean the default (legacy)
stream, 2 raises BufferError, 0 raises AssertionError, other values are
stream handles; unless -1, the given stream waits on an event recorded on
torch's *current* stream when the two differ.  CPU tensors, pinned ones
included (reported as ``CUDA_HOST``): any stream but None and -1 raises
AssertionError, and nothing is synchronised.  Consumer
(``torch.from_dlpack``): ``__dlpack_device__()`` first; for CUDA data it
passes its current stream (1 when that is the default stream).

CuPy, producer (``ndarray.__dlpack__``): ``stream`` None means the legacy
stream, 0 is taken as legacy (with a warning), values below -1 raise
ValueError, -1 synchronises nothing; otherwise the stream waits on an event
recorded on CuPy's current stream (the legacy stream when that is the null
stream) when they differ.  ``__cuda_array_interface__`` (v3) reports the
current stream (1 for the null stream).  Consumer (``cupy.from_dlpack``):
passes its current stream (1 for the null stream).

Both keep a current stream per thread, as the libraries do.  Kernels are the
fake driver's ``launch_write``: their bytes land only once something waits
for their stream.  ``install()`` makes ``import torch`` / ``import cupy``
return these fakes (for running docs/cuda.md's example in a child process).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
import types
import warnings

import dlpack_ctypes as dc
import numpy as np

KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 2, 3, 13
LEGACY = 1
NON_BLOCKING = 1  # CU_STREAM_NON_BLOCKING: torch's and CuPy's created streams


class Driver:
    """Driver calls "another library" makes, in device 0's primary context."""

    def __init__(self, f):
        self.f = f
        lib = f.lib
        lib.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
        lib.cuCtxPopCurrent_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.cuEventCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        lib.cuEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.cuStreamWaitEvent.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
        lib.cuEventDestroy_v2.argtypes = [ctypes.c_void_p]
        lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        self.lib = lib
        assert lib.cuInit(0) == 0  # as the library's runtime does on first use

    @contextlib.contextmanager
    def context(self, device=0):
        assert self.lib.cuCtxPushCurrent_v2(self.f.primary_ctx(device)) == 0
        try:
            yield
        finally:
            assert self.lib.cuCtxPopCurrent_v2(None) == 0

    def order(self, ready: int, consumer: int, device=0) -> None:
        """``consumer`` waits for the work on ``ready`` (event record + wait)."""
        with self.context(device):
            ev = ctypes.c_void_p()
            assert self.lib.cuEventCreate(ctypes.byref(ev), 2) == 0
            assert self.lib.cuEventRecord(ev, ready) == 0
            assert self.lib.cuStreamWaitEvent(consumer, ev, 0) == 0
            assert self.lib.cuEventDestroy_v2(ev) == 0

    def synchronize(self, stream: int, device=0) -> None:
        with self.context(device):
            r = self.lib.cuStreamSynchronize(stream)
            assert r == 0, f"cuStreamSynchronize({stream:#x}) -> {r}"


class _Library:
    """What torch and CuPy share here: a current stream per thread, memory and
    kernels on the fake driver."""

    def __init__(self, f):
        self.f = f
        self.driver = Driver(f)
        self._tls = threading.local()

    def current(self) -> int:
        """The calling thread's current stream handle (0: the null/legacy stream)."""
        return getattr(self._tls, "stream", 0)

    @contextlib.contextmanager
    def using(self, handle: int):
        before = self.current()
        self._tls.stream = handle
        try:
            yield
        finally:
            self._tls.stream = before

    def new_stream(self) -> int:
        return self.f.stream(flags=NON_BLOCKING)

    def launch(self, ptr: int, data: bytes) -> None:
        """A kernel writing ``data`` at ``ptr`` on the current stream."""
        self.f.launch_write(self.current() or LEGACY, ptr, data)

    def read(self, ptr: int, nbytes: int, stream: int | None = None) -> bytes:
        """What a copy to the host on ``stream`` (default: current) reads: the
        stream's work is waited for, then the bytes are read."""
        stream = self.current() if stream is None else stream
        self.driver.synchronize(stream or LEGACY)
        return self.f.read(ptr, nbytes) if nbytes else b""


class _Array:
    """Float32 data in fake device or pinned memory, owned or borrowed."""

    def __init__(self, lib, ptr, n, device_type, keep=None):
        self.lib, self.ptr, self.n, self.device_type, self.keep = lib, ptr, n, device_type, keep

    def _capsule(self, versioned):
        p = dc.Producer(
            self,
            shape=(self.n,),
            strides=(1,),
            dtype=(dc.KDL_FLOAT, 32, 1),
            data=self.ptr,
            device=(self.device_type, 0),
            versioned=versioned,
            destructor=True,
        )
        return p.capsule()

    def _host_values(self, stream=None) -> list:
        raw = self.lib.read(self.ptr, 4 * self.n, stream)
        return np.frombuffer(raw, dtype=np.float32).tolist()


# -- torch --------------------------------------------------------------------------------------
class TorchTensor(_Array):
    @property
    def is_pinned(self):
        return self.device_type == KDL_CUDA_HOST

    def fill_(self, value):
        self.lib.launch(self.ptr, np.full(self.n, value, np.float32).tobytes())
        return self

    def cpu(self):
        """A host copy made on the current stream, which the host waits for."""
        return np.array(self._host_values(), dtype=np.float32)

    def tolist(self):
        return self._host_values()

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, *, stream=-1, max_version=None, dl_device=None, copy=None):
        if stream is not None and type(stream) is not int:
            raise TypeError("stream must be ``int`` or ``none``")
        if self.device_type == KDL_CUDA and stream != -1:
            if stream is None or stream == 1:
                target = 0  # torch.cuda.default_stream()
            elif stream == 2:
                raise BufferError("per-thread default stream is not supported.")
            elif stream == 0:
                raise AssertionError(f"unsupported stream on CUDA: {stream}.")
            else:
                target = stream  # torch.cuda.ExternalStream(stream)
            current = self.lib.current()
            if target != current:
                self.lib.driver.order(current or LEGACY, target or LEGACY)
        elif self.device_type == KDL_CUDA_HOST:  # a CPU tensor to torch
            if stream is not None and stream != -1:
                raise AssertionError("stream should be None on cpu.")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("this fake exports on its own device only")
        return self._capsule(max_version is not None and max_version[0] >= 1)


class FakeTorch(_Library):
    """The ``torch`` subset docs/cuda.md's example and the tests use."""

    float32 = "float32"

    def __init__(self, f):
        super().__init__(f)
        torch = self

        class Stream:
            def __init__(self):
                self.cuda_stream = torch.new_stream()

            def synchronize(self):
                torch.driver.synchronize(self.cuda_stream)

        class cuda:  # noqa: N801 -- the module's name
            @staticmethod
            def stream(s):
                return torch.using(s.cuda_stream)

            @staticmethod
            def current_stream():
                return types.SimpleNamespace(cuda_stream=torch.current())

            @staticmethod
            def synchronize():
                f.lib.cuCtxSynchronize.argtypes = []
                with torch.driver.context():
                    assert f.lib.cuCtxSynchronize() == 0

        cuda.Stream = Stream
        self.cuda = cuda

    def zeros(self, n, device="cuda", pin_memory=False):
        """Like torch.zeros: the memory is zero-filled by a kernel on the
        current stream (pinned memory: by the host, at once)."""
        if device == "cpu" and pin_memory:
            ptr = self.f.alloc(4 * n, kind=1)
            self.f.write(ptr, bytes(4 * n))
            return TorchTensor(self, ptr, n, KDL_CUDA_HOST)
        assert device == "cuda"
        t = TorchTensor(self, self.f.alloc(4 * n), n, KDL_CUDA)
        return t.fill_(0.0)

    def from_dlpack(self, ext):
        device = ext.__dlpack_device__()
        kwargs = {"max_version": (1, 0)}
        if device[0] == KDL_CUDA:
            kwargs["stream"] = self.current() or 1
        cap = ext.__dlpack__(**kwargs)
        fields = dc.tensor_fields(cap)
        return TorchTensor(self, fields["data"], fields["shape"][0], fields["device"][0], cap)


# -- CuPy ---------------------------------------------------------------------------------------
class CupyArray(_Array):
    def _stream_ptr(self):
        return self.lib.current() or LEGACY

    @property
    def __cuda_array_interface__(self):
        return {
            "shape": (self.n,),
            "typestr": "<f4",
            "descr": [("", "<f4")],
            "data": (self.ptr, False),
            "strides": None,
            "version": 3,
            "stream": self._stream_ptr(),
        }

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if stream is None:
            stream = LEGACY
        elif not isinstance(stream, int) or stream < -1:
            raise ValueError(
                f"On CUDA, the valid stream for the DLPack protocol is -1, 1, 2, or any larger "
                f"value, but {stream} was provided"
            )
        if stream == 0:
            warnings.warn("stream 0 passed: taken as the legacy stream", stacklevel=2)
            stream = LEGACY
        current = self._stream_ptr()
        if stream >= 0 and stream != current:
            self.lib.driver.order(current, stream)
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("unsupported device requested.")
        return self._capsule(max_version is not None and max_version[0] >= 1)


class FakeCupy(_Library):
    """The ``cupy`` subset docs/cuda.md's example and the tests use."""

    def __init__(self, f):
        super().__init__(f)
        cupy = self

        class Stream:
            def __init__(self, non_blocking=False):
                self.ptr = cupy.new_stream()
                self._using = None

            def __enter__(self):
                self._using = cupy.using(self.ptr)
                self._using.__enter__()
                return self

            def __exit__(self, *exc):
                return self._using.__exit__(*exc)

            def synchronize(self):
                cupy.driver.synchronize(self.ptr)

        self.cuda = types.SimpleNamespace(Stream=Stream)

    def zeros(self, n, managed=False):
        a = CupyArray(self, self.f.alloc(4 * n, kind=2 if managed else 0), n,
                      KDL_CUDA_MANAGED if managed else KDL_CUDA)  # fmt: skip
        self.launch(a.ptr, bytes(4 * n))
        return a

    def from_dlpack(self, ext):
        device = ext.__dlpack_device__()
        cap = ext.__dlpack__(stream=self.current() or LEGACY, max_version=(1, 0))
        fields = dc.tensor_fields(cap)
        return CupyArray(self, fields["data"], fields["shape"][0], device[0], cap)

    def asarray(self, obj):
        """Import through the CUDA array interface: the current stream waits for
        the interface's stream (CAI v3), unless it is None."""
        iface = obj.__cuda_array_interface__
        if iface.get("stream") is not None:
            self.driver.order(iface["stream"], self.current() or LEGACY)
        return CupyArray(self, iface["data"][0], iface["shape"][0], KDL_CUDA, obj)

    def asnumpy(self, a):
        """A host copy on the current stream, which the host waits for."""
        return np.array(a._host_values(), dtype=np.float32)


def install(f) -> tuple[FakeTorch, FakeCupy]:
    """Makes ``import torch`` and ``import cupy`` return the fakes."""
    torch, cupy = FakeTorch(f), FakeCupy(f)
    sys.modules["torch"] = torch  # type: ignore[assignment]
    sys.modules["cupy"] = cupy  # type: ignore[assignment]
    return torch, cupy
