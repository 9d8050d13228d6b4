"""Rules of the Arrow PyCapsule interface (``__arrow_c_schema__`` / ``_array__`` /
``_stream__`` and the device variants).

Release callbacks are watched by swapping the struct's ``release`` pointer for a
counting trampoline that forwards the first call to the real callback, so the producer's
cleanup still runs once.
"""

from __future__ import annotations

import ctypes

from dlpackarray.testing import _abi, _common, _forked, _spec
from dlpackarray.testing import arrow_format as _format
from dlpackarray.testing.report import Recorder, rule_table

PYCAPSULE = _spec.arrow_capsule("PyCapsule Standard", "pycapsule-standard")
ARRAY = _spec.arrow_c("The ArrowArray structure", "the-arrowarray-structure")
RELEASE = _spec.arrow_c(
    "Release callback semantics -- for producers", "release-callback-semantics-for-producers"
)
FORMATS = _spec.arrow_c(
    "Data type description -- format strings", "data-type-description-format-strings"
)
LAYOUT = _spec.arrow_columnar("Buffer Listing for Each Layout", "buffer-listing-for-each-layout")
SCHEMA = _spec.arrow_c("The ArrowSchema structure", "the-arrowschema-structure")
BUFFERS = _spec.arrow_c("ArrowArray: buffers", "c.ArrowArray.buffers")
SCHEMA_REQUESTS = _spec.arrow_capsule("Schema Requests", "schema-requests")
LIFETIME = _spec.arrow_capsule("Lifetime Semantics", "lifetime-semantics")
DEVICE_SUPPORT = _spec.arrow_capsule("Device Support", "device-support")
DEVICE_ARRAY = _spec.arrow_device("ArrowDeviceArray definition", "arrowdevicearray-definition")
DEVICE_STREAM = _spec.arrow_device("ArrowDeviceArrayStream", "arrowdevicearraystream")
STREAM = _spec.arrow_stream("Structure definition", "structure-definition")

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
            f"{DEVICE_SUPPORT}; {PYCAPSULE}",
        ),
        (
            "arrow.device-stream.capsule-name",
            "must",
            '__arrow_c_device_stream__() returns a capsule named "arrow_device_array_stream"',
            f"{DEVICE_SUPPORT}; {PYCAPSULE}",
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
            "arrow.host-methods.device-data",
            "must",
            "for data the host cannot address, __arrow_c_array__ and __arrow_c_stream__ raise "
            "or export a host copy, never the device buffers",
            DEVICE_SUPPORT,
        ),
        (
            "arrow.release.non-null",
            "must",
            "every exported struct has a non-NULL release callback",
            RELEASE,
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
            ARRAY,
        ),
        (
            "arrow.schema.format-grammar",
            "must",
            "every format string (children's and dictionary's included) is in the C data "
            "interface's format-string grammar",
            FORMATS,
        ),
        (
            "arrow.schema.children",
            "must",
            "n_children is the format's (1 for lists, maps and fixed-size lists, 2 for "
            "run-end encoded, one per type id for unions, 0 for non-nested types) and no "
            "child pointer is NULL",
            f"{FORMATS}; {SCHEMA}",
        ),
        (
            "arrow.array.validity-null",
            "must",
            "the validity buffer is NULL only when null_count is 0",
            BUFFERS,
        ),
        (
            "arrow.array.buffers-non-null",
            "must",
            "with length > 0 the values / offsets / views / type-ids buffers are non-NULL "
            "(only a buffer of size 0 may be NULL)",
            BUFFERS,
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
            STREAM,
        ),
        (
            "arrow.device-array.sync-event",
            "should",
            "a CPU device array has no sync event",
            DEVICE_ARRAY,
        ),
        (
            "arrow.requested-schema.own",
            "should",
            "requesting the schema the producer itself exports is honoured (accepted, same "
            "format): conversion is best-effort, and this one needs none",
            SCHEMA_REQUESTS,
        ),
        (
            "arrow.release.marks-released",
            "must",
            "a release callback marks its struct released (sets release to NULL)",
            RELEASE,
        ),
        (
            "arrow.release.once-consumed",
            "must",
            "after a consumer moves the struct out (copy, source release = NULL) dropping the "
            "capsule releases nothing: the moved struct's one release is the only one "
            "(probed in a forked child)",
            f"{LIFETIME}; {RELEASE}",
        ),
        (
            "arrow.device-array.device-agrees",
            "must",
            "a device array's device_type (and device_id off the CPU) is where its buffers are: "
            "__dlpack_device__(), or the CPU when its buffers are __arrow_c_array__'s",
            f"{DEVICE_ARRAY}; {DEVICE_SUPPORT}",
        ),
        (
            "arrow.device-array.reserved-zero",
            "must",
            "a device array's reserved bytes are zero (device streams' chunks included)",
            DEVICE_ARRAY,
        ),
        (
            "arrow.device-array.sync-event-handle",
            "must",
            "a non-CPU device array's sync_event is NULL (nothing to wait for) or points to a "
            "non-NULL event handle (it is a cudaEvent_t* / hipEvent_t*, not the handle)",
            DEVICE_ARRAY,
        ),
        (
            "arrow.device-stream.device-type",
            "must",
            "every chunk of a device stream is on the stream's device_type (and that is "
            "__dlpack_device__()'s when the object has one)",
            DEVICE_STREAM,
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


def _check_format(rec, schema, array=None, where: str = "") -> None:
    """The format-string, children and buffer rules on one schema (and its array)."""
    grammar, children = _format.schema_problems(schema)
    rec.check("arrow.schema.format-grammar", not grammar, where + "; ".join(grammar))
    rec.check("arrow.schema.children", not children, where + "; ".join(children))
    if array is None or grammar or children:
        return
    validity, buffers = _format.array_problems(schema, array)
    rec.check("arrow.array.validity-null", not validity, where + "; ".join(validity))
    rec.check("arrow.array.buffers-non-null", not buffers, where + "; ".join(buffers))


def _check_stream_format(rec, obj, method, name, device: bool) -> None:
    """The format rules on a fresh stream's schema and first chunk."""
    box = _fresh_capsule(obj, method, name)
    if not box:
        return
    schema, chunk, release = _format.stream_schema_and_chunk(_abi.capsule_pointer(box[0]), device)
    try:
        if schema is not None:
            arr = None if chunk is None else (chunk.array if device else chunk)
            _check_format(rec, schema, arr, f"{method}: ")
    finally:
        release()
        box.clear()


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
    counter = _abi.CallCounter(
        inner.release, forward=True, struct=ctypes.addressof(inner), clear_release_field=field
    )
    inner.release = counter.address
    del cap, s, inner
    rec.check(
        "arrow.release.once-unconsumed",
        counter.calls == 1,
        f"release called {counter.calls} times when an unconsumed capsule was dropped",
    )
    if counter.calls >= 1:
        rec.check(
            "arrow.release.marks-released",
            counter.left == 0,
            f"{struct_type.__name__}.release is still 0x{counter.left or 0:x} after it ran",
        )


def _release_field(struct_type, address: int) -> int:
    """Address of the release pointer (a device array's is its embedded array's)."""
    if struct_type is _abi.ArrowDeviceArray:
        return address + _abi.ArrowDeviceArray.array.offset + _abi.ArrowArray.release.offset
    return address + struct_type.release.offset


def _check_consumed(rec, box: list, struct_type) -> None:
    """Rule ``arrow.release.once-consumed`` on a fresh capsule (``box`` holds the only
    reference), in a forked child: a destructor that releases a moved-out struct again
    double-frees, which must fail the rule rather than crash the checker."""
    rule = "arrow.release.once-consumed"
    address = _abi.capsule_pointer(box[0])
    field = _release_field(struct_type, address)
    if not ctypes.c_void_p.from_address(field).value or not _abi.has_destructor(box[0]):
        box.clear()
        return  # arrow.release.non-null / arrow.capsule.destructor report it
    if struct_type in (_abi.ArrowDeviceArray, _abi.ArrowDeviceArrayStream):
        device_type = struct_type.from_address(address).device_type
        if device_type != _abi.KDL_CPU:
            # Releasing device data calls the device driver, which a forked child must not
            # use (its context belongs to the parent): no verdict rather than a crash.
            box.clear()
            rec.na(rule, f"probed only for host memory (device_type {device_type})")
            return
    if not _forked.available():
        rec.na(rule, "needs os.fork")
        return
    size = ctypes.sizeof(struct_type)

    def consume():
        moved = ctypes.create_string_buffer(size)
        ctypes.memmove(moved, address, size)  # the move: a bitwise copy ...
        ctypes.c_void_p.from_address(field).value = None  # ... and the source released
        moved_field = _release_field(struct_type, ctypes.addressof(moved))
        counter = _abi.CallCounter(
            ctypes.c_void_p.from_address(moved_field).value,
            forward=True,
            struct=ctypes.addressof(moved),
            clear_release_field=moved_field,
        )
        ctypes.c_void_p.from_address(moved_field).value = counter.address
        box.clear()  # the capsule's last reference: its destructor runs now
        if counter.calls:
            return "dropping the consumed capsule called the moved struct's release"
        _abi.PY_VOID_FN(counter.address)(ctypes.addressof(moved))  # the consumer's release
        return None if counter.calls == 1 else f"release ran {counter.calls} times"

    ok, why = _forked.run(consume)
    box.clear()  # the parent's copy was never consumed: its destructor releases it
    if ok is None:
        rec.na(rule, why)
    else:
        rec.check(rule, ok, f"moving the {struct_type.__name__} out, then dropping: {why}")


def _check_pair(rec, obj, method, array_name, names_rule) -> None:
    dev = array_name == "arrow_device_array"
    if dev:  # so that reserved bytes a producer leaves unset read non-zero every time
        _abi.poison_heap(ctypes.sizeof(_abi.ArrowDeviceArray))
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
        _check_format(rec, schema, arr, f"{method}: ")
        if dev:
            _check_device_fields(rec, whole, "")
            _check_device_agrees(rec, obj, whole)
    fmt = (schema.format or b"") if schema.release else None
    del schema, whole, arr
    boxes = [sc], [ac]
    del sc, ac
    _watch_release(rec, boxes[0], _abi.ArrowSchema)
    _watch_release(rec, boxes[1], holder)
    if fmt is not None:
        _check_requested_own(rec, obj, method, fmt)
    pair = _fresh_pair(obj, method)
    if pair is not None:
        boxes = [pair[0]], [pair[1]]
        del pair
        _check_consumed(rec, boxes[0], _abi.ArrowSchema)
        _check_consumed(rec, boxes[1], holder)


def _check_device_fields(rec, whole, where: str) -> None:
    """sync_event and reserved of one ArrowDeviceArray (``where``: which one, for messages).

    Only host memory is read: the struct, and for a non-CPU array the event handle its
    sync_event points to (the handle is never used: no driver call).
    """
    if whole.device_type == _abi.KDL_CPU:
        rec.check(
            "arrow.device-array.sync-event",
            not whole.sync_event,
            f"CPU device array{where} with a sync event (0x{whole.sync_event or 0:x})",
        )
    elif whole.sync_event:
        handle = ctypes.c_void_p.from_address(whole.sync_event).value
        rec.check(
            "arrow.device-array.sync-event-handle",
            bool(handle),
            f"sync_event{where} points to a NULL event handle",
        )
    rec.check(
        "arrow.device-array.reserved-zero",
        not any(whole.reserved),
        f"reserved{where} = {[hex(v & (2**64 - 1)) for v in whole.reserved]}",
    )


def _fresh_pair(obj, method):
    try:
        pair = getattr(obj, method)()
    except Exception:  # noqa: BLE001 - the first export's rules report it
        return None
    return pair if isinstance(pair, tuple) and len(pair) == 2 else None


def _fresh_capsule(obj, method, name) -> list:
    """``[capsule]`` (the only reference) of a new export, or ``[]``."""
    try:
        cap = getattr(obj, method)()
    except Exception:  # noqa: BLE001 - the first export's rules report it
        return []
    return [cap] if _abi.is_capsule(cap) and _abi.capsule_name(cap) == name else []


def _buffers(arr) -> tuple:
    n = arr.n_buffers if arr.buffers and 0 <= arr.n_buffers < 64 else 0
    return tuple(arr.buffers[i] or 0 for i in range(n))


def _dlpack_device(obj):
    try:
        dev = obj.__dlpack_device__()
        return (int(dev[0]), int(dev[1]))
    except Exception:  # noqa: BLE001 - no (valid) DLPack device: nothing to compare with
        return None


def _check_device_agrees(rec, obj, whole) -> None:
    rule = "arrow.device-array.device-agrees"
    got = (whole.device_type, whole.device_id)
    dev = _dlpack_device(obj)
    if dev is not None:
        same = got[0] == dev[0] and (dev[0] == _abi.KDL_CPU or got[1] == dev[1])
        rec.check(rule, same, f"device array on {got} but __dlpack_device__() = {dev}")
        return
    if not hasattr(obj, "__arrow_c_array__"):
        return
    # The CPU method must hand out host pointers: the same buffers mean host memory.
    pair = _fresh_pair(obj, "__arrow_c_array__")
    if pair is None or not _abi.is_capsule(pair[1]):
        return
    if _abi.capsule_name(pair[1]) != "arrow_array":
        return
    host = _buffers(_abi.ArrowArray.from_address(_abi.capsule_pointer(pair[1])))
    if any(host) and host == _buffers(whole.array):
        rec.check(
            rule,
            got[0] == _abi.KDL_CPU,
            f"device_type {got[0]} but the buffers are those __arrow_c_array__ exports (host)",
        )


def _check_requested_own(rec, obj, method, fmt: bytes) -> None:
    rule = "arrow.requested-schema.own"
    request = _fresh_pair(obj, method)
    if request is None or _abi.capsule_name(request[0]) != "arrow_schema":
        return
    try:
        out = getattr(obj, method)(requested_schema=request[0])
    except Exception as exc:  # noqa: BLE001 - the exception is the observation
        if isinstance(exc, TypeError) and "keyword" in str(exc):
            rec.na(rule, "requested_schema not accepted (arrow.requested-schema.none)")
        else:
            rec.fail(rule, f"{method}(requested_schema=<its own schema>) raised {_describe(exc)}")
        return
    got = None
    if isinstance(out, tuple) and len(out) == 2 and _abi.is_capsule(out[0]):
        if _abi.capsule_name(out[0]) == "arrow_schema":
            got = _abi.ArrowSchema.from_address(_abi.capsule_pointer(out[0])).format or b""
    rec.check(
        rule,
        got == fmt,
        f"{method}(requested_schema=<its own {fmt.decode(errors='replace')!r} schema>) gave "
        + ("no schema" if got is None else repr(got.decode(errors="replace"))),
    )


def _describe(exc) -> str:
    return f"{type(exc).__name__}: {exc}"


def _check_device_stream(rec, obj, box: list) -> None:
    """Rule ``arrow.device-stream.device-type``: reads (up to 8) chunks of a fresh stream."""
    rule = "arrow.device-stream.device-type"
    address = _abi.capsule_pointer(box[0])
    s = _abi.ArrowDeviceArrayStream.from_address(address)
    if not (s.release and s.get_next):
        return
    problems = []
    dev = _dlpack_device(obj)
    if dev is not None and s.device_type != dev[0]:
        problems.append(f"stream device_type {s.device_type} but __dlpack_device__() = {dev}")
    get_next = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(s.get_next)
    for i in range(8):
        chunk = _abi.ArrowDeviceArray()
        # A producer must fill every field: what it leaves reads as 0xA5.. (not zero).
        ctypes.memset(ctypes.addressof(chunk), 0xA5, ctypes.sizeof(chunk))
        chunk.array.release = None
        if get_next(address, ctypes.addressof(chunk)) != 0 or not chunk.array.release:
            break
        _check_device_fields(rec, chunk, f" (chunk {i} of the device stream)")
        if chunk.device_type != s.device_type:
            problems.append(
                f"a chunk on device_type {chunk.device_type}, the stream says {s.device_type}"
            )
        _abi.PY_VOID_FN(chunk.array.release)(ctypes.addressof(chunk.array))
    del s
    box.clear()
    rec.check(rule, not problems, "; ".join(problems))


def _host_method_on_device(rec, obj, method, where) -> bool:
    """Rule ``arrow.host-methods.device-data`` for one CPU method on device data; True when
    it exported (a host copy), so that its other rules run on what it gave."""
    rule = "arrow.host-methods.device-data"
    if not rec.probe(rule, f"{method}() on data on device {where}"):
        return False
    try:
        out = getattr(obj, method)()
    except Exception:  # noqa: BLE001 - "raise an error or make a copy to CPU memory"
        rec.ok(rule)
        return False
    device_ptr = _common.device_pointer(obj)
    buffers = ()
    if method == "__arrow_c_array__" and isinstance(out, tuple) and len(out) == 2:
        if _abi.is_capsule(out[1]) and _abi.capsule_name(out[1]) == "arrow_array":
            buffers = _buffers(_abi.ArrowArray.from_address(_abi.capsule_pointer(out[1])))
    elif _abi.is_capsule(out) and _abi.capsule_name(out) == "arrow_array_stream":
        s = _abi.ArrowArrayStream.from_address(_abi.capsule_pointer(out))
        if s.release and s.get_next:
            chunk = _abi.ArrowArray()
            get_next = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
            if get_next(s.get_next)(ctypes.addressof(s), ctypes.addressof(chunk)) == 0:
                if chunk.release:
                    buffers = _buffers(chunk)
                    _abi.PY_VOID_FN(chunk.release)(ctypes.addressof(chunk))
        del s
    del out
    rec.check(
        rule,
        not device_ptr or device_ptr not in buffers,
        f"{method}() exports the device buffer 0x{device_ptr or 0:x} (data on device {where})",
    )
    return True


def check(obj, rec: Recorder) -> None:
    """Run the Arrow PyCapsule rules for every Arrow method ``obj`` has.

    For data the host cannot address, the CPU methods are judged on refusing it (or
    exporting a host copy) and otherwise skipped.
    """
    where = _common.device_location(obj)
    refused = set()
    for method in ("__arrow_c_array__", "__arrow_c_stream__"):
        if where is not None and hasattr(obj, method):
            if not _host_method_on_device(rec, obj, method, where):
                refused.add(method)

    def has(method):
        return method not in refused and hasattr(obj, method)

    if hasattr(obj, "__arrow_c_schema__"):
        cap = _call(rec, "arrow.schema.capsule-name", obj.__arrow_c_schema__)
        if cap is not None and _named(rec, "arrow.schema.capsule-name", cap, "arrow_schema"):
            schema = _abi.ArrowSchema.from_address(_abi.capsule_pointer(cap))
            if schema.release:
                _check_format(rec, schema, None, "__arrow_c_schema__: ")
            del schema
            box = [cap]
            del cap
            _watch_release(rec, box, _abi.ArrowSchema)
    for method, name, rule in (
        ("__arrow_c_array__", "arrow_array", "arrow.array.capsule-names"),
        ("__arrow_c_device_array__", "arrow_device_array", "arrow.device-array.capsule-names"),
    ):
        if has(method):
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
        if has(method):
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
                _check_stream_format(rec, obj, method, name, struct is _abi.ArrowDeviceArrayStream)
                box = _fresh_capsule(obj, method, name)
                if box:
                    _check_consumed(rec, box, struct)
                box = _fresh_capsule(obj, method, name)
                if box and struct is _abi.ArrowDeviceArrayStream:
                    _check_device_stream(rec, obj, box)
                del box
    for method in (
        "__arrow_c_array__",
        "__arrow_c_stream__",
        "__arrow_c_device_array__",
        "__arrow_c_device_stream__",
    ):
        if has(method):
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
        if has(method):
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
