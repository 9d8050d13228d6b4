"""Conformance checks for consumers: ``from_dlpack``, ``pa.array``, ``pl.from_arrow`` ...

``check_consumer(consume)`` hands ``consume`` crafted producers -- objects whose
``__dlpack__`` / ``__arrow_c_*__`` methods record every call and whose capsules count
their deleter / release calls -- and judges what the consumer does with them against the
consumer's side of the DLPack and Arrow PyCapsule specifications.  A family whose valid
baseline producer the consumer refuses is not applicable (``consume`` is not a consumer
of that protocol).  See docs/testing.md.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator

from dlpackarray.testing import _interrupts, consumer_arrow, consumer_dlpack, report
from dlpackarray.testing._isolate import run_isolated
from dlpackarray.testing.report import NOT_APPLICABLE, ConformanceReport, Recorder, Result, Rule

#: name -> (rules, check(consume, recorder)); the order of the report.
FAMILIES = {
    "dlpack": (consumer_dlpack.RULES, consumer_dlpack.check),
    "arrow": (consumer_arrow.RULES, consumer_arrow.check),
}


def _no_crash() -> Rule:
    from dlpackarray.testing import RULES as PRODUCER_RULES

    return PRODUCER_RULES["process.no-crash"]


#: Every consumer rule, by id (with ``process.no-crash``, shared with the producer checker).
RULES: dict[str, Rule] = {}
for _family in FAMILIES.values():
    RULES.update(_family[0])


def families(names) -> list[str] | None:
    """``names`` as a list of consumer family names (one str is one family); unknown names
    raise ``ValueError`` before anything is probed."""
    if names is None:
        return None
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if not isinstance(n, str) or n not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown consumer families {unknown!r}; known: {list(FAMILIES)}")
    return names


def check_consumer(
    consume: Callable | str,
    *,
    families: Iterable[str] | str | None = None,
    isolate: bool = False,
) -> ConformanceReport:
    """Check what ``consume`` does with the producers it is handed.

    Parameters
    ----------
    consume : callable or str
        Called as ``consume(producer)`` (and ``consume(producer, copy=...)`` where it takes
        ``copy``, ``consume(producer, device="cpu")`` where it takes ``device``); returns
        the imported array.  With ``isolate=True``, a Python expression
        (str) naming it, evaluated like ``python -m dlpackarray inspect`` (``np``,
        ``torch``, ``pa`` ... are available): ``"np.from_dlpack"``,
        ``"lambda x: pa.array(x)"``.
    families : str or iterable of str, optional
        ``"dlpack"`` and / or ``"arrow"`` (keys of :data:`FAMILIES`); default both.
    isolate : bool
        Run the probes in a child interpreter, so a consumer that crashes on a probe fails
        that probe's rule and ``process.no-crash`` instead of killing the caller (the same
        limits as ``check_conformance(..., isolate=True)``).

    The result is read through the protocols it offers itself (a DLPack re-export, the
    buffer protocol, ``__array_interface__``; for Arrow, ``__arrow_c_stream__`` or
    ``__arrow_c_array__``).

    Returns
    -------
    ConformanceReport
        One result per rule: ``pass``, ``fail`` or ``not-applicable``.
    """
    names = _families_arg(families)
    if isolate:
        if not isinstance(consume, str):
            raise TypeError("isolate=True takes the consumer as an expression (str)")
        return run_isolated(consume, names, report_from_json, _no_crash(), consumer=True)
    if not callable(consume):
        raise TypeError(f"consume must be callable, not {type(consume).__name__}")
    return check(consume, names)


_families_arg = families


@contextlib.contextmanager
def _collections_see_only_the_checks_objects() -> Iterator[None]:
    """The probes run ``gc.collect()`` after dropping a result or a producer, so that a
    consumer holding memory only through a reference cycle is judged as it stands once the
    cycle is gone.  Every object that existed before the check is either reachable from the
    caller or not the consumer's result to judge; ``gc.freeze()`` sets them aside for the
    check's duration, so each collection walks the check's own objects instead of the whole
    heap (in a process holding torch, JAX and pyarrow, a fraction of a second each).  A
    caller's own freeze is left as it is (and the collections walk the rest)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def check(consume, names=None, skip: Iterable[str] = (), subject: str | None = None):
    """``check_consumer`` in this process; ``skip``: families and rules whose probes crashed
    an earlier isolated run."""
    wanted = set(FAMILIES if names is None else names)
    skip = frozenset(skip)
    results: list[Result] = []
    with _interrupts.Watch() as ctrl_c, _collections_see_only_the_checks_objects():
        for name, (rules, run) in FAMILIES.items():
            rec = Recorder(rules, skip)
            if name not in wanted:
                why = "not requested"
            elif name in skip:
                why = "not probed: this family's probes crashed the interpreter (process.no-crash)"
            else:
                report.note(name, None, "consumer probes")
                why = "no probe reached this rule"
                try:
                    run(consume, rec)
                except BaseException as exc:  # noqa: BLE001 - reported, never raised
                    ctrl_c.reraise_if_user(exc)
                    first = next((r for r in rules if r not in rec.outcomes), next(iter(rules)))
                    rec.fail(
                        rec.current or first,
                        f"probe raised {_interrupts.describe(exc, ctrl_c)}",
                    )
            for rule_id, rule in rules.items():
                status, message = rec.outcomes.get(rule_id, (NOT_APPLICABLE, why))
                results.append(Result(rule, status, message))
    report.note("process", None, "all probes done")
    results.append(Result(_no_crash(), "pass", ""))
    return ConformanceReport(subject or _subject(consume), results)


def _subject(consume) -> str:
    module = getattr(consume, "__module__", None) or type(consume).__module__
    name = getattr(consume, "__qualname__", None) or type(consume).__qualname__
    return f"{module}.{name}"


def report_from_json(text: str) -> ConformanceReport:
    """Rebuild a consumer report from :meth:`ConformanceReport.to_json` output."""
    import json

    data = json.loads(text)
    known = {**RULES, "process.no-crash": _no_crash()}
    results = [Result(known[r["rule"]], r["status"], r["message"]) for r in data["results"]]
    return ConformanceReport(data["subject"], results)


def assert_consumer_conforms(
    consume: Callable | str,
    *,
    families: Iterable[str] | str | None = None,
    isolate: bool = False,
) -> ConformanceReport:
    """Raise ``AssertionError`` listing every failed *must* rule of ``consume``; returns
    the report when it conforms (``should`` failures do not raise)."""
    rep = check_consumer(consume, families=families, isolate=isolate)
    if not rep.ok:
        failed = "\n".join(
            f"  {r.rule.id}: {r.message} ({r.rule.reference})" for r in rep.failures("must")
        )
        raise AssertionError(
            f"{rep.subject} breaks {len(rep.failures('must'))} must rule(s):\n{failed}"
        )
    return rep
