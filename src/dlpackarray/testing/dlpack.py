"""Rules of the DLPack Python protocol: ``__dlpack__``, ``__dlpack_device__`` and the capsule.

Probes read the managed tensor through ctypes and watch the deleter by swapping the
struct's ``deleter`` pointer for a counting trampoline (``_abi.CallCounter``); the real
deleter still runs exactly once.  A producer whose pointers are garbage can crash these
reads: run the checker with ``isolate=True`` for untrusted producers.
"""

from __future__ import annotations

from dlpackarray import MAX_NDIM
from dlpackarray.testing import _abi, _forked, _spec, report
from dlpackarray.testing._common import object_memory
from dlpackarray.testing.report import Recorder, rule_table

SEMANTICS = _spec.dlpack_python("Semantics", "semantics")
IMPLEMENTATION = _spec.dlpack_python("Implementation", "implementation")
DLTENSOR = _spec.dlpack_c("DLTensor", "c.DLTensor")
VERSIONED = _spec.dlpack_c("DLManagedTensorVersioned", "c.DLManagedTensorVersioned")
FLAGS = _spec.dlpack_c(
    "DLPACK_FLAG_BITMASK_READ_ONLY, _IS_COPIED", "c.DLPACK_FLAG_BITMASK_READ_ONLY"
)

#: The newest DLPack version the checker understands; requests use it as max_version.
MAX_VERSION = (1, 3)
#: A device type no producer exports to (kDLVPI), for the unsupported-device probe.
UNSUPPORTED_DEVICE = (9, 0)

RULES = rule_table(
    "dlpack",
    [
        (
            "dlpack.device.pair",
            "must",
            "__dlpack_device__() returns a (device_type, device_id) pair of ints",
            _spec.array_api_dlpack("Parameters (dl_device)")
            + "; "
            + _spec.array_api_device("Returns"),
        ),
        (
            "dlpack.export.repeatable",
            "should",
            "__dlpack__() can be called again: every call returns a new capsule",
            _spec.array_api_dlpack("Returns"),
        ),
        (
            "dlpack.keywords.accepted",
            "must",
            "__dlpack__ accepts the keywords stream, max_version, dl_device and copy",
            _spec.array_api_dlpack("Parameters"),
        ),
        (
            "dlpack.keywords.keyword-only",
            "should",
            "__dlpack__'s parameters are keyword-only (a positional argument is a TypeError)",
            _spec.array_api_dlpack("Parameters (keyword-only)"),
        ),
        (
            "dlpack.capsule-name.versioned",
            "must",
            'max_version=(1, x) gives a "dltensor_versioned" capsule',
            f"{SEMANTICS}; " + _spec.array_api_dlpack("Parameters (max_version)"),
        ),
        (
            "dlpack.capsule-name.legacy",
            "must",
            'no max_version gives a legacy "dltensor" capsule (or BufferError)',
            f"{SEMANTICS}; " + _spec.array_api_dlpack("Parameters (max_version)"),
        ),
        (
            "dlpack.max-version.older-major",
            "must",
            "max_version with an older major gives a legacy capsule or BufferError, "
            "never a versioned one",
            f"{SEMANTICS}; " + _spec.array_api_dlpack("Parameters (max_version)"),
        ),
        (
            "dlpack.version.major",
            "must",
            "a versioned capsule's version.major is 1..max_version[0]",
            f"{VERSIONED}; " + _spec.array_api_dlpack("Parameters (max_version)"),
        ),
        (
            "dlpack.flags.known-bits",
            "should",
            "a versioned capsule sets no undefined flag bits",
            FLAGS,
        ),
        (
            "dlpack.capsule.destructor",
            "must",
            "a capsule whose tensor has a deleter has a capsule destructor (no leak when dropped)",
            IMPLEMENTATION,
        ),
        (
            "dlpack.deleter.non-null",
            "should",
            "the managed tensor's deleter is non-NULL",
            IMPLEMENTATION,
        ),
        (
            "dlpack.deleter.once-unconsumed",
            "must",
            "dropping an unconsumed capsule calls the deleter at most once (never twice)",
            IMPLEMENTATION,
        ),
        (
            "dlpack.deleter.via-struct",
            "should",
            "dropping an unconsumed capsule calls the struct's deleter pointer (the cleanup a "
            "consumer would run; 0 calls means a leak or a private cleanup path)",
            IMPLEMENTATION,
        ),
        (
            "dlpack.deleter.not-after-used-rename",
            "must",
            'dropping a capsule renamed "used_dltensor(_versioned)" does not call the deleter',
            IMPLEMENTATION,
        ),
        (
            "dlpack.device.agrees",
            "must",
            "the capsule's device equals __dlpack_device__()",
            _spec.array_api_dlpack("Parameters (dl_device)"),
        ),
        (
            "dlpack.dl-device.cpu",
            "must",
            "dl_device=(kDLCPU, 0) on host-accessible data gives a kDLCPU tensor",
            _spec.array_api_dlpack("Parameters (dl_device)"),
        ),
        (
            "dlpack.dl-device.unsupported-buffererror",
            "must",
            "a dl_device the producer cannot export to raises BufferError",
            _spec.array_api_dlpack("Raises"),
        ),
        (
            "dlpack.flags.read-only",
            "must",
            "read-only data is exported with DLPACK_FLAG_BITMASK_READ_ONLY",
            f"{FLAGS}; {IMPLEMENTATION}",
        ),
        (
            "dlpack.copy.true-new-memory",
            "must",
            "copy=True exports a copy (memory distinct from the object's)",
            _spec.array_api_dlpack("Parameters (copy)"),
        ),
        (
            "dlpack.copy.true-is-copied",
            "must",
            "copy=True sets DLPACK_FLAG_BITMASK_IS_COPIED",
            _spec.array_api_dlpack("Parameters (copy)"),
        ),
        (
            "dlpack.copy.false-no-copy",
            "must",
            "copy=False exports the object's own memory, without IS_COPIED",
            _spec.array_api_dlpack("Parameters (copy)"),
        ),
        (
            "dlpack.flags.is-copied-accurate",
            "should",
            "an export that aliases the object's memory does not set IS_COPIED",
            FLAGS,
        ),
        (
            "dlpack.tensor.shape",
            "must",
            f"0 <= ndim <= {MAX_NDIM} (the most DLPackArray accepts), shape non-NULL when "
            "ndim > 0, every extent >= 0",
            DLTENSOR,
        ),
        (
            "dlpack.tensor.dtype",
            "must",
            "dtype has bits > 0 and lanes >= 1",
            _spec.dlpack_c("DLDataType", "c.DLDataType"),
        ),
        (
            "dlpack.tensor.strides-non-null",
            "must",
            "strides are non-NULL when ndim != 0 in a capsule of version >= 1.2",
            f"{DLTENSOR}; {SEMANTICS}",
        ),
        (
            "dlpack.tensor.first-element",
            "must",
            "data + byte_offset is the address of the object's first element",
            _spec.dlpack_c("DLTensor (byte_offset)", "c.DLTensor.byte_offset"),
        ),
        (
            "dlpack.tensor.layout-agrees",
            "must",
            "shape, strides and item size agree with the object's buffer / array interface",
            DLTENSOR,
        ),
        (
            "dlpack.stream.cuda-zero-rejected",
            "should",
            "on a CUDA (or CUDA-managed) tensor stream=0 is refused (ambiguous; 1 and 2 name "
            "the default streams)",
            _spec.array_api_dlpack("Parameters (stream)") + f"; {SEMANTICS}",
        ),
        (
            "dlpack.stream.cpu-none-only",
            "should",
            "on a CPU tensor a stream other than None or -1 is refused",
            _spec.array_api_dlpack("Parameters (stream)") + f"; {SEMANTICS}",
        ),
        (
            "dlpack.stream.cuda-legal-accepted",
            "should",
            "on a CUDA (or CUDA-managed) tensor stream None, -1, 1 (legacy default), 2 "
            "(per-thread default) and the producer's own stream (> 2) are accepted",
            _spec.array_api_dlpack("Parameters (stream)") + f"; {SEMANTICS}",
        ),
        (
            "dlpack.stream.rocm-legal-accepted",
            "should",
            "on a ROCm tensor stream None, -1 and 0 (the default stream) are accepted",
            _spec.array_api_dlpack("Parameters (stream)"),
        ),
        (
            "dlpack.stream.rocm-reserved-rejected",
            "should",
            "on a ROCm tensor stream 1 and 2 (CUDA's default-stream values) are refused",
            _spec.array_api_dlpack("Parameters (stream)"),
        ),
        (
            "dlpack.stream.below-minus-one-rejected",
            "should",
            "on a CUDA or ROCm tensor a stream below -1 is refused (stream is an int >= -1)",
            _spec.array_api_dlpack("Parameters (stream)"),
        ),
        (
            "dlpack.stream.refusal-error-type",
            "should",
            "an illegal stream is refused with neither TypeError (a consumer's cue to retry "
            "without keywords, losing the stream) nor BufferError (the data is exportable)",
            _spec.array_api_dlpack("Raises"),
        ),
        (
            "dlpack.deleter.without-gil",
            "must",
            "the deleter of a consumed host-memory capsule runs correctly on a native thread "
            "that does not hold the GIL (probed in a forked child)",
            IMPLEMENTATION,
        ),
    ],
)

#: Stream-table device types -> (rule suffix, legal values, illegal non-negative values).
#: kDLCUDAHost (pinned) is absent on purpose: the spec's table names CUDA and ROCm only,
#: and producers differ (torch treats pinned memory as CPU, CuPy as CUDA).
STREAM_TABLE = {
    _abi.KDL_CUDA: ("cuda", (None, -1, 1, 2), (0,)),
    _abi.KDL_CUDA_MANAGED: ("cuda", (None, -1, 1, 2), (0,)),
    _abi.KDL_ROCM: ("rocm", (None, -1, 0), (1, 2)),
}


def ndim_in_range(ndim: int) -> bool:
    """Whether a tensor's ``ndim`` is one the checker reads shapes for: 0..MAX_NDIM, the
    bound DLPackArray itself accepts."""
    return 0 <= ndim <= MAX_NDIM


class _Capsule:
    """Fields of a DLPack capsule, read without consuming it."""

    def __init__(self, capsule):
        self.capsule = capsule
        self.name = _abi.capsule_name(capsule)
        self.versioned = self.name == "dltensor_versioned"
        self.address = _abi.capsule_pointer(capsule)
        cls = _abi.DLManagedTensorVersioned if self.versioned else _abi.DLManagedTensor
        self.struct = cls.from_address(self.address)
        t = self.struct.dl_tensor
        self.version = (
            (self.struct.version.major, self.struct.version.minor) if self.versioned else None
        )
        self.flags = self.struct.flags if self.versioned else 0
        self.deleter = self.struct.deleter or 0
        self.device = (t.device.device_type, t.device.device_id)
        self.ndim = t.ndim
        self.dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
        self.shape_null = not t.shape
        # The shape and strides arrays have ndim entries: an ndim outside 0..MAX_NDIM is
        # refused (dlpack.tensor.shape) before anything is read through them, so a hostile
        # ndim cannot make the checker read past their end.
        self.ndim_ok = ndim_in_range(self.ndim)
        n = self.ndim if self.ndim_ok else 0
        self.shape = () if self.shape_null else tuple(t.shape[i] for i in range(n))
        self.strides = None if not t.strides else tuple(t.strides[i] for i in range(n))
        self.first = (t.data or 0) + t.byte_offset

    @property
    def itemsize_bits(self) -> int:
        return self.dtype[1] * self.dtype[2]

    def element_strides(self) -> tuple:
        if self.strides is not None:
            return self.strides
        out, step = [], 1
        for extent in reversed(self.shape):
            out.append(step)
            step *= max(extent, 1)
        return tuple(reversed(out))


class _BadCapsule(Exception):
    """``__dlpack__`` returned, but not a DLPack capsule."""


def _export(obj, **kw):
    """``(capsule fields, None)`` or ``(None, exception)``."""
    report.note(None, None, f"__dlpack__({', '.join(f'{k}={v!r}' for k, v in kw.items())})")
    try:
        cap = obj.__dlpack__(**kw)
    except Exception as exc:  # noqa: BLE001 - the exception is the observation
        return None, exc
    if not _abi.is_capsule(cap):
        return None, _BadCapsule(f"__dlpack__ returned {type(cap).__name__}, not a PyCapsule")
    if _abi.capsule_name(cap) not in ("dltensor", "dltensor_versioned"):
        return None, _BadCapsule(f"capsule name {_abi.capsule_name(cap)!r}")
    return _Capsule(cap), None


def _describe(exc) -> str:
    return f"{type(exc).__name__}: {exc}"


def _is_keyword_error(exc) -> bool:
    return isinstance(exc, TypeError) and "keyword" in str(exc)


def check(obj, rec: Recorder) -> None:
    """Run every DLPack rule on ``obj`` (which has ``__dlpack__``)."""
    device = _check_device(obj, rec)
    first = _check_legacy(obj, rec)
    # A second identical call must behave like the first (a new capsule each time).
    if not rec.probe("dlpack.export.repeatable", "a second __dlpack__()"):
        return
    again, exc = _export(obj)
    repeatable = (
        again is not None
        or isinstance(exc, (BufferError, _BadCapsule))
        or (first is not None and type(first) is type(exc))
    )
    del again
    if not rec.check(
        "dlpack.export.repeatable",
        repeatable,
        f"__dlpack__() after a first export raised {_describe(exc)}",
    ):
        # Later probes would only see the same error; the keyword check needs no export.
        _, exc = _export(obj, stream=None, max_version=MAX_VERSION, dl_device=None, copy=None)
        if _is_keyword_error(exc):
            rec.fail("dlpack.keywords.accepted", _describe(exc))
        return
    _check_older_major(obj, rec)
    _check_keywords(obj, rec, device)
    if not rec.probe("dlpack.capsule-name.versioned", f"__dlpack__(max_version={MAX_VERSION})"):
        return
    cap, exc = _export(obj, max_version=MAX_VERSION)
    if cap is None:
        why = _describe(exc)
        if isinstance(exc, _BadCapsule) or not _is_keyword_error(exc):
            rec.fail("dlpack.capsule-name.versioned", f"max_version={MAX_VERSION}: {why}")
        else:
            rec.na("dlpack.capsule-name.versioned", f"max_version not accepted: {why}")
        return
    rec.check(
        "dlpack.capsule-name.versioned",
        cap.versioned,
        f"max_version={MAX_VERSION} gave {cap.name!r}",
    )
    _check_struct(obj, rec, cap, device)
    _check_deleter(obj, rec, cap)
    memory = object_memory(obj)
    _check_layout(rec, cap, memory)
    _check_copy(obj, rec, cap, memory)
    del cap
    if device is not None and device[0] == _abi.KDL_CPU:
        _check_cpu(obj, rec)
    if device is not None and device[0] in STREAM_TABLE:
        _check_streams(obj, rec, device)
    _check_deleter_without_gil(obj, rec)


def _check_device(obj, rec):
    if not rec.probe("dlpack.device.pair", "__dlpack_device__()"):
        return None
    try:
        dev = obj.__dlpack_device__()
    except Exception as exc:  # noqa: BLE001
        rec.fail("dlpack.device.pair", f"__dlpack_device__() raised {_describe(exc)}")
        return None
    good = (
        isinstance(dev, tuple)
        and len(dev) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in dev)
    )
    rec.check("dlpack.device.pair", good, f"__dlpack_device__() returned {dev!r}")
    return (int(dev[0]), int(dev[1])) if good else None


def _check_keywords(obj, rec, device):
    kw = {"stream": None, "max_version": MAX_VERSION, "dl_device": device, "copy": None}
    if rec.probe("dlpack.keywords.accepted", "__dlpack__ with every keyword"):
        cap, exc = _export(obj, **kw)
        if cap is None and isinstance(exc, TypeError) and not str(exc).startswith("__dlpack__"):
            rec.fail("dlpack.keywords.accepted", _describe(exc))
        else:
            rec.ok("dlpack.keywords.accepted")
        del cap
    if not rec.probe("dlpack.keywords.keyword-only", "__dlpack__(None)"):
        return
    try:
        c = obj.__dlpack__(None)
    except TypeError:
        rec.ok("dlpack.keywords.keyword-only")
    except Exception as exc:  # noqa: BLE001
        rec.fail("dlpack.keywords.keyword-only", f"positional call raised {_describe(exc)}")
    else:
        del c
        rec.fail("dlpack.keywords.keyword-only", "__dlpack__(None) was accepted positionally")


def _check_legacy(obj, rec):
    """The legacy-name rule; returns the exception of ``__dlpack__()``, if any."""
    if not rec.probe("dlpack.capsule-name.legacy", "__dlpack__()"):
        return None
    cap, exc = _export(obj)
    if cap is None:
        rec.check(
            "dlpack.capsule-name.legacy",
            isinstance(exc, BufferError),
            f"__dlpack__() raised {_describe(exc)}",
        )
        return exc
    rec.check("dlpack.capsule-name.legacy", not cap.versioned, f"__dlpack__() gave {cap.name!r}")
    return None


def _check_older_major(obj, rec):
    if not rec.probe("dlpack.max-version.older-major", "__dlpack__(max_version=(0, 8))"):
        return
    cap, exc = _export(obj, max_version=(0, 8))
    if cap is None:
        if _is_keyword_error(exc):
            rec.na("dlpack.max-version.older-major", "max_version not accepted")
        else:
            rec.check(
                "dlpack.max-version.older-major",
                isinstance(exc, BufferError),
                f"max_version=(0, 8) raised {_describe(exc)}",
            )
    else:
        rec.check(
            "dlpack.max-version.older-major",
            not cap.versioned,
            "max_version=(0, 8) gave a versioned capsule",
        )


def _check_struct(obj, rec, cap, device):
    if cap.version is not None:
        rec.check(
            "dlpack.version.major",
            1 <= cap.version[0] <= MAX_VERSION[0],
            f"version {cap.version} for max_version={MAX_VERSION}",
        )
        rec.check(
            "dlpack.flags.known-bits",
            not cap.flags & ~_abi.KNOWN_FLAGS,
            f"flags 0x{cap.flags:x} has undefined bits",
        )
    if not cap.ndim_ok:
        rec.fail(
            "dlpack.tensor.shape",
            f"ndim={cap.ndim} is outside 0..{MAX_NDIM}: shape and strides not read",
        )
    else:
        rec.check(
            "dlpack.tensor.shape",
            (cap.ndim == 0 or not cap.shape_null) and min(cap.shape, default=0) >= 0,
            f"ndim={cap.ndim}, shape={'NULL' if cap.shape_null else cap.shape}",
        )
    rec.check(
        "dlpack.tensor.dtype",
        cap.dtype[1] > 0 and cap.dtype[2] >= 1,
        f"dtype (code, bits, lanes) = {cap.dtype}",
    )
    if cap.version is not None and cap.version >= (1, 2) and cap.ndim > 0:
        rec.check(
            "dlpack.tensor.strides-non-null",
            cap.strides is not None,
            f"strides NULL with ndim={cap.ndim} in a version {cap.version} capsule",
        )
    if device is not None:
        rec.check(
            "dlpack.device.agrees",
            cap.device == device,
            f"capsule device {cap.device} but __dlpack_device__() = {device}",
        )


def _check_deleter(obj, rec, cap):
    rec.check("dlpack.deleter.non-null", bool(cap.deleter), "deleter is NULL")
    if not cap.deleter:
        return
    if not rec.check(
        "dlpack.capsule.destructor",
        _abi.has_destructor(cap.capsule),
        "capsule has no destructor: an unconsumed export leaks",
    ):
        return
    # Unconsumed: the producer's destructor must run the deleter once.
    if not rec.probe("dlpack.deleter.once-unconsumed", "drop an unconsumed capsule"):
        return
    counter = _abi.CallCounter(cap.deleter, forward=True, struct=cap.address)
    cap.struct.deleter = counter.address
    name = cap.name
    del cap.capsule
    rec.check(
        "dlpack.deleter.once-unconsumed",
        counter.calls <= 1,
        f"deleter called {counter.calls} times when the unconsumed capsule was dropped",
    )
    rec.check(
        "dlpack.deleter.via-struct",
        counter.calls >= 1,
        "the capsule destructor did not call the struct's deleter",
    )
    # Consumed: after the used_ rename the destructor must leave the deleter to the consumer.
    if not rec.probe("dlpack.deleter.not-after-used-rename", "drop a used_ capsule"):
        return
    again, exc = (
        _export(obj, max_version=MAX_VERSION) if name == "dltensor_versioned" else _export(obj)
    )
    if again is None or not again.deleter:
        return
    original, address = again.deleter, again.address
    counter = _abi.CallCounter(original, forward=False, struct=address)
    again.struct.deleter = counter.address
    _abi.rename_used(again.capsule, again.name)
    del again.capsule
    rec.check(
        "dlpack.deleter.not-after-used-rename",
        counter.calls == 0,
        f"the destructor called the deleter {counter.calls} times after the used_ rename",
    )
    if counter.calls == 0:  # the consumer's own call (had the producer made it, it is done)
        _abi.PY_VOID_FN(original)(address)


def _check_layout(rec, cap, memory):
    if memory is None:
        return
    if memory["nbytes"]:
        rec.check(
            "dlpack.tensor.first-element",
            cap.first == memory["ptr"],
            f"data + byte_offset = 0x{cap.first:x} but the object's data is at 0x{memory['ptr']:x}",
        )
    if memory.get("readonly") and cap.versioned:
        rec.check(
            "dlpack.flags.read-only",
            bool(cap.flags & _abi.FLAG_READ_ONLY),
            "the object's memory is read-only but READ_ONLY is not set",
        )
    if not cap.ndim_ok or cap.shape_null or min(cap.shape, default=0) < 0 or cap.itemsize_bits <= 0:
        return  # dlpack.tensor.shape / dtype already fail; nothing to compare
    problems = []
    if tuple(cap.shape) != tuple(memory["shape"]):
        problems.append(f"shape {cap.shape} vs {memory['shape']}")
    elif cap.itemsize_bits != memory["itemsize"] * 8:
        problems.append(f"{cap.itemsize_bits} bits per item vs itemsize {memory['itemsize']}")
    elif 0 not in cap.shape and memory["strides"] is not None:
        mine = cap.element_strides()
        for axis, extent in enumerate(cap.shape):
            byte_stride = mine[axis] * cap.itemsize_bits // 8
            if extent > 1 and byte_stride != memory["strides"][axis]:
                problems.append(
                    f"axis {axis}: stride {byte_stride} vs {memory['strides'][axis]} bytes"
                )
    rec.check("dlpack.tensor.layout-agrees", not problems, "; ".join(problems))


def _check_copy(obj, rec, cap, memory):
    # The object's own memory as its producer exports it: the default export when that
    # aliases (no IS_COPIED), else what the buffer / array interface says.
    aliases = not (cap.versioned and cap.flags & _abi.FLAG_IS_COPIED)
    ref = cap.first if aliases else (memory["ptr"] if memory is not None else None)
    empty = memory is not None and not memory["nbytes"]
    if cap.versioned and memory is not None and not empty:
        rec.check(
            "dlpack.flags.is-copied-accurate",
            not (cap.first == memory["ptr"] and cap.flags & _abi.FLAG_IS_COPIED),
            "IS_COPIED set on an export of the object's own memory",
        )
    # copy=True: `cap` stays alive so a fresh allocation cannot reuse the object's address.
    copied = exc = None
    if rec.probe("dlpack.copy.true-new-memory", "__dlpack__(copy=True)"):
        copied, exc = _export(obj, max_version=MAX_VERSION, copy=True)
    if exc is None and copied is None:
        pass
    elif copied is None:
        if _is_keyword_error(exc):
            rec.na("dlpack.copy.true-new-memory", "copy keyword not accepted")
        else:
            rec.fail("dlpack.copy.true-new-memory", f"copy=True raised {_describe(exc)}")
    else:
        own = {p for p in (ref, memory["ptr"] if memory is not None else None) if p}
        if not empty and own:
            rec.check(
                "dlpack.copy.true-new-memory",
                copied.first not in own,
                "copy=True exported the object's own memory",
            )
        if copied.versioned:
            rec.check(
                "dlpack.copy.true-is-copied",
                bool(copied.flags & _abi.FLAG_IS_COPIED),
                "copy=True export lacks IS_COPIED",
            )
    del copied
    if not rec.probe("dlpack.copy.false-no-copy", "__dlpack__(copy=False)"):
        return
    same, exc = _export(obj, max_version=MAX_VERSION, copy=False)
    if same is None:
        if _is_keyword_error(exc):
            rec.na("dlpack.copy.false-no-copy", "copy keyword not accepted")
        elif aliases:
            rec.fail("dlpack.copy.false-no-copy", f"copy=False raised {_describe(exc)}")
        return
    problems = []
    if same.versioned and same.flags & _abi.FLAG_IS_COPIED:
        problems.append("copy=False export has IS_COPIED")
    if ref is not None and not empty and same.first != ref:
        problems.append("copy=False exported different memory")
    rec.check("dlpack.copy.false-no-copy", not problems, "; ".join(problems))


def _check_cpu(obj, rec):
    cap = exc = None
    if rec.probe("dlpack.dl-device.cpu", "__dlpack__(dl_device=(kDLCPU, 0))"):
        cap, exc = _export(obj, max_version=MAX_VERSION, dl_device=(_abi.KDL_CPU, 0))
    if exc is None and cap is None:
        pass
    elif cap is None:
        if _is_keyword_error(exc):
            rec.na("dlpack.dl-device.cpu", "dl_device keyword not accepted")
        else:
            rec.fail("dlpack.dl-device.cpu", f"dl_device=(kDLCPU, 0) raised {_describe(exc)}")
    else:
        rec.check("dlpack.dl-device.cpu", cap.device[0] == _abi.KDL_CPU, f"device {cap.device}")
    del cap
    cap = exc = None
    if rec.probe("dlpack.dl-device.unsupported-buffererror", f"dl_device={UNSUPPORTED_DEVICE}"):
        cap, exc = _export(obj, max_version=MAX_VERSION, dl_device=UNSUPPORTED_DEVICE)
    if exc is None and cap is None:
        pass
    elif cap is None and _is_keyword_error(exc):
        rec.na("dlpack.dl-device.unsupported-buffererror", "dl_device keyword not accepted")
    elif cap is None:
        rec.check(
            "dlpack.dl-device.unsupported-buffererror",
            isinstance(exc, BufferError),
            f"dl_device={UNSUPPORTED_DEVICE} raised {_describe(exc)}",
        )
    else:
        rec.check(
            "dlpack.dl-device.unsupported-buffererror",
            cap.device == UNSUPPORTED_DEVICE,
            f"dl_device={UNSUPPORTED_DEVICE} gave a tensor on {cap.device}",
        )
    del cap
    if not rec.probe("dlpack.stream.cpu-none-only", "__dlpack__(stream=2) on a CPU tensor"):
        return
    cap, exc = _export(obj, max_version=MAX_VERSION, stream=2)
    rec.check(
        "dlpack.stream.cpu-none-only",
        cap is None,
        "stream=2 accepted for a CPU tensor (CPU takes only stream=None)",
    )
    if cap is None:
        _check_refusal(rec, 2, exc)


def _check_refusal(rec, stream, exc):
    if _is_keyword_error(exc):  # no stream keyword at all: dlpack.keywords.accepted's case
        rec.na("dlpack.stream.refusal-error-type", f"stream={stream}: {_describe(exc)}")
        return
    rec.check(
        "dlpack.stream.refusal-error-type",
        not isinstance(exc, (TypeError, BufferError)),
        f"stream={stream} was refused with {_describe(exc)}",
    )


def _own_stream(obj):
    """The stream the producer itself names (``__cuda_array_interface__['stream']``), when
    it is a stream handle (> 2): a real stream to pass without the checker touching the
    driver."""
    try:
        stream = obj.__cuda_array_interface__.get("stream")
    except Exception:  # noqa: BLE001 - no (valid) interface: no own stream to try
        return None
    ok = isinstance(stream, int) and not isinstance(stream, bool) and stream > 2
    return stream if ok else None


def _check_streams(obj, rec, device):
    """The stream value table of the spec, for a tensor on a stream device.

    Only values are passed; the checker never creates a stream nor reads device memory
    (a producer that synchronises does so through its own driver calls).
    """
    kind, legal, illegal = STREAM_TABLE[device[0]]
    own = _own_stream(obj)
    refused = []
    if rec.probe(f"dlpack.stream.{kind}-legal-accepted", f"streams {legal} and own {own}"):
        for stream in (*legal, *(() if own is None else (own,))):
            cap, exc = _export(obj, max_version=MAX_VERSION, stream=stream)
            if cap is None:
                refused.append(f"stream={stream!r}: {_describe(exc)}")
            del cap
        rec.check(f"dlpack.stream.{kind}-legal-accepted", not refused, "; ".join(refused))
    accepted = []
    reserved = "dlpack.stream.cuda-zero-rejected" if kind == "cuda" else (
        "dlpack.stream.rocm-reserved-rejected")  # fmt: skip
    for stream in illegal if rec.probe(reserved, f"streams {illegal}") else ():
        cap, exc = _export(obj, max_version=MAX_VERSION, stream=stream)
        if cap is None:
            _check_refusal(rec, stream, exc)
        if cap is not None or _is_keyword_error(exc):
            accepted.append(stream)
        del cap
    if reserved in rec.skip:
        pass
    elif kind == "cuda":
        rec.check(
            "dlpack.stream.cuda-zero-rejected",
            not accepted,
            f"stream=0 accepted for a tensor on device type {device[0]}",
        )
    else:
        rec.check(
            "dlpack.stream.rocm-reserved-rejected",
            not accepted,
            f"stream={accepted} accepted for a ROCm tensor",
        )
    if not rec.probe("dlpack.stream.below-minus-one-rejected", "__dlpack__(stream=-2)"):
        return
    cap, exc = _export(obj, max_version=MAX_VERSION, stream=-2)
    if cap is None:
        _check_refusal(rec, -2, exc)
    rec.check(
        "dlpack.stream.below-minus-one-rejected",
        cap is None and not _is_keyword_error(exc),
        f"stream=-2 accepted for a tensor on device type {device[0]}",
    )


def _check_deleter_without_gil(obj, rec):
    rule = "dlpack.deleter.without-gil"
    if not rec.probe(rule, "the deleter on a native thread, in a forked child"):
        return
    cap, exc = _export(obj, max_version=MAX_VERSION)
    if cap is None:
        cap, exc = _export(obj)
    if cap is None or not cap.deleter:
        return
    if cap.device[0] != _abi.KDL_CPU:
        # A forked child cannot use the parent's device context, and freeing device memory
        # is what such a deleter does: no verdict rather than a false one.
        rec.na(rule, f"probed only for host memory (capsule on device {cap.device})")
        return
    if not _forked.available():
        rec.na(rule, "needs os.fork")
        return
    # Consume it as a consumer does; the deleter is then ours to call, once per process.
    _abi.rename_used(cap.capsule, cap.name)
    deleter, address = cap.deleter, cap.address
    ok, why = _forked.run(lambda: _abi.call_on_native_thread(deleter, address))
    _abi.PY_VOID_FN(deleter)(address)  # the parent's own copy, with the GIL held
    if ok is None:
        rec.na(rule, why)
    else:
        rec.check(rule, ok, f"the deleter, called on a thread without the GIL, {why}")


__all__ = ["RULES", "check"]
