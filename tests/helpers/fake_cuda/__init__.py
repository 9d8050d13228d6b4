"""The fake CUDA driver of the tests: build it, drive it, make CUDA objects on it.

``build(directory)`` compiles the C files ``SOURCES`` names with the system C compiler (or
copies the library ``DLPACKARRAY_FAKE_CUDA_PREBUILT`` names, compiled elsewhere: a
cross-compiled aarch64 build for a test run without a compiler, .ci/aarch64);
``FakeCuda(path)`` loads it (the same library the core dlopens when
``DLPACKARRAY_CUDA_DRIVER`` names it, so both see one state).
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import shutil
import subprocess

HERE = pathlib.Path(__file__).parent
# The translation units of the fake driver, in link order (state.h: what they share).
SOURCES = tuple(HERE / name for name in ("driver.c", "contexts.c", "memory.c", "streams.c"))

KIND_DEVICE, KIND_HOST, KIND_MANAGED = 0, 1, 2
CU_STREAM_NON_BLOCKING = 1
LEGACY, PER_THREAD = 1, 2  # CU_STREAM_LEGACY, CU_STREAM_PER_THREAD
COPY_CALLS = ("cuMemcpy2DAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync")
# Handles of created streams that scenarios write literally.
STANDARD_STREAMS = (0x5000, 0x6000, 0x7000, 0x7700, 0xABC0)

# cuda.h's cudaError_enum values the fake returns (README.md).
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NOT_INITIALIZED = 3
CUDA_ERROR_INVALID_DEVICE = 101
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_INVALID_HANDLE = 400
CUDA_ERROR_NOT_READY = 600
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_CONTEXT_IS_DESTROYED = 709


# The compiler flags of the fake driver (.ci/aarch64 cross-compiles it with the same).
FLAGS = ("-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-pthread")


def build(directory: os.PathLike) -> pathlib.Path:
    """Compiles the fake driver into ``directory``; raises when it cannot."""
    out = pathlib.Path(directory) / "libfakecuda.so"
    prebuilt = os.environ.get("DLPACKARRAY_FAKE_CUDA_PREBUILT")
    if prebuilt:
        # A copy per directory, as a build would give: each is a file of its own, so each
        # test module's driver keeps its own state (the loader shares one mapping per file).
        if not os.path.isfile(prebuilt):
            raise RuntimeError(f"DLPACKARRAY_FAKE_CUDA_PREBUILT={prebuilt}: no such file")
        shutil.copyfile(prebuilt, out)
        return out
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("no C compiler found to build the fake CUDA driver")
    subprocess.run(
        [cc, *FLAGS, "-o", str(out), *map(str, SOURCES)],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


class FakeCuda:
    def __init__(self, path: os.PathLike):
        self.lib = ctypes.CDLL(str(path))
        self.lib.fake_log.restype = ctypes.c_char_p
        self.lib.fake_alloc.restype = ctypes.c_void_p
        self.lib.fake_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
        for name in ("fake_write", "fake_read"):
            getattr(self.lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        self.lib.fake_free.argtypes = [ctypes.c_void_p]
        lib = self.lib
        for name in ("fake_new_event", "fake_new_event_in", "fake_primary_ctx", "fake_ctx_create",
                     "fake_stream_create", "fake_current_ctx"):  # fmt: skip
            getattr(lib, name).restype = ctypes.c_void_p
        lib.fake_new_event_in.argtypes = [ctypes.c_void_p]
        lib.fake_ctx_destroy.argtypes = [ctypes.c_void_p]
        lib.fake_stream_create.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t]
        lib.fake_launch_write.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_size_t]
        lib.fake_pending.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.fake_pending.restype = ctypes.c_long
        lib.fake_pending_total.restype = ctypes.c_long
        lib.fake_sticky_error.argtypes = [ctypes.c_void_p]
        lib.fake_set_sync_delay_us.argtypes = [ctypes.c_long]
        lib.fake_set_max_pitch.argtypes = [ctypes.c_longlong]
        lib.fake_set_gate_timeout_ms.argtypes = [ctypes.c_long]
        lib.fake_set_copy_data_limit.argtypes = [ctypes.c_size_t]
        lib.fake_set_memory_limit.argtypes = [ctypes.c_size_t]

    def fail_next(self, name: str, code: int = 1, skip: int = 0) -> None:
        """Makes the next call of entry point ``name`` (after ``skip`` more that
        succeed) return ``code``."""
        self.lib.fake_fail_after(name.encode(), code, skip)

    def log(self) -> list[str]:
        return self.lib.fake_log().decode().splitlines()

    def calls(self, *names: str) -> list[str]:
        """Logged lines whose entry point is one of ``names`` (all when none)."""
        return [line for line in self.log() if not names or line.split()[0] in names]

    def copies(self) -> list[dict]:
        """The logged copies (2-D and 1-D), each as a dict of its fields with
        ``bytes``: the bytes it moves."""
        out = []
        for line in self.calls(*COPY_CALLS):
            kv = dict(item.split("=") for item in line.split()[1:])
            kv["call"] = line.split()[0]
            if "n" in kv:
                kv["bytes"] = int(kv["n"])
            else:
                kv["bytes"] = int(kv["width"]) * int(kv["height"])
            out.append(kv)
        return out

    def moved(self) -> int:
        """Bytes moved by the logged copies."""
        return sum(c["bytes"] for c in self.copies())

    def clear(self) -> None:
        self.lib.fake_log_clear()

    def alloc(self, nbytes: int, kind: int = KIND_DEVICE, device: int = 0) -> int:
        p = self.lib.fake_alloc(nbytes, kind, device)
        assert p, "fake_alloc failed"
        return p

    def free(self, ptr: int) -> None:
        """Frees a fake_alloc allocation at once, waiting for nothing (as a caching
        allocator hands a block on): work still pending on it faults later."""
        assert self.lib.fake_free(ptr) == 0

    def write(self, ptr: int, data: bytes) -> None:
        assert self.lib.fake_write(ptr, data, len(data)) == 0

    def read(self, ptr: int, n: int) -> bytes:
        buf = ctypes.create_string_buffer(n)
        assert self.lib.fake_read(buf, ptr, n) == 0
        return buf.raw

    def live_allocations(self) -> int:
        return self.lib.fake_live_allocations()

    def live_events(self) -> int:
        """Events created (by the driver or new_event) and not yet destroyed."""
        return self.lib.fake_live_events()

    def new_event(self, device: int = 0, ctx: int | None = None) -> int:
        """A live event handle, as another library's cuEventCreate would make, in
        ``ctx`` (default: device ``device``'s primary context)."""
        return self.lib.fake_new_event_in(ctx if ctx is not None else self.primary_ctx(device))

    # -- contexts, streams, pending work (README.md: the model) -------------------------
    def primary_ctx(self, device: int = 0) -> int:
        """Device ``device``'s primary context handle (what CUDA runtimes use)."""
        return self.lib.fake_primary_ctx(device)

    def create_ctx(self, device: int = 0) -> int:
        """A non-primary context on ``device`` (another library's cuCtxCreate)."""
        return self.lib.fake_ctx_create(device)

    def destroy_ctx(self, ctx: int) -> None:
        assert self.lib.fake_ctx_destroy(ctx) == 0

    def current_ctx(self) -> int | None:
        """The calling thread's current context (None: none)."""
        return self.lib.fake_current_ctx()

    def ctx_depth(self) -> int:
        """Depth of the calling thread's context stack."""
        return self.lib.fake_ctx_depth()

    def stream(self, handle: int = 0, device: int = 0, flags: int = 0, ctx: int | None = None):
        """A created stream (another library's cuStreamCreate) in ``ctx`` (default:
        ``device``'s primary context); ``handle`` picks its value (0: the fake's
        choice).  ``flags=CU_STREAM_NON_BLOCKING``: no implicit synchronisation
        with the legacy stream, like torch's side streams."""
        ctx = ctx if ctx is not None else self.primary_ctx(device)
        h = self.lib.fake_stream_create(ctx, flags, handle)
        assert h, f"fake_stream_create({handle:#x}) failed"
        return h

    def standard_streams(self, device: int = 0, handles=STANDARD_STREAMS) -> None:
        """Creates the stream handles scenarios name literally (0x5000, ...) in
        ``device``'s primary context, blocking like CuPy's default streams; a
        handle that already exists is kept."""
        for h in handles:
            self.lib.fake_stream_create(self.primary_ctx(device), 0, h)

    def launch_write(self, stream: int, ptr: int, data: bytes, device: int = 0, ctx=None) -> None:
        """Enqueues a "kernel" writing ``data`` at ``ptr`` on ``stream`` (1, 2 or a
        handle; 1 and 2 name this thread's streams of ``ctx``/``device``'s
        primary context).  The bytes land when something waits for the stream."""
        ctx = ctx if ctx is not None else self.primary_ctx(device)
        r = self.lib.fake_launch_write(ctx, stream, ptr, data, len(data))
        assert r == 0, f"fake_launch_write: CUDA error {r}"

    def pending(self, stream: int, device: int = 0, ctx=None) -> int:
        """Operations not yet run on ``stream`` (as in launch_write)."""
        ctx = ctx if ctx is not None else self.primary_ctx(device)
        n = self.lib.fake_pending(ctx, stream)
        assert n >= 0, f"unknown stream {stream:#x}"
        return n

    def pending_total(self) -> int:
        return self.lib.fake_pending_total()

    def sticky_error(self, device: int = 0, ctx=None) -> int:
        """The asynchronous error a context holds (0: none), e.g. 700 when work ran
        on memory freed before it."""
        return self.lib.fake_sticky_error(ctx if ctx is not None else self.primary_ctx(device))

    def set_sync_delay(self, seconds: float) -> None:
        """Every blocking call (stream, event, context synchronisation, cuMemFree)
        holds its caller this long after the work landed."""
        self.lib.fake_set_sync_delay_us(int(seconds * 1e6))

    def close_gate(self) -> None:
        """Blocking calls wait until open_gate() (or 30 s, counted in gate_timeouts())."""
        self.lib.fake_gate_close()

    def set_gate_timeout(self, seconds: float) -> None:
        """How long a closed gate holds a caller at most (default 30 s)."""
        self.lib.fake_set_gate_timeout_ms(int(seconds * 1000))

    def set_copy_data_limit(self, nbytes: int) -> None:
        """Copies moving more bytes are checked and logged but move nothing (tests
        that describe arrays of several GiB)."""
        self.lib.fake_set_copy_data_limit(nbytes)

    def open_gate(self) -> None:
        self.lib.fake_gate_open()

    def blocked(self) -> int:
        """Threads now inside a blocking driver call."""
        return self.lib.fake_blocked()

    def gate_timeouts(self) -> int:
        return self.lib.fake_gate_timeouts()

    def set_max_pitch(self, nbytes: int) -> None:
        """CU_DEVICE_ATTRIBUTE_MAX_PITCH: copies with a larger pitch fail."""
        self.lib.fake_set_max_pitch(nbytes)

    def set_memory_limit(self, nbytes: int) -> None:
        """cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY beyond this many live bytes."""
        self.lib.fake_set_memory_limit(nbytes)

    def device_array(self, host_array, kind: int = KIND_DEVICE, device: int = 0) -> int:
        """A fake allocation holding a copy of ``host_array``'s bytes; returns its address."""
        raw = host_array.tobytes()  # C order
        p = self.alloc(max(len(raw), 1), kind, device)
        if raw:
            self.write(p, raw)
        return p


class CudaArrayInterface:
    """A plain object exposing ``__cuda_array_interface__`` (like Numba/CuPy arrays)."""

    def __init__(self, **fields):
        self.__cuda_array_interface__ = fields


def cai(ptr, shape, typestr="<f4", strides=None, stream=None, version=3, readonly=False, **more):
    fields = {
        "shape": tuple(shape),
        "typestr": typestr,
        "data": (ptr, readonly),
        "strides": strides,
        "version": version,
        "descr": [("", typestr)],
    }
    if version >= 3:
        fields["stream"] = stream
    fields.update(more)
    return CudaArrayInterface(**fields)
