"""The fake CUDA driver of the tests: build it, drive it, make CUDA objects on it.

``build(directory)`` compiles ``fake_cuda.c`` with the system C compiler;
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
SOURCE = HERE / "fake_cuda.c"

KIND_DEVICE, KIND_HOST, KIND_MANAGED = 0, 1, 2


def build(directory: os.PathLike) -> pathlib.Path:
    """Compiles the fake driver into ``directory``; raises when it cannot."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("no C compiler found to build the fake CUDA driver")
    out = pathlib.Path(directory) / "libfakecuda.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(out), str(SOURCE)],
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
        self.lib.fake_new_event.restype = ctypes.c_void_p

    def fail_next(self, name: str, code: int = 1) -> None:
        """Makes the next call of entry point ``name`` return ``code``."""
        self.lib.fake_fail_next(name.encode(), code)

    def log(self) -> list[str]:
        return self.lib.fake_log().decode().splitlines()

    def calls(self, *names: str) -> list[str]:
        """Logged lines whose entry point is one of ``names`` (all when none)."""
        return [line for line in self.log() if not names or line.split()[0] in names]

    def clear(self) -> None:
        self.lib.fake_log_clear()

    def alloc(self, nbytes: int, kind: int = KIND_DEVICE, device: int = 0) -> int:
        p = self.lib.fake_alloc(nbytes, kind, device)
        assert p, "fake_alloc failed"
        return p

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

    def new_event(self) -> int:
        """A live event handle, as another library's cuEventCreate would make."""
        return self.lib.fake_new_event()

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
