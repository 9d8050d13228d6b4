"""Conformance checks for producers -- and consumers -- of the array exchange protocols.

``check_conformance(obj)`` runs every applicable rule for every protocol ``obj`` offers --
DLPack, the buffer protocol, ``__array_interface__`` / ``__array_struct__``,
``__cuda_array_interface__``, the Arrow PyCapsule interface and the DLPack C exchange
API -- and returns a :class:`ConformanceReport`; ``check_consumer(consume)`` judges the
other side, what a ``from_dlpack`` or an Arrow reader does with the producers it is handed
(:mod:`dlpackarray.testing.consumer`).  Pure Python (ctypes) but for the consumer
checker's C callbacks (``dlpackarray._crafted``); NumPy is not needed.  See
docs/testing.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from dlpackarray.testing import (
    _common,
    _interrupts,
    _spec,
    arrow,
    buffer,
    cuda,
    dlpack,
    exchange,
    host_only,
    report,
)
from dlpackarray.testing import array_interface as _ai
from dlpackarray.testing._isolate import run_isolated
from dlpackarray.testing.report import (
    NOT_APPLICABLE,
    ConformanceReport,
    Recorder,
    Result,
    Rule,
    rule_table,
)

#: Protocol family -> (detector, checker) for every family the checker knows.
_PROCESS = rule_table(
    "process",
    [
        (
            "process.no-crash",
            "must",
            "the probes run to completion without crashing the interpreter (isolate=True)",
            _spec.dlpack_python("Implementation", "implementation"),
        ),
    ],
)


def _has_arrow(obj) -> bool:
    return any(
        hasattr(obj, m)
        for m in (
            "__arrow_c_schema__",
            "__arrow_c_array__",
            "__arrow_c_stream__",
            "__arrow_c_device_array__",
            "__arrow_c_device_stream__",
        )
    )


def _has_exchange(obj) -> bool:
    return hasattr(type(obj), "__dlpack_c_exchange_api__") or hasattr(
        obj, "__dlpack_c_exchange_api__"
    )


#: name -> (rules, offered(obj), check(obj, recorder)); the order of the report.
FAMILIES = {
    "dlpack": (dlpack.RULES, lambda o: hasattr(o, "__dlpack__"), dlpack.check),
    "buffer": (buffer.RULES, host_only.FAMILIES["buffer"][1], buffer.check),
    "array_interface": (
        {k: v for k, v in _ai.RULES.items() if k.startswith("array-interface.")},
        lambda o: hasattr(o, "__array_interface__"),
        _ai.check,
    ),
    "array_struct": (
        {k: v for k, v in _ai.RULES.items() if k.startswith("array-struct.")},
        lambda o: hasattr(o, "__array_struct__"),
        _ai.check_struct,
    ),
    "cuda_array_interface": (
        cuda.RULES,
        lambda o: hasattr(o, "__cuda_array_interface__"),
        cuda.check,
    ),
    "arrow": (arrow.RULES, _has_arrow, arrow.check),
    "exchange": (exchange.RULES, _has_exchange, exchange.check),
}

#: Every rule, by id.
RULES: dict[str, Rule] = {}
for _family in FAMILIES.values():
    RULES.update(_family[0])
RULES.update(_PROCESS)


def check_conformance(
    obj, *, protocols: Iterable[str] | None = None, isolate: bool = False
) -> ConformanceReport:
    """Check ``obj``'s exports against every rule of the protocols it offers.

    Parameters
    ----------
    obj : object
        The producer (an array, a tensor, an Arrow array ...).  With ``isolate=True``, a
        Python expression (str) naming it, evaluated like ``python -m dlpackarray inspect``.
    protocols : str or iterable of str, optional
        Restrict the check to these families (keys of :data:`FAMILIES`; one name as a str
        is that one family); default all.  An unknown name raises ``ValueError``.
    isolate : bool
        Run the probes in a child interpreter, so a producer that crashes (a deleter that
        frees twice, garbage pointers) or hangs fails rule ``process.no-crash`` instead of
        killing or blocking the caller.  One child may run 60 s
        (``_isolate.TIMEOUT``) and all of one check's children together 120 s
        (``_isolate.TOTAL_TIMEOUT``); a child that runs out is killed with every process
        it started.

    Every exception a producer raises -- ``SystemExit``, ``GeneratorExit``,
    ``KeyboardInterrupt`` and bare ``BaseException`` included -- is reported as its
    failure, never raised; only a SIGINT delivered during the check (the user's Ctrl-C,
    seen when the check runs in the main thread with Python's default handler) raises
    ``KeyboardInterrupt``.

    Returns
    -------
    ConformanceReport
        One result per rule: ``pass``, ``fail`` or ``not-applicable``.
    """
    protocols = _families(protocols)
    if isolate:
        if not isinstance(obj, str):
            raise TypeError("isolate=True takes the producer as an expression (str)")
        return run_isolated(obj, protocols, report_from_json, _PROCESS["process.no-crash"])
    return _check(obj, protocols)


def _families(protocols) -> list[str] | None:
    """``protocols`` as a list of family names: one name (a str) is one family, not its
    letters; unknown names raise ``ValueError`` before anything is probed."""
    if protocols is None:
        return None
    names = [protocols] if isinstance(protocols, str) else list(protocols)
    unknown = [n for n in names if not isinstance(n, str) or n not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown protocol families {unknown!r}; known: {list(FAMILIES)}")
    return names


def _check(obj, protocols=None, skip: Iterable[str] = ()) -> ConformanceReport:
    """``check_conformance`` in this process; ``skip``: families and rules whose probes
    crashed an earlier isolated run (``_isolate``), left out of this one."""
    protocols = _families(protocols)
    wanted = set(FAMILIES if protocols is None else protocols)
    skip = frozenset(skip)
    results: list[Result] = []
    with _interrupts.Watch() as ctrl_c:
        try:
            where = _common.device_location(obj)
        except BaseException as exc:  # noqa: BLE001 - dlpack.device.pair reports it
            ctrl_c.reraise_if_user(exc)
            where = None
        for name, (rules, offered, check) in FAMILIES.items():
            rec = Recorder(rules, skip)
            if name not in wanted:
                why = "not requested"
            elif name in skip:
                why = "not probed: this family's probes crashed the interpreter (process.no-crash)"
            else:
                report.note(name, None, "is the protocol offered?")
                why = _run_family(name, obj, rec, where, offered, check, ctrl_c)
            for rule_id, rule in rules.items():
                status, message = rec.outcomes.get(rule_id, (NOT_APPLICABLE, why))
                results.append(Result(rule, status, message))
    report.note("process", None, "all probes done")
    results.append(Result(_PROCESS["process.no-crash"], "pass", ""))
    return ConformanceReport(_subject(obj), results)


def _run_family(name, obj, rec, where, offered, check, ctrl_c) -> str:
    """Run one family's probes; returns why its unreached rules are not applicable."""
    try:
        if where is not None and name in host_only.FAMILIES:
            # Data the host cannot address: the host-only protocol must refuse it.
            if not host_only.FAMILIES[name][1](obj):
                return "protocol not offered"
            rule = host_only.FAMILIES[name][0]
            if not rec.probe(rule, f"the {name} protocol on data on device {where}"):
                return "not probed (process.no-crash)"
            if not host_only.judge(name, obj, rec, where, _common.device_pointer(obj)):
                return f"host-only protocol; the data is on device {where}"
        elif not offered(obj):
            return "protocol not offered"
        check(obj, rec)
    except BaseException as exc:  # noqa: BLE001 - reported, never raised
        # SystemExit, GeneratorExit, KeyboardInterrupt or a bare BaseException out of the
        # producer is its failure too; only the user's own Ctrl-C stops the check.
        ctrl_c.reraise_if_user(exc)
        rules = rec.rules
        first = next((r for r in rules if r not in rec.outcomes), next(iter(rules)))
        rec.fail(rec.current or first, f"probe raised {_interrupts.describe(exc, ctrl_c)}")
    return "no probe reached this rule"


def _subject(obj) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def report_from_json(text: str) -> ConformanceReport:
    """Rebuild a report from :meth:`ConformanceReport.to_json` output."""
    data = json.loads(text)
    results = [Result(RULES[r["rule"]], r["status"], r["message"]) for r in data["results"]]
    return ConformanceReport(data["subject"], results)


def assert_conforms(obj, *, protocols: Iterable[str] | None = None) -> ConformanceReport:
    """Raise ``AssertionError`` listing every failed *must* rule of ``obj``.

    Returns the report when ``obj`` conforms (``should`` failures do not raise).
    """
    report = check_conformance(obj, protocols=protocols)
    if not report.ok:
        failed = "\n".join(
            f"  {r.rule.id}: {r.message} ({r.rule.reference})" for r in report.failures("must")
        )
        raise AssertionError(
            f"{report.subject} breaks {len(report.failures('must'))} must rule(s):\n{failed}"
        )
    return report


# The consumer side (after RULES: it shares process.no-crash with the producer checker).
from dlpackarray.testing.consumer import (  # noqa: E402
    assert_consumer_conforms,
    check_consumer,
)

__all__ = [
    "FAMILIES",
    "RULES",
    "ConformanceReport",
    "Result",
    "Rule",
    "assert_conforms",
    "assert_consumer_conforms",
    "check_conformance",
    "check_consumer",
    "report_from_json",
]
