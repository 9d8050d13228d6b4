"""Rules of the Arrow PyCapsule interface (``__arrow_c_schema__`` / ``_array__`` /
``_stream__`` and the device variants).

Release callbacks are watched by swapping the struct's ``release`` pointer for a
counting trampoline that forwards the first call to the real callback, so the producer's
cleanup still runs once.
"""

from __future__ import annotations

import ctypes

from dlpackarray.testing import _abi
from dlpackarray.testing.report import Recorder, rule_table

PYCAPSULE = "reference/arrow_c_abi.md § 1. PyCapsule interface (Python layer)"
STRUCTS = "reference/arrow_c_abi.md § 2. C structs"
LAYOUT = "reference/arrow_c_abi.md § 4. Buffer layout rules"
DEVICE = "seeds/003_cd221b683c0ea064.txt § Rationale for this change"

RULES = rule_table(
    "arrow",
    [
        (
            "arrow.schema.capsule-name",
            "must",
            '__arrow_c_schema__() returns a capsule named "arrow_schema"',
            PYCAPSULE,
        ),
        (
            "arrow.array.capsule-names",
            "must",
            '__arrow_c_array__() returns ("arrow_schema", "arrow_array") capsules',
            PYCAPSULE,
        ),
        (
            "arrow.stream.capsule-name",
            "must",
            '__arrow_c_stream__() returns a capsule named "arrow_array_stream"',
            PYCAPSULE,
        ),
        (
            "arrow.device-array.capsule-names",
            "must",
            '__arrow_c_device_array__() returns ("arrow_schema", "arrow_device_array") capsules',
            f"{DEVICE}; {PYCAPSULE}",
        ),
        (
            "arrow.device-stream.capsule-name",
            "must",
            '__arrow_c_device_stream__() returns a capsule named "arrow_device_array_stream"',
            f"{DEVICE}; {PYCAPSULE}",
        ),
        (
            "arrow.requested-schema.none",
            "must",
            "requested_schema=None is accepted by the array and stream methods",
            PYCAPSULE,
        ),
        (
            "arrow.device.kwargs",
            "must",
            "the device methods accept unknown keywords whose value is None",
            PYCAPSULE,
        ),
        (
            "arrow.release.non-null",
            "must",
            "every exported struct has a non-NULL release callback",
            STRUCTS,
        ),
        (
            "arrow.capsule.destructor",
            "must",
            "every Arrow capsule has a destructor (an unconsumed export is released)",
            PYCAPSULE,
        ),
        (
            "arrow.release.once-unconsumed",
            "must",
            "dropping an unconsumed capsule calls its struct's release exactly once",
            PYCAPSULE,
        ),
        (
            "arrow.array.fields",
            "must",
            "length >= 0, offset >= 0, null_count >= -1, buffers non-NULL when n_buffers > 0",
            STRUCTS,
        ),
        (
            "arrow.array.schema-agrees",
            "must",
            "the array's n_buffers and n_children match its schema's format",
            LAYOUT,
        ),
        (
            "arrow.stream.callbacks",
            "must",
            "a stream's get_schema, get_next and get_last_error are non-NULL",
            STRUCTS,
        ),
        (
            "arrow.device-array.sync-event",
            "should",
            "a CPU device array has no sync event",
            f"{STRUCTS} (ArrowDeviceArray)",
        ),
    ],
)

#: n_buffers of the fixed layouts, by format (see LAYOUT); others are not checked.
_FIXED_BUFFERS = {
    "n": 0,
    "z": 3,
    "u": 3,
    "Z": 3,
    "U": 3,
    "+l": 2,
    "+L": 2,
    "+vl": 3,
    "+vL": 3,
    "+s": 1,
    "+m": 2,
    "+r": 0,
}
_PRIMITIVE = set("bcCsSiIlLefg")


def _expected_buffers(fmt: str) -> tuple[int, bool] | None:
    """(n, exact) for a format: exact n buffers, or at least n (variadic views)."""
    if fmt in _FIXED_BUFFERS:
        return _FIXED_BUFFERS[fmt], True
    if fmt in _PRIMITIVE or fmt[:2] in ("w:", "d:") or fmt[:1] == "t":
        return 2, True
    if fmt in ("vz", "vu"):
        return 3, False
    if fmt.startswith("+w:") or fmt.startswith("+us:"):
        return 1, True
    if fmt.startswith("+ud:"):
        return 2, True
    return None


def _call(rec, rule, fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except Exception as exc:  # noqa: BLE001 - the exception is the observation
        rec.fail(rule, f"{getattr(fn, '__name__', 'call')} raised {type(exc).__name__}: {exc}")
        return None


def _named(rec, rule, cap, name) -> bool:
    return rec.check(
        rule,
        _abi.is_capsule(cap) and _abi.capsule_name(cap) == name,
        f"expected a {name!r} capsule, got "
        + (f"capsule {_abi.capsule_name(cap)!r}" if _abi.is_capsule(cap) else type(cap).__name__),
    )


def _watch_release(rec, box: list, struct_type) -> None:
    """Release rules on a fresh capsule, then drop it.

    ``box`` holds the only reference to the capsule, so that dropping it here runs the
    capsule destructor now.
    """
    cap = box.pop()
    s = struct_type.from_address(_abi.capsule_pointer(cap))
    inner = s.array if struct_type is _abi.ArrowDeviceArray else s
    if not rec.check(
        "arrow.release.non-null", bool(inner.release), f"{struct_type.__name__}.release is NULL"
    ):
        return
    if not rec.check(
        "arrow.capsule.destructor",
        _abi.has_destructor(cap),
        f"{_abi.capsule_name(cap)!r} capsule has no destructor",
    ):
        return
    field = ctypes.addressof(inner) + type(inner).release.offset
    counter = _abi.CallCounter(inner.release, forward=True, clear_release_field=field)
    inner.release = counter.address
    del cap, s, inner
    rec.check(
        "arrow.release.once-unconsumed",
        counter.calls == 1,
        f"release called {counter.calls} times when an unconsumed capsule was dropped",
    )


def _check_pair(rec, obj, method, array_name, names_rule) -> None:
    pair = _call(rec, names_rule, getattr(obj, method))
    if pair is None:
        return
    if not (isinstance(pair, tuple) and len(pair) == 2):
        rec.fail(names_rule, f"{method}() returned {type(pair).__name__}, not a pair")
        return
    sc, ac = pair
    del pair
    if not (
        _named(rec, names_rule, sc, "arrow_schema") and _named(rec, names_rule, ac, array_name)
    ):
        return
    schema = _abi.ArrowSchema.from_address(_abi.capsule_pointer(sc))
    dev = array_name == "arrow_device_array"
    holder = _abi.ArrowDeviceArray if dev else _abi.ArrowArray
    whole = holder.from_address(_abi.capsule_pointer(ac))
    arr = whole.array if dev else whole
    if schema.release and arr.release:
        fmt = (schema.format or b"").decode(errors="replace")
        rec.check(
            "arrow.array.fields",
            arr.length >= 0
            and arr.offset >= 0
            and arr.null_count >= -1
            and (arr.n_buffers == 0 or bool(arr.buffers)),
            f"length={arr.length} offset={arr.offset} null_count={arr.null_count} "
            f"n_buffers={arr.n_buffers}",
        )
        expect = _expected_buffers(fmt)
        problems = []
        if expect is not None:
            n, exact = expect
            if (arr.n_buffers != n) if exact else (arr.n_buffers < n):
                problems.append(f"format {fmt!r} has {n} buffers, the array {arr.n_buffers}")
        if arr.n_children != schema.n_children:
            problems.append(f"{arr.n_children} children vs {schema.n_children} in the schema")
        rec.check("arrow.array.schema-agrees", not problems, "; ".join(problems))
        if dev and whole.device_type == _abi.KDL_CPU:
            rec.check(
                "arrow.device-array.sync-event",
                not whole.sync_event,
                "CPU device array with a sync event",
            )
    del schema, whole, arr
    boxes = [sc], [ac]
    del sc, ac
    _watch_release(rec, boxes[0], _abi.ArrowSchema)
    _watch_release(rec, boxes[1], holder)


def check(obj, rec: Recorder) -> None:
    """Run the Arrow PyCapsule rules for every Arrow method ``obj`` has."""
    if hasattr(obj, "__arrow_c_schema__"):
        cap = _call(rec, "arrow.schema.capsule-name", obj.__arrow_c_schema__)
        if cap is not None and _named(rec, "arrow.schema.capsule-name", cap, "arrow_schema"):
            box = [cap]
            del cap
            _watch_release(rec, box, _abi.ArrowSchema)
    for method, name, rule in (
        ("__arrow_c_array__", "arrow_array", "arrow.array.capsule-names"),
        ("__arrow_c_device_array__", "arrow_device_array", "arrow.device-array.capsule-names"),
    ):
        if hasattr(obj, method):
            _check_pair(rec, obj, method, name, rule)
    for method, name, rule, struct in (
        (
            "__arrow_c_stream__",
            "arrow_array_stream",
            "arrow.stream.capsule-name",
            _abi.ArrowArrayStream,
        ),
        (
            "__arrow_c_device_stream__",
            "arrow_device_array_stream",
            "arrow.device-stream.capsule-name",
            _abi.ArrowDeviceArrayStream,
        ),
    ):
        if hasattr(obj, method):
            cap = _call(rec, rule, getattr(obj, method))
            if cap is not None and _named(rec, rule, cap, name):
                s = struct.from_address(_abi.capsule_pointer(cap))
                if s.release:
                    rec.check(
                        "arrow.stream.callbacks",
                        bool(s.get_schema and s.get_next and s.get_last_error),
                        f"{struct.__name__} has a NULL callback",
                    )
                del s
                box = [cap]
                del cap
                _watch_release(rec, box, struct)
    for method in (
        "__arrow_c_array__",
        "__arrow_c_stream__",
        "__arrow_c_device_array__",
        "__arrow_c_device_stream__",
    ):
        if hasattr(obj, method):
            try:
                out = getattr(obj, method)(requested_schema=None)
            except Exception as exc:  # noqa: BLE001
                rec.fail(
                    "arrow.requested-schema.none",
                    f"{method}(requested_schema=None) raised {type(exc).__name__}: {exc}",
                )
            else:
                rec.ok("arrow.requested-schema.none")
                del out
    for method in ("__arrow_c_device_array__", "__arrow_c_device_stream__"):
        if hasattr(obj, method):
            try:
                out = getattr(obj, method)(future_keyword=None)
            except Exception as exc:  # noqa: BLE001
                rec.fail(
                    "arrow.device.kwargs",
                    f"{method}(future_keyword=None) raised {type(exc).__name__}: {exc}",
                )
            else:
                rec.ok("arrow.device.kwargs")
                del out
