"""Rules of the DLPack C exchange API attribute (``type(x).__dlpack_c_exchange_api__``)."""

from __future__ import annotations

from dlpackarray.testing import _abi
from dlpackarray.testing.report import Recorder, rule_table

ABI = "reference/dlpack_abi.md § C exchange API (v1.2 introduced, v1.3 final naming)"
PYSPEC = "reference/dlpack_python_spec.md § C exchange API attribute (DLPack 1.3; array-api draft)"

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
            f"{ABI} (DLPackExchangeAPIHeader)",
        ),
        (
            "exchange.members",
            "must",
            "allocator, from_py_object, to_py_object and current_work_stream are non-NULL",
            f"{ABI} (DLPackExchangeAPI)",
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
