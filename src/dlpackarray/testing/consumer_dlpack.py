"""The DLPack consumer rules: what ``from_dlpack``-like callables must do with a producer.

Each probe hands ``consume`` a crafted :class:`~dlpackarray.testing.consumer_craft.Producer`
(it records every call), then judges the calls, the capsule the consumer was given (its
name, how often and by whom the deleter ran) and the result (read through its own
protocols: :mod:`~dlpackarray.testing.consumer_read`).
"""

from __future__ import annotations

import gc

from dlpackarray.testing import _abi, _spec, report
from dlpackarray.testing.consumer_craft import (
    KDL_FLOAT,
    ExchangeProducer,
    LegacyProducer,
    Producer,
    Tensor,
)
from dlpackarray.testing.consumer_read import dlpack_header, read
from dlpackarray.testing.report import Recorder, rule_table

SEMANTICS = _spec.dlpack_python("Semantics", "semantics")
IMPLEMENTATION = _spec.dlpack_python("Implementation", "implementation")
FUTURE_ABI = _spec.dlpack_python("Future ABI Compatibility", "future-abi-compatibility")
DLTENSOR = _spec.dlpack_c("DLTensor", "c.DLTensor")
DTYPE = _spec.dlpack_c("DLDataType", "c.DLDataType")
VERSION = _spec.dlpack_c("DLPackVersion", "c.DLPackVersion")
NOTES = _spec.array_api_dlpack("Notes")
READ_ONLY = _spec.dlpack_c("DLPACK_FLAG_BITMASK_READ_ONLY", "c.DLPACK_FLAG_BITMASK_READ_ONLY")

RULES = rule_table(
    "dlpack_consumer",
    [
        (
            "consumer.dlpack.values",
            "must",
            "a C-contiguous float32 tensor imports with its shape and elements",
            f"{SEMANTICS}; {DLTENSOR}",
        ),
        (
            "consumer.dlpack.device-asked",
            "should",
            "the consumer asks __dlpack_device__ before __dlpack__ (to pick the stream)",
            f"{SEMANTICS}; " + _spec.array_api_device("Returns"),
        ),
        (
            "consumer.dlpack.max-version",
            "should",
            "the consumer passes max_version (a DLPack 1.x version) to __dlpack__",
            _spec.array_api_dlpack("Parameters (max_version)") + f"; {NOTES}",
        ),
        (
            "consumer.dlpack.max-version-fallback",
            "must",
            "when __dlpack__ rejects max_version with TypeError the consumer retries "
            "without it and imports the legacy capsule",
            f"{NOTES}; {FUTURE_ABI}",
        ),
        (
            "consumer.dlpack.stream-cpu",
            "must",
            "for CPU data the consumer passes no stream (None)",
            _spec.array_api_dlpack("Parameters (stream)") + f"; {SEMANTICS}",
        ),
        (
            "consumer.dlpack.copy-passed",
            "should",
            "a consumer whose API takes copy= passes it to __dlpack__ unchanged",
            _spec.array_api_from_dlpack("Parameters (copy)") + f"; {NOTES}",
        ),
        (
            "consumer.dlpack.device-passed",
            "should",
            "a consumer whose API takes device= and is asked for the CPU passes "
            "dl_device=(kDLCPU, 0) to __dlpack__ (dl_device=None asks for the producer's "
            "own device, not the one the caller named; omitting it is the retry after a "
            "producer rejected the keyword with TypeError, and this producer takes it)",
            _spec.array_api_from_dlpack("Parameters (device)")
            + "; "
            + _spec.array_api_dlpack("Parameters (dl_device)")
            + f"; {NOTES}",
        ),
        (
            "consumer.dlpack.capsule-renamed",
            "must",
            "a consumed capsule is renamed used_dltensor / used_dltensor_versioned",
            IMPLEMENTATION,
        ),
        (
            "consumer.dlpack.deleter-once",
            "must",
            "once the result and the capsule are gone the deleter has run exactly once, "
            "never twice by the consumer",
            IMPLEMENTATION,
        ),
        (
            "consumer.dlpack.keeps-alive",
            "must",
            "the result's memory stays valid after the producer and its capsule are dropped, "
            "until the consumer calls the deleter",
            f"{SEMANTICS}; {IMPLEMENTATION}",
        ),
        (
            "consumer.dlpack.read-only",
            "should",
            "a zero-copy import of a READ_ONLY tensor is read-only (or the consumer copies "
            "or refuses)",
            f"{READ_ONLY}; {NOTES}",
        ),
        (
            "consumer.dlpack.byte-offset",
            "must",
            "the data start at data + byte_offset",
            _spec.dlpack_c("DLTensor (byte_offset)", "c.DLTensor.byte_offset"),
        ),
        (
            "consumer.dlpack.null-strides",
            "must",
            "NULL strides mean a compact row-major (C-order) tensor",
            f"{IMPLEMENTATION}; " + _spec.dlpack_c("DLTensor (strides)", "c.DLTensor.strides"),
        ),
        (
            "consumer.dlpack.strides",
            "must",
            "explicit strides (in elements) place the elements",
            _spec.dlpack_c("DLTensor (strides)", "c.DLTensor.strides"),
        ),
        (
            "consumer.dlpack.zero-d",
            "must",
            "a 0-d tensor imports as a 0-d result holding its element",
            DLTENSOR,
        ),
        (
            "consumer.dlpack.zero-size",
            "must",
            "a zero-size tensor (NULL data) imports with its shape",
            f"{IMPLEMENTATION}; {DLTENSOR}",
        ),
        (
            "consumer.dlpack.unknown-dtype",
            "must",
            "an unknown dtype code is refused with an exception naming the problem "
            "(or kept as-is: the result re-exports the same dtype)",
            DTYPE + "; " + _spec.array_api_dlpack("Raises"),
        ),
        (
            "consumer.dlpack.unknown-bits",
            "must",
            "a float of a width the consumer has no type for (24 bits) is refused (or kept as-is)",
            DTYPE,
        ),
        (
            "consumer.dlpack.lanes",
            "must",
            "a vector dtype (lanes 4) the consumer cannot represent is refused (or kept as-is)",
            DTYPE,
        ),
        (
            "consumer.dlpack.newer-major",
            "must",
            "a versioned capsule of a major version above the consumer's is refused",
            f"{VERSION}; {FUTURE_ABI}",
        ),
        (
            "consumer.dlpack.impossible-device",
            "must",
            "data on a device the consumer does not know (device type 99) is refused "
            "(or kept as-is, never read)",
            f"{SEMANTICS}; " + _spec.dlpack_c("DLDevice", "c.DLDevice"),
        ),
        (
            "consumer.dlpack.refusal-cleanup",
            "must",
            "a refused capsule is left unconsumed (name kept, deleter not called by the "
            "consumer) or, if renamed, released exactly once",
            IMPLEMENTATION,
        ),
    ],
)

#: The element values every probe's tensor is built from.
MEMORY = [1.5, -2.0, 3.25, 4.0, 0.5, 6.0]


def _tensor(**kw) -> Tensor:
    kw.setdefault("shape", (6,))
    kw.setdefault("strides", (1,))
    return Tensor(kw.pop("memory", MEMORY), kw.pop("shape"), kw.pop("strides"), **kw)


class Refusal:
    """What a consumer raised, without the exception itself: its traceback would keep the
    consumer's frames -- and the capsule in them -- alive past the checks of the capsule."""

    def __init__(self, exc: BaseException):
        self.kind = type(exc)
        self.name = type(exc).__name__
        self.text = str(exc)
        #: False for a BaseException that is not an Exception (a Rust panic, SystemExit):
        #: ``except Exception`` in the caller does not catch it.
        self.is_exception = isinstance(exc, Exception)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"{self.name}({self.text!r})"


def _consume(consume, producer, what: str, **kw):
    """``(result, None)`` or ``(None, Refusal)``."""
    args = "".join(f", {k}={v!r}" for k, v in kw.items())
    report.note(None, None, f"consume(<producer of {what}>{args})")
    return call(consume, producer, **kw)


def call(consume, *args, **kw):
    """``(consume(*args, **kw), None)`` or ``(None, Refusal)``; the user's Ctrl-C
    (KeyboardInterrupt) goes through."""
    try:
        return consume(*args, **kw), None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the exception is the observation
        return None, Refusal(exc)


def refusal_problem(exc) -> str | None:
    """Why a refusal is not a clear one (None when it is)."""
    if not exc.is_exception:
        return (
            f"refused with {exc!r}, a BaseException that is not an Exception: "
            "`except Exception` does not catch it"
        )
    if not str(exc):
        return f"refused without a message ({exc!r})"
    return None


def _describe(exc) -> str:
    return f"{getattr(exc, 'name', type(exc).__name__)}: {exc}"


def _values(rec, rule, result, tensor, what) -> bool:
    """Judge ``result``'s shape and elements against ``tensor``."""
    try:
        view = read(result)
    except Exception as exc:  # noqa: BLE001 - an unreadable result fails the rule
        rec.fail(rule, f"{what}: reading the result raised {_describe(exc)}")
        return False
    want = tensor.logical()
    if tuple(view.shape) != tensor.shape or view.values != want:
        rec.fail(
            rule,
            f"{what}: the result has shape {tuple(view.shape)} and elements "
            f"{view.values[:8]}, expected {tensor.shape} and {want[:8]}",
        )
        return False
    rec.ok(rule)
    return True


def _judge_rename(rec, producer) -> None:
    exports = [e for e in producer.exports if not e.via_exchange]
    if not exports:
        return
    last = exports[-1]
    want = "used_dltensor_versioned" if last.versioned else "used_dltensor"
    name = last.capsule_name()
    rec.check(
        "consumer.dlpack.capsule-renamed",
        name == want,
        f"after importing a {'versioned' if last.versioned else 'legacy'} capsule the "
        f"consumer left it named {name!r}, not {want!r}",
    )


def _judge_release(rec, exports, rule="consumer.dlpack.deleter-once", what="") -> None:
    """With the result already dropped: drop the capsules and count the deleter calls."""
    where = f" ({what})" if what else ""
    for e in exports:
        if e.capsule is not None:
            e.last_name = e.capsule_name()
        e.capsule = None
    gc.collect()
    for e in exports:
        t = e.tally
        if t.by_consumer > 1:
            rec.fail(rule, f"the consumer called the deleter {t.by_consumer} times{where}")
        elif t.calls == 0:
            rec.fail(
                rule,
                f"the deleter never ran after the result and the capsule were gone{where}; "
                f"the capsule was last named {e.last_name!r}",
            )
    rec.ok(rule)


def _refusals(rec, consume, versioned_asked: bool) -> None:
    cases = [
        ("consumer.dlpack.unknown-dtype", _tensor(dtype=(99, 32, 1)), "dtype code 99"),
        ("consumer.dlpack.unknown-bits", _tensor(dtype=(KDL_FLOAT, 24, 1)), "float24"),
        ("consumer.dlpack.lanes", _tensor(dtype=(KDL_FLOAT, 32, 4)), "float32x4"),
        ("consumer.dlpack.newer-major", _tensor(version=(99, 0)), "DLPack 99.0"),
        ("consumer.dlpack.impossible-device", _tensor(device=(99, 0)), "device type 99"),
    ]
    for rule, tensor, what in cases:
        if rule == "consumer.dlpack.newer-major" and not versioned_asked:
            rec.na(rule, "the consumer never asks for a versioned capsule")
            continue
        if not rec.probe(rule, f"consume(<{what}>)"):
            continue
        producer = Producer(tensor)
        result, exc = _consume(consume, producer, what)
        if exc is None:
            kept = dlpack_header(result)
            want = (tensor.dtype, tensor.device, tensor.shape)
            if kept == want:
                rec.ok(rule, f"accepted and kept as-is: the result re-exports {kept}")
            else:
                rec.fail(
                    rule,
                    f"a tensor of {what} was accepted as {type(result).__name__}, which "
                    f"re-exports (dtype, device, shape) {kept}, not {want}",
                )
            del result
        elif refusal_problem(exc):
            rec.fail(rule, f"a tensor of {what}: {refusal_problem(exc)}")
        else:
            rec.ok(rule, _describe(exc))
        gc.collect()
        if not rec.probe("consumer.dlpack.refusal-cleanup", f"capsules of the {what} probe"):
            continue
        for e in producer.exports:
            name = e.capsule_name()
            used = name is not None and name.startswith("used_")
            if exc is not None and not used and e.tally.by_consumer:
                rec.fail(
                    "consumer.dlpack.refusal-cleanup",
                    f"refusing {what}, the consumer called the deleter of a capsule it left "
                    f"unconsumed ({name!r}): the capsule's destructor frees it again",
                )
        _judge_release(rec, producer.exports, "consumer.dlpack.refusal-cleanup", what)


def check(consume, rec: Recorder) -> None:
    """Run every DLPack consumer rule on ``consume``."""
    base = _tensor()
    if not rec.probe("consumer.dlpack.values", "consume(<float32 (6,)>)"):
        return
    producer = Producer(base)
    result, exc = _consume(consume, producer, "float32 (6,)")
    if exc is not None:
        why = f"the consumer refused a valid DLPack producer ({_describe(exc)})"
        for rule_id in rec.rules:
            rec.na(rule_id, why)
        return
    _values(rec, "consumer.dlpack.values", result, base, "float32 (6,)")
    try:
        seen = read(result)
    except Exception:  # noqa: BLE001 - consumer.dlpack.values reported it
        seen = None
    calls = producer.dlpack_calls()
    names = [name for name, _ in producer.calls]
    first = names.index("__dlpack__") if "__dlpack__" in names else len(names)
    rec.check(
        "consumer.dlpack.device-asked",
        "__dlpack_device__" in names[:first],
        f"calls made: {names}",
    )
    mv = calls[0].get("max_version") if calls else None
    rec.check(
        "consumer.dlpack.max-version",
        isinstance(mv, tuple) and len(mv) == 2 and mv[0] >= 1,
        f"__dlpack__ got max_version={mv!r}",
    )
    versioned_asked = any(isinstance(c.get("max_version"), tuple) for c in calls)
    streams = [c.get("stream") for c in calls]
    rec.check(
        "consumer.dlpack.stream-cpu",
        all(s is None for s in streams),
        f"CPU data, but __dlpack__ got stream={streams}",
    )
    _judge_rename(rec, producer)
    exports = producer.exports
    if rec.probe("consumer.dlpack.keeps-alive", "the result after the producer is gone"):
        del producer
        for e in exports:
            e.capsule = None
        gc.collect()
        calls_now = sum(e.tally.calls for e in exports)
        try:
            later = read(result)
        except Exception as e:  # noqa: BLE001 - an unreadable result fails the rule
            rec.fail("consumer.dlpack.keeps-alive", f"reading the result raised {_describe(e)}")
        else:
            rec.check(
                "consumer.dlpack.keeps-alive",
                seen is None or later.values == seen.values,
                f"after the producer and its capsule were dropped (deleter calls: "
                f"{calls_now}) the result holds {later.values[:8]}, it held "
                f"{seen.values[:8] if seen else None}",
            )
    del result
    gc.collect()
    if rec.probe("consumer.dlpack.deleter-once", "dropping the result"):
        _judge_release(rec, exports)

    _check_fallback(rec, consume)
    _check_copy(rec, consume)
    _check_device(rec, consume)
    _check_read_only(rec, consume)
    layouts = [
        ("consumer.dlpack.byte-offset", _tensor(lead=24), "float32 (6,) at byte_offset 24"),
        ("consumer.dlpack.null-strides", _tensor(shape=(2, 3), strides=None), "NULL strides"),
        ("consumer.dlpack.strides", _tensor(shape=(3, 2), strides=(1, 3)), "strides (1, 3)"),
        ("consumer.dlpack.zero-d", _tensor(memory=[7.5], shape=(), strides=()), "a 0-d tensor"),
        (
            "consumer.dlpack.zero-size",
            _tensor(memory=[], shape=(0, 3), strides=(3, 1), null_data=True),
            "shape (0, 3)",
        ),
    ]
    for rule, tensor, what in layouts:
        if not rec.probe(rule, f"consume(<{what}>)"):
            continue
        producer = Producer(tensor)
        result, exc = _consume(consume, producer, what)
        if exc is not None:
            rec.fail(rule, f"{what} was refused: {_describe(exc)}")
        else:
            _values(rec, rule, result, tensor, what)
            _judge_rename(rec, producer)
            del result
        if rec.probe("consumer.dlpack.deleter-once", f"dropping the {what} result"):
            _judge_release(rec, producer.exports)
    _refusals(rec, consume, versioned_asked)


def _check_fallback(rec, consume) -> None:
    rule = "consumer.dlpack.max-version-fallback"
    if not rec.probe(rule, "consume(<a producer without max_version>)"):
        return
    producer = LegacyProducer(_tensor())
    result, exc = _consume(consume, producer, "float32 (6,), __dlpack__(stream) only")
    if exc is not None:
        rec.fail(rule, f"a producer whose __dlpack__ takes no max_version: {_describe(exc)}")
    else:
        _values(rec, rule, result, producer.tensor, "the legacy capsule")
        _judge_rename(rec, producer)
        del result
    if rec.probe("consumer.dlpack.deleter-once", "dropping the legacy import"):
        _judge_release(rec, producer.exports)


def _check_copy(rec, consume) -> None:
    rule = "consumer.dlpack.copy-passed"
    if not rec.probe(rule, "consume(<producer>, copy=True / False)"):
        return
    for copy in (True, False):
        producer = Producer(_tensor())
        result, exc = _consume(consume, producer, "float32 (6,)", copy=copy)
        if exc is not None and issubclass(exc.kind, TypeError) and "copy" in str(exc):
            rec.na(rule, f"the consumer takes no copy keyword ({_describe(exc)})")
            return
        if exc is not None:
            rec.fail(rule, f"copy={copy}: {_describe(exc)}")
        else:
            got = [c.get("copy") for c in producer.dlpack_calls()]
            rec.check(rule, bool(got) and got[-1] is copy, f"copy={copy}, __dlpack__ got {got}")
        del result
        if rec.probe("consumer.dlpack.deleter-once", f"dropping the copy={copy} import"):
            _judge_release(rec, producer.exports)


def _device_refusal(exc) -> str | None:
    """Why a refusal of ``device="cpu"`` makes the device rule not applicable (None when
    it does not): no ``device`` keyword, or a library whose devices are its own objects
    and not the array API's ``"cpu"`` string (no other spelling is tried)."""
    if exc is None or not issubclass(exc.kind, (TypeError, ValueError)):
        return None
    text = str(exc)
    if issubclass(exc.kind, TypeError) and "device" in text and "keyword" in text:
        return f"the consumer takes no device keyword ({_describe(exc)})"
    if "device" in text.lower() or "cpu" in text.lower():
        return f'the consumer refuses "cpu" as a device ({_describe(exc)})'
    return None


def _check_device(rec, consume) -> None:
    rule = "consumer.dlpack.device-passed"
    if not rec.probe(rule, 'consume(<producer>, device="cpu")'):
        return
    producer = Producer(_tensor())
    result, exc = _consume(consume, producer, "float32 (6,)", device="cpu")
    got = [c.get("dl_device") for c in producer.dlpack_calls()]
    why = _device_refusal(exc)
    if why is not None:
        rec.na(rule, f"{why}; __dlpack__ got dl_device={got}")
    elif exc is not None:
        rec.fail(rule, f'device="cpu": {_describe(exc)}')
    else:
        last = got[-1] if got else None
        try:
            cpu = last is not None and tuple(last) == (_abi.KDL_CPU, 0)
        except TypeError:
            cpu = False
        rec.check(rule, cpu, f'device="cpu", __dlpack__ got dl_device={got}')
    del result
    if rec.probe("consumer.dlpack.deleter-once", 'dropping the device="cpu" import'):
        _judge_release(rec, producer.exports)


def _check_read_only(rec, consume) -> None:
    rule = "consumer.dlpack.read-only"
    for kind in (Producer, ExchangeProducer):
        path = "__dlpack__" if kind is Producer else "the DLPack C exchange API"
        if not rec.probe(rule, f"consume(<a READ_ONLY tensor offering {path}>)"):
            return
        producer = kind(_tensor(flags=_abi.FLAG_READ_ONLY))
        result, exc = _consume(consume, producer, f"a READ_ONLY float32 (6,) offering {path}")
        used = [name for name, _ in producer.calls if name != "__dlpack_device__"]
        if exc is not None:
            rec.ok(rule, f"refused: {_describe(exc)}")
        elif producer.exports:
            try:
                view = read(result)
            except Exception as e:  # noqa: BLE001 - an unreadable result fails the rule
                rec.fail(rule, f"reading the result raised {_describe(e)}")
                view = None
            if view is not None:
                lo, hi = producer.exports[-1].span
                aliases = view.address is not None and lo <= view.address < hi
                readonly = view.readonly or _buffer_readonly(result)
                rec.check(
                    rule,
                    not aliases or readonly,
                    f"a READ_ONLY tensor taken through {used} came back as a writable "
                    f"{type(result).__name__} over the same memory (read through its "
                    f"{view.how})",
                )
        del result
        _judge_release(rec, producer.exports, "consumer.dlpack.deleter-once")


def _buffer_readonly(obj) -> bool:
    try:
        info = _abi.buffer_info(obj)
    except Exception:  # noqa: BLE001 - no buffer protocol: nothing says read-only
        return False
    return bool(info and info["readonly"])
