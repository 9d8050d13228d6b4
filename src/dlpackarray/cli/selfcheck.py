"""Environment report and live zero-copy self-checks for ``python -m dlpackarray``.

Every optional array library is imported lazily, inside its own check, and any
exception it raises (even from a broken installation) becomes a failed line:
the report is a diagnostic tool, so it must never die with a traceback.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import importlib.util
import json
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from dlpackarray.cli.packages import NEEDS_CUDA, cuda_driver_present, install_names, pypi_name

PASS = "pass"
FAIL = "fail"
SKIP = "skip"

#: Optional libraries reported on: (import name, distribution name).  CuPy's wheels carry
#: the CUDA version in their name; its version is found through its module (see
#: _distribution_version).
LIBRARIES: tuple[tuple[str, str], ...] = tuple(
    (name, "cupy" if name == "cupy" else pypi_name(name))
    for name in ("numpy", "torch", "jax", "jaxlib", "cupy", "pyarrow", "tvm_ffi", "ml_dtypes")
)


class CheckFailed(AssertionError):
    """A round trip gave a wrong result (copied data, wrong values or metadata)."""


class Skipped(Exception):
    """The check cannot run here (library missing, no device); not a failure."""


@dataclass
class CheckResult:
    """Outcome of one check: ``status`` is ``"pass"``, ``"fail"`` or ``"skip"``."""

    name: str
    library: str
    status: str
    detail: str = ""


@dataclass
class LibraryInfo:
    """Whether an optional library is installed, and its version."""

    name: str
    installed: bool
    version: str | None


@dataclass(frozen=True)
class Check:
    """A named self-check; ``func`` raises on failure and returns a detail string."""

    name: str
    library: str
    func: Callable[[], str]


# -- helpers ---------------------------------------------------------------------------------


def _import(name: str):
    """Import an optional library; a missing one skips the check, a broken one fails it."""
    if importlib.util.find_spec(name) is None:
        raise Skipped(f"{name} is not installed")
    return importlib.import_module(name)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def _same_pointer(got: int, expected: int, what: str) -> None:
    # Equal first-element addresses are the proof that no copy was made.
    _expect(
        got == expected,
        f"{what}: data pointer 0x{got:x} != 0x{expected:x} (data was copied)",
    )


def _addr(buffer) -> int:
    """Address of the first byte of a writable buffer-protocol object (stdlib only)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


def _first(a) -> int:
    """Address of a DLPackArray's first element."""
    return a.data_ptr + a.byte_offset


def _dla():
    import dlpackarray

    return dlpackarray


# -- stdlib sources --------------------------------------------------------------------------


def _check_bytearray() -> str:
    dla = _dla()
    buf = bytearray(range(16))
    a = dla.DLPackArray(buf)
    _expect(a.shape == (16,) and a.dtype == "uint8", f"unexpected view {a!r}")
    _same_pointer(_first(a), _addr(buf), "DLPackArray(bytearray)")
    m = memoryview(a)
    _same_pointer(_addr(m), _addr(buf), "memoryview(DLPackArray)")
    m[0] = 255
    _expect(
        buf[0] == 255,
        "a write through memoryview(DLPackArray) did not reach the bytearray",
    )
    b = dla.from_dlpack(a)
    _same_pointer(_first(b), _addr(buf), "from_dlpack(DLPackArray)")
    return "bytearray -> DLPackArray -> memoryview / from_dlpack"


def _check_memoryview_cast() -> str:
    dla = _dla()
    buf = bytearray(64)
    a = dla.DLPackArray(memoryview(buf).cast("f"))
    _expect(a.shape == (16,) and a.dtype == "float32", f"unexpected view {a!r}")
    m = memoryview(a)
    _expect(m.format == "f", f"memoryview format {m.format!r}, expected 'f'")
    _same_pointer(_addr(m), _addr(buf), "memoryview(DLPackArray)")
    m[3] = 1.5  # type: ignore[call-overload]  # typeshed types memoryview items as int
    _expect(memoryview(buf).cast("f")[3] == 1.5, "a write did not reach the bytearray")
    return "memoryview.cast('f') -> DLPackArray -> memoryview"


def _check_array_array() -> str:
    import array

    dla = _dla()
    src = array.array("d", [0.5, 1.5, 2.5, 3.5])
    a = dla.DLPackArray(src)
    _expect(a.dtype == "float64" and a.shape == (4,), f"unexpected view {a!r}")
    _same_pointer(_first(a), src.buffer_info()[0], "DLPackArray(array.array)")
    _expect(memoryview(a).tolist() == src.tolist(), "values differ after the round trip")
    return "array.array('d') -> DLPackArray -> memoryview"


def _check_bytes_readonly() -> str:
    dla = _dla()
    a = dla.DLPackArray(b"read-only bytes")
    _expect(bool(a.readonly), "a DLPackArray over bytes must be read-only")
    _expect(memoryview(a).readonly, "memoryview of a read-only DLPackArray is writable")
    try:
        a.__dlpack__()
    except BufferError:
        pass
    else:
        raise CheckFailed("read-only data was exported through a legacy (flagless) capsule")
    a.__dlpack__(max_version=(1, 0))
    return "bytes -> read-only DLPackArray; legacy capsule refused, versioned accepted"


# -- array libraries -------------------------------------------------------------------------


def _check_numpy() -> str:
    np = _import("numpy")
    dla = _dla()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = dla.DLPackArray(x)
    y = np.from_dlpack(a)
    _same_pointer(y.ctypes.data, x.ctypes.data, "np.from_dlpack(DLPackArray(ndarray))")
    _expect(np.array_equal(x, y), "values differ after the round trip")
    x[0, 0] = 42
    _expect(y[0, 0] == 42, "a write to the source is not visible in the result")
    b = dla.from_dlpack(y)
    _same_pointer(_first(b), x.ctypes.data, "dlpackarray.from_dlpack(ndarray)")
    z = np.asarray(memoryview(a))
    _same_pointer(z.ctypes.data, x.ctypes.data, "np.asarray(memoryview(DLPackArray))")
    strided = x[:, ::2]
    s = np.from_dlpack(dla.DLPackArray(strided))
    _same_pointer(s.ctypes.data, strided.ctypes.data, "strided view")
    _expect(s.strides == strided.strides, f"strides {s.strides} != {strided.strides}")
    return "ndarray -> DLPackArray -> np.from_dlpack / memoryview, strided view kept"


def _check_torch() -> str:
    torch = _import("torch")
    dla = _dla()
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    a = dla.DLPackArray(t)
    u = torch.from_dlpack(a)
    _same_pointer(u.data_ptr(), t.data_ptr(), "torch.from_dlpack(DLPackArray(tensor))")
    _expect(bool(torch.equal(t, u)), "values differ after the round trip")
    t[0, 0] = 42
    _expect(float(u[0, 0]) == 42.0, "a write to the source is not visible in the result")
    b = dla.DLPackArray(u.t())
    _same_pointer(_first(b), t.data_ptr(), "DLPackArray(tensor.t())")
    _expect(b.strides == (1, 4), f"transposed strides {b.strides}, expected (1, 4)")
    return "tensor -> DLPackArray -> torch.from_dlpack, transposed view kept"


def _check_jax() -> str:
    jax = _import("jax")
    jnp = importlib.import_module("jax.numpy")
    dla = _dla()
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    ptr = x.unsafe_buffer_pointer()
    a = dla.DLPackArray(x)
    _same_pointer(_first(a), ptr, "DLPackArray(jax.Array)")
    y = jnp.from_dlpack(a)
    _same_pointer(y.unsafe_buffer_pointer(), ptr, "jax.numpy.from_dlpack(DLPackArray)")
    _expect(bool((x == y).all()), "values differ after the round trip")
    return f"jax.Array ({jax.default_backend()}) -> DLPackArray -> jax.numpy.from_dlpack"


def _check_cupy() -> str:
    cupy = _import("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver / no device: nothing to check, not a failure
        if not cuda_driver_present():
            raise Skipped("no CUDA driver on this machine: cupy needs an NVIDIA GPU") from None
        raise Skipped(f"no CUDA device usable by cupy ({exc})") from None
    if count == 0:
        raise Skipped("no CUDA device")
    dla = _dla()
    x = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    a = dla.DLPackArray(x)
    _expect(
        int(a.device[0]) == int(dla.DLDeviceType.CUDA),
        f"device {a.device}, expected CUDA",
    )
    _same_pointer(_first(a), x.data.ptr, "DLPackArray(cupy.ndarray)")
    y = cupy.from_dlpack(a)
    _same_pointer(y.data.ptr, x.data.ptr, "cupy.from_dlpack(DLPackArray)")
    _expect(bool((x == y).all()), "values differ after the round trip")
    return "cupy.ndarray (CUDA) -> DLPackArray -> cupy.from_dlpack"


def _check_pyarrow() -> str:
    pa = _import("pyarrow")
    dla = _dla()
    values = [0.5, 1.5, 2.5, 3.5]
    arr = pa.array(values, type=pa.float64())
    data = arr.buffers()[1]
    if hasattr(arr, "__dlpack__"):
        a = dla.DLPackArray(arr)
        route = "pyarrow.Array.__dlpack__"
    else:
        # Older pyarrow: the values buffer speaks the buffer protocol (as bytes).
        a = dla.DLPackArray(data)
        route = "pyarrow.Buffer (buffer protocol)"
    _same_pointer(_first(a), data.address, f"DLPackArray via {route}")
    if a.dtype == "float64":
        _expect(memoryview(a).tolist() == values, "values differ after the round trip")
    back = pa.py_buffer(a)
    _same_pointer(back.address, data.address, "pyarrow.py_buffer(DLPackArray)")
    again = pa.Array.from_buffers(pa.float64(), len(values), [None, back])
    _expect(again.equals(arr), "pyarrow.Array rebuilt from the buffer differs")
    return f"pyarrow.Array -> DLPackArray ({route}) -> pyarrow.py_buffer"


def _check_tvm_ffi() -> str:
    import array

    tvm_ffi = _import("tvm_ffi")
    dla = _dla()
    src = array.array("f", [1.0, 2.0, 3.0, 4.0])
    a = dla.DLPackArray(src)
    t = tvm_ffi.from_dlpack(a)
    ptr = t.data_ptr() if callable(t.data_ptr) else t.data_ptr
    _same_pointer(ptr, src.buffer_info()[0], "tvm_ffi.from_dlpack(DLPackArray)")
    b = dla.DLPackArray(t)
    _same_pointer(_first(b), src.buffer_info()[0], "DLPackArray(tvm_ffi.Tensor)")
    _expect(memoryview(b).tolist() == src.tolist(), "values differ after the round trip")
    return "array.array -> DLPackArray -> tvm_ffi.Tensor -> DLPackArray"


def _check_ml_dtypes() -> str:
    ml_dtypes = _import("ml_dtypes")
    np = _import("numpy")
    dla = _dla()
    d = dla.DType(np.dtype(ml_dtypes.bfloat16))
    _expect((d.name, d.code, d.bits) == ("bfloat16", 4, 16), f"bfloat16 maps to {d!r}")
    x = np.arange(8, dtype=ml_dtypes.bfloat16)
    # NumPy's own DLPack export refuses extension dtypes; DLPackArray reads
    # them through the array interface and keeps the dtype.
    a = dla.DLPackArray(x)
    _expect(a.dtype == d, f"a bfloat16 ndarray arrives as {a.dtype!r}")
    _same_pointer(_first(a), x.ctypes.data, "DLPackArray(bfloat16 ndarray)")
    y = np.from_dlpack(dla.DLPackArray(x.view(np.uint16))).view(ml_dtypes.bfloat16)
    _same_pointer(y.ctypes.data, x.ctypes.data, "bfloat16 bits round trip")
    _expect(np.array_equal(x, y), "values differ after the round trip")
    route = "bfloat16 ndarray -> DLPackArray (dtype kept); bits -> np.from_dlpack"
    if importlib.util.find_spec("torch") is not None:
        torch = importlib.import_module("torch")
        t = torch.arange(8, dtype=torch.bfloat16)
        bt = dla.DLPackArray(t)
        _expect(bt.dtype == d, f"torch.bfloat16 arrives as {bt.dtype!r}")
        _same_pointer(torch.from_dlpack(bt).data_ptr(), t.data_ptr(), "torch bfloat16")
        back = torch.from_dlpack(a)
        _expect(back.dtype == torch.bfloat16, f"bfloat16 ndarray reaches torch as {back.dtype}")
        _same_pointer(back.data_ptr(), x.ctypes.data, "bfloat16 ndarray -> torch")
        route += "; torch.bfloat16 <-> DLPackArray <-> torch, ndarray -> torch"
    return route


def _check_legacy_interfaces() -> str:
    np = _import("numpy")
    dla = _dla()
    data = np.arange(6, dtype=np.int32)

    class Interface:
        __array_interface__ = data.__array_interface__

    class Struct:
        __array_struct__ = data.__array_struct__

    class ArrayMethod:
        def __array__(self, dtype=None, copy=None):
            return data

    for source in (Interface(), Struct(), ArrayMethod()):
        a = dla.DLPackArray(source)
        _same_pointer(_first(a), data.ctypes.data, f"DLPackArray({type(source).__name__})")
        out = np.from_dlpack(a[::-1])
        _expect(np.array_equal(out, data[::-1]), "values differ through a reversed view")
    exported = np.asarray(dla.DLPackArray(memoryview(data)))
    _same_pointer(exported.ctypes.data, data.ctypes.data, "np.asarray(DLPackArray)")
    return "__array_interface__ / __array_struct__ / __array__ -> DLPackArray views -> numpy"


CHECKS: tuple[Check, ...] = (
    Check("bytearray", "stdlib", _check_bytearray),
    Check("memoryview", "stdlib", _check_memoryview_cast),
    Check("array.array", "stdlib", _check_array_array),
    Check("bytes (read-only)", "stdlib", _check_bytes_readonly),
    Check("numpy", "numpy", _check_numpy),
    Check("legacy interfaces", "numpy", _check_legacy_interfaces),
    Check("torch", "torch", _check_torch),
    Check("jax", "jax", _check_jax),
    Check("cupy", "cupy", _check_cupy),
    Check("pyarrow", "pyarrow", _check_pyarrow),
    Check("tvm_ffi", "tvm_ffi", _check_tvm_ffi),
    Check("ml_dtypes", "ml_dtypes", _check_ml_dtypes),
)


# -- running and printing --------------------------------------------------------------------


def run_check(check: Check) -> CheckResult:
    """Run one check; every exception becomes a result, never a traceback."""
    try:
        detail = check.func()
    except Skipped as exc:
        return CheckResult(check.name, check.library, SKIP, str(exc))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a broken library may raise anything, even SystemExit
        return CheckResult(check.name, check.library, FAIL, f"{type(exc).__name__}: {exc}")
    return CheckResult(check.name, check.library, PASS, detail or "")


def library_info(name: str, dist: str) -> LibraryInfo:
    """Installed-or-not and version, from package metadata (nothing is imported)."""
    try:
        installed = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        installed = False
    version = None
    if installed:
        version = _distribution_version(name, dist) or "unknown"
    return LibraryInfo(name, installed, version)


def _distribution_version(name: str, dist: str) -> str | None:
    """The version of the distribution that installed module ``name``.

    ``dist`` is the usual distribution; a module can come from another one
    (CuPy's wheels are ``cupy-cuda12x``, ``cupy-cuda13x``, ...), which the
    installed distributions' top-level names tell.
    """
    candidates = [dist]
    try:
        candidates += importlib.metadata.packages_distributions().get(name, [])
    except Exception:  # a broken distribution's metadata: report what the usual name says
        pass
    for candidate in candidates:
        try:
            return importlib.metadata.version(candidate)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def collect(checks: Sequence[Check] = CHECKS) -> dict:
    """The whole report as plain data (what ``--json`` prints)."""
    import dlpackarray

    results = [run_check(c) for c in checks]
    return {
        "dlpackarray": {
            "version": dlpackarray.__version__,
            "dlpack_version": list(dlpackarray.DLPACK_VERSION),
            "max_ndim": dlpackarray.MAX_NDIM,
        },
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": f"{sys.platform}-{platform.machine()}",
        },
        "libraries": [asdict(library_info(n, d)) for n, d in LIBRARIES],
        "checks": [asdict(r) for r in results],
        "ok": all(r.status != FAIL for r in results),
    }


_MARKS = {PASS: "PASS", FAIL: "FAIL", SKIP: "SKIP"}


def format_text(report: dict) -> str:
    """Human-readable report: one line per library and per check."""
    pkg, py = report["dlpackarray"], report["python"]
    major, minor = pkg["dlpack_version"]
    lines = [
        f"dlpackarray {pkg['version']} (DLPack {major}.{minor}, max ndim {pkg['max_ndim']})",
        f"Python {py['version']} ({py['implementation']}, {py['platform']})",
        "",
        "Libraries:",
    ]
    for lib in report["libraries"]:
        lines.append(
            f"  {lib['name']:<10} {lib['version'] if lib['installed'] else 'not installed'}"
        )
    lines += ["", "Zero-copy checks:"]
    counts = {PASS: 0, FAIL: 0, SKIP: 0}
    for r in report["checks"]:
        counts[r["status"]] += 1
        label = f"{r['library']}: {r['name']}" if r["library"] != r["name"] else r["name"]
        lines.append(f"  [{_MARKS[r['status']]}] {label} -- {r['detail']}")
    lines += [
        "",
        f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped",
        next_steps(report),
    ]
    return "\n".join(lines)


def next_steps(report: dict) -> str:
    """The closing line: which installs would enable the checks skipped for a missing library.

    Names are PyPI names (cli/packages.py); GPU-only packages are named only where a CUDA
    driver is present, and otherwise the line says why they are left out.
    """
    installed = {lib["name"] for lib in report["libraries"] if lib["installed"]}
    missing = []
    for r in report["checks"]:
        lib = r["library"]
        if r["status"] == SKIP and lib in dict(LIBRARIES) and lib not in installed:
            missing.append(lib)
    wanted = install_names(missing)
    gpu_only = [m for m in missing if m in NEEDS_CUDA and pypi_name(m) not in wanted]
    if not wanted:
        line = "Every check whose library can be installed ran."
    else:
        line = "To run the skipped checks: pip install " + " ".join(wanted)
    if gpu_only:
        line += (
            f" ({', '.join(gpu_only)} left out: no CUDA driver on this machine, and "
            f"{'it needs' if len(gpu_only) == 1 else 'they need'} an NVIDIA GPU)"
        )
    return line


def main(argv: Sequence[str] | None = None, checks: Sequence[Check] = CHECKS) -> int:
    """Entry point of ``python -m dlpackarray``; returns the exit status (1 if a check failed)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m dlpackarray",
        description="Report the environment and run live zero-copy round trips through "
        "DLPackArray for every installed array library.",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = collect(checks)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_text(report))
    return 0 if report["ok"] else 1
