"""Rules of the DLPack C exchange API attribute (``type(x).__dlpack_c_exchange_api__``)."""

from __future__ import annotations

import ctypes

from dlpackarray.testing import _abi, _spec
from dlpackarray.testing.report import Recorder, rule_table

ABI = _spec.dlpack_c("DLPackExchangeAPI", "c.DLPackExchangeAPI")
PYSPEC = _spec.dlpack_python("Implementation (__dlpack_c_exchange_api__)", "implementation")

RULES = rule_table(
    "exchange",
    [
        (
            "exchange.capsule-name",
            "must",
            'type(x).__dlpack_c_exchange_api__ is a PyCapsule named "dlpack_exchange_api"',
            PYSPEC,
        ),
        (
            "exchange.on-type",
            "should",
            "the attribute is defined on the type (consumers look it up there)",
            PYSPEC,
        ),
        (
            "exchange.version",
            "must",
            "the table's header.version.major is 1",
            _spec.dlpack_c("DLPackExchangeAPIHeader", "c.DLPackExchangeAPIHeader"),
        ),
        (
            "exchange.members",
            "must",
            "allocator, from_py_object, to_py_object and current_work_stream are non-NULL",
            ABI,
        ),
        (
            "exchange.from-py-agrees",
            "must",
            "managed_tensor_from_py_object_no_sync succeeds on the object and gives the "
            "tensor __dlpack__ gives (shape, dtype, device, first element)",
            ABI,
        ),
        (
            "exchange.current-work-stream",
            "must",
            "current_work_stream(kDLCPU, 0) succeeds (a CPU library may give a NULL stream)",
            ABI,
        ),
    ],
)


def check(obj, rec: Recorder) -> None:
    rec.check(
        "exchange.on-type",
        hasattr(type(obj), "__dlpack_c_exchange_api__"),
        "only the instance has __dlpack_c_exchange_api__",
    )
    cap = getattr(type(obj), "__dlpack_c_exchange_api__", None)
    if cap is None:
        cap = obj.__dlpack_c_exchange_api__
    if not rec.check(
        "exchange.capsule-name",
        _abi.is_capsule(cap) and _abi.capsule_name(cap) == "dlpack_exchange_api",
        f"got {type(cap).__name__}"
        + (f" named {_abi.capsule_name(cap)!r}" if _abi.is_capsule(cap) else ""),
    ):
        return
    t = _abi.DLPackExchangeAPI.from_address(_abi.capsule_pointer(cap))
    rec.check(
        "exchange.version", t.version.major == 1, f"version {t.version.major}.{t.version.minor}"
    )
    missing = [
        name
        for name in (
            "managed_tensor_allocator",
            "managed_tensor_from_py_object_no_sync",
            "managed_tensor_to_py_object_no_sync",
            "current_work_stream",
        )
        if not getattr(t, name)
    ]
    rec.check("exchange.members", not missing, "NULL: " + ", ".join(missing))
    if missing:
        return
    _check_functions(obj, rec, t)


# Functions taking Python objects run with the GIL held (PYFUNCTYPE); a -1 return leaves a
# Python exception set, which ctypes raises.
_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))
_STREAM = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)


def _check_functions(obj, rec, t) -> None:
    out = ctypes.c_void_p()
    try:
        rc = _STREAM(t.current_work_stream)(_abi.KDL_CPU, 0, ctypes.byref(out))
    except Exception as exc:  # noqa: BLE001
        rec.fail("exchange.current-work-stream", f"raised {type(exc).__name__}: {exc}")
    else:
        rec.check("exchange.current-work-stream", rc == 0, f"returned {rc}")
    if not hasattr(obj, "__dlpack__"):
        return  # nothing to compare the table's export with
    from dlpackarray.testing.dlpack import MAX_NDIM, MAX_VERSION, _export, ndim_in_range

    ref, _ = _export(obj, max_version=MAX_VERSION)
    if ref is None or not ref.versioned:
        return
    out = ctypes.c_void_p()
    try:
        rc = _FROM_PY(t.managed_tensor_from_py_object_no_sync)(obj, ctypes.byref(out))
    except Exception as exc:  # noqa: BLE001
        rec.fail("exchange.from-py-agrees", f"raised {type(exc).__name__}: {exc}")
        return
    if rc != 0 or not out.value:
        rec.fail("exchange.from-py-agrees", f"returned {rc} with tensor 0x{out.value or 0:x}")
        return
    m = _abi.DLManagedTensorVersioned.from_address(out.value)
    tt = m.dl_tensor
    n = tt.ndim if ndim_in_range(tt.ndim) else 0  # never read past a hostile ndim's end
    got = {
        "shape": (tuple(tt.shape[i] for i in range(n)) if tt.shape or not n else None)
        if ndim_in_range(tt.ndim)
        else f"ndim={tt.ndim}, outside 0..{MAX_NDIM}",
        "dtype": (tt.dtype.code, tt.dtype.bits, tt.dtype.lanes),
        "device": (tt.device.device_type, tt.device.device_id),
        "first": (tt.data or 0) + tt.byte_offset,
    }
    want = {"shape": ref.shape, "dtype": ref.dtype, "device": ref.device, "first": ref.first}
    if m.deleter:  # the consumer's single call
        _abi.VOID_FN(m.deleter)(out.value)
    diff = [f"{k} {got[k]} vs {want[k]}" for k in want if got[k] != want[k]]
    if want["shape"] and 0 in want["shape"]:
        diff = [d for d in diff if not d.startswith("first")]
    rec.check("exchange.from-py-agrees", not diff, "; ".join(diff))
