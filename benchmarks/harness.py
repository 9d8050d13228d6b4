"""Timing core: calibrated, interleaved, repeated measurements of one case.

A *case* is one question ("how fast is a producer-only export?") answered by
several *contenders* (one statement each) that run in the same process on
the same data.  The contenders are sampled round-robin, so slow drifts of a
shared machine (frequency, neighbours, page cache) hit all of them alike and
the ratios stay meaningful even when the absolute times wander.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
import timeit
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Contender:
    """One way of doing what the case measures.

    Parameters
    ----------
    label : str
        Name shown in tables and plots (unique within the case).
    stmt : str
        Python statement timed by :mod:`timeit`; it runs in the case's
        namespace, so it sees every name the case's setup returned.
    note : str
        Short explanation printed under the table (optional).
    ops : int
        Operations one execution of ``stmt`` performs (a loop compiled in C,
        say); reported times are per operation, i.e. divided by ``ops``.
    """

    label: str
    stmt: str
    note: str = ""
    ops: int = 1


@dataclass
class Target:
    """A goal from the issue: ``ratio(contender / ref) op value`` in one run.

    For ``ns`` cases the ratio is a time ratio (smaller is faster); for
    ``GB/s`` cases it is a throughput ratio (larger is faster).  ``ref`` may
    be ``"fastest-other"``: the fastest contender other than ``contender``.
    With ``absolute=True`` the goal is the contender's own median ns per
    operation, ``ref`` is unused (issue targets such as "< 100 ns per op").
    Targets are reported, never asserted: timings are not test outcomes.
    """

    contender: str
    ref: str
    op: str  # "<=" or ">="
    value: float
    absolute: bool = False


@dataclass
class Case:
    """A group of contenders measured together.

    Parameters
    ----------
    family : str
        Issue case id ("B1" ... "B10"); ``--cases`` selects on it.
    name : str
        Unique id within the run, e.g. ``"B6/2d-transposed/64MB"``.
    title : str
        Human-readable description.
    setup : callable
        Builds the namespace (arrays, modules) the statements run in.  It is
        called only when the case runs, and the namespace is dropped right
        after it, so large arrays never outlive their case.
    contenders : list of Contender
    anchor : str
        Label of the contender every ratio is taken against, or
        ``"fastest-other"`` for the fastest contender that is not dlpackarray.
    unit : str
        ``"ns"`` (report ns/op) or ``"GB/s"`` (report ``nbytes / time``).
    nbytes : int
        Bytes moved per operation, for ``GB/s`` cases.
    params : dict
        Free-form parameters for plots (size, ndim, layout...).
    big : bool
        True when an operation is slow (large copies): fewer, single-loop
        samples.
    floor : str
        Label of the contender that measures the route's floor: the least any
        implementation could cost on it (a ready-made capsule handed to the
        consumer, say).  Reports give every contender's ratio to it as well as
        to the anchor.  Empty when the case has no measured floor.
    """

    family: str
    name: str
    title: str
    setup: Callable[[], dict]
    contenders: list[Contender]
    anchor: str
    unit: str = "ns"
    nbytes: int = 0
    params: dict = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    big: bool = False
    smoke: bool = True  # run in --smoke mode
    # A failing setup ends the run instead of being recorded (the case exists
    # to measure something of dlpackarray's that must be buildable).
    required: bool = False
    # Called with the namespace after the measurements (stops what setup
    # started, such as B12's Dask cluster).
    teardown: Callable[[dict], Any] | None = None
    floor: str = ""


@dataclass
class Settings:
    """How hard to measure; ``smoke()`` is for CI, ``full()`` for results."""

    repeats: int  # samples per contender after warm-up
    sample_s: float  # target duration of one sample (loop of `number` calls)
    big_repeats: int  # samples for `big` cases
    max_case_s: float  # soft budget per contender for big cases
    mode: str

    @classmethod
    def full(cls) -> Settings:
        return cls(repeats=40, sample_s=0.004, big_repeats=7, max_case_s=4.0, mode="full")

    @classmethod
    def rounds(cls, n: int) -> Settings:
        """``n`` paired rounds per case, ``n`` samples of each contender,
        interleaved (``benchmarks.run --rounds``).  Samples last 1 ms: the two
        halves of a pair then run within a scheduler time slice or two of each
        other, so a busy machine's preemptions spoil single rounds (which the
        median drops) instead of whole pairs."""
        return cls(
            repeats=n, sample_s=0.001, big_repeats=min(n, 7), max_case_s=4.0, mode=f"rounds-{n}"
        )

    @classmethod
    def smoke(cls) -> Settings:
        return cls(repeats=3, sample_s=0.0005, big_repeats=2, max_case_s=0.5, mode="smoke")


def _calibrate(timer: timeit.Timer, sample_s: float) -> int:
    """Loop count whose loop lasts about ``sample_s``.

    The first loops of a statement are often slow (cold caches, first-touch
    page faults, allocator growth), so the estimate is taken from the last of
    a series of growing loops, never from the first one.
    """
    number = 1
    while True:
        t = timer.timeit(number)
        if t >= sample_s / 4 or number >= 10**8:
            break
        number *= 4
    per_op = timer.timeit(number) / number  # warm estimate
    return max(1, min(10**8, round(sample_s / max(per_op, 1e-12))))


def _quantile(sorted_vals: list[float], q: float) -> float:
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = q * (len(sorted_vals) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize(samples_ns: list[float]) -> dict:
    """Median and spread of per-operation times (ns)."""
    s = sorted(samples_ns)
    return {
        "median_ns": statistics.median(s),
        "q1_ns": _quantile(s, 0.25),
        "q3_ns": _quantile(s, 0.75),
        "min_ns": s[0],
        "max_ns": s[-1],
        # Relative interquartile range: the "spread" column of the tables.
        "rel_iqr": (_quantile(s, 0.75) - _quantile(s, 0.25)) / statistics.median(s),
        "n_samples": len(s),
    }


def run_case(case: Case, settings: Settings, log: Callable[[str], Any] = print) -> dict:
    """Measures every contender of ``case``; returns the case's result record."""
    record: dict = {
        "family": case.family,
        "name": case.name,
        "title": case.title,
        "unit": case.unit,
        "nbytes": case.nbytes,
        "params": case.params,
        "anchor": case.anchor,
        "contenders": {},
    }
    try:
        ns = case.setup()
    except Exception as exc:
        if case.required:
            raise  # noqa: BLE001 -- a missing contender library must not end the run
        record["error"] = f"setup failed: {type(exc).__name__}: {exc}"
        log(f"  {case.name}: {record['error']}")
        return record

    timers: dict[str, timeit.Timer] = {}
    numbers: dict[str, int] = {}
    for c in case.contenders:
        entry = {"stmt": c.stmt, "note": c.note, "ops": c.ops}
        record["contenders"][c.label] = entry
        try:
            timer = timeit.Timer(c.stmt, globals=ns)
            timer.timeit(1)  # also the first warm-up call
        except Exception as exc:  # noqa: BLE001 -- any failure means "unsupported"
            # e.g. a protocol a contender does not implement (yet): record why
            # and keep measuring the others.
            entry["unsupported"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc(limit=3)
            continue
        timers[c.label] = timer

    # Calibration doubles as warm-up: every contender runs for a while before
    # the first recorded sample.
    for label, timer in timers.items():
        if case.big:
            t1 = timer.timeit(1)
            numbers[label] = 1
            record["contenders"][label]["_one_s"] = t1
        else:
            numbers[label] = _calibrate(timer, settings.sample_s)
            timer.timeit(numbers[label])

    repeats = settings.repeats
    if case.big:
        slowest = max((record["contenders"][k].pop("_one_s") for k in timers), default=0.0)
        repeats = max(2, min(settings.big_repeats, int(settings.max_case_s / max(slowest, 1e-9))))

    samples: dict[str, list[float]] = {label: [] for label in timers}
    labels = list(timers)
    ops = {c.label: c.ops for c in case.contenders}
    gc.collect()
    for r in range(repeats):
        # Rotate the order each round so no contender always runs first (or
        # right after the same neighbour).
        k = r % len(labels) if labels else 0
        for label in labels[k:] + labels[:k]:
            n = numbers[label]
            t = timers[label].timeit(n)
            samples[label].append(t * 1e9 / (n * ops[label]))

    for label in labels:
        entry = record["contenders"][label]
        entry["loops"] = numbers[label]
        entry["samples_ns"] = samples[label]
        entry.update(summarize(samples[label]))
        if case.unit == "GB/s":
            entry["gbps"] = case.nbytes / entry["median_ns"]
            entry["gbps_q1"] = case.nbytes / entry["q3_ns"]
            entry["gbps_q3"] = case.nbytes / entry["q1_ns"]
    _add_ratios(record, case, paired=settings.mode.startswith("rounds"))
    if case.teardown is not None:
        case.teardown(ns)
    del ns
    gc.collect()
    return record


def _ratio(record: dict, label: str, ref: str) -> dict | None:
    """Ratio of ``label`` to ``ref``: medians, plus the spread of per-round ratios.

    Samples of one round were taken back to back, so the per-round ratio
    cancels slow drifts; its quartiles are the ratio's spread.
    """
    cs = record["contenders"]
    a, b = cs.get(label, {}), cs.get(ref, {})
    if "median_ns" not in a or "median_ns" not in b:
        return None
    paired = sorted(x / y for x, y in zip(a["samples_ns"], b["samples_ns"], strict=False))
    time_ratio = a["median_ns"] / b["median_ns"]
    if record["unit"] == "GB/s":
        # Throughput ratio: larger is faster.
        paired = sorted(1.0 / p for p in paired)
        time_ratio = 1.0 / time_ratio
    return {
        "ratio": time_ratio,
        "kind": "throughput" if record["unit"] == "GB/s" else "time",
        "q1": _quantile(paired, 0.25),
        "q3": _quantile(paired, 0.75),
        # The median of the per-round ratios and their extremes: what a
        # "median of N paired rounds" target reads (benchmarks.run --rounds).
        "paired_median": statistics.median(paired),
        "min": paired[0],
        "max": paired[-1],
    }


def _fastest_other(record: dict, exclude: str) -> str | None:
    """The fastest contender but ``exclude``; floors are no contenders."""
    best = None
    for label, entry in record["contenders"].items():
        if label == exclude or "median_ns" not in entry:
            continue
        if label == record.get("floor") or label.startswith("floor"):
            continue
        if best is None or entry["median_ns"] < record["contenders"][best]["median_ns"]:
            best = label
    return best


def _add_ratios(record: dict, case: Case, paired: bool = False) -> None:
    """Ratios to the anchor and the floor, and the targets' status: judged on
    the ratio of medians, or with ``paired`` on the median of the per-round
    ratios (a target stated "in the median of N paired rounds")."""
    anchor = case.anchor
    record["floor"] = case.floor
    if anchor == "fastest-other":
        anchor = _fastest_other(record, "dlpackarray")
    record["anchor_resolved"] = anchor
    for label, entry in record["contenders"].items():
        r = _ratio(record, label, anchor) if anchor else None
        if r is not None:
            entry["ratio_to_anchor"] = r
        f = _ratio(record, label, case.floor) if case.floor else None
        if f is not None:
            entry["ratio_to_floor"] = f
    targets = []
    for t in case.targets:
        if t.absolute:
            targets.append(_absolute_target(record, t))
            continue
        ref = _fastest_other(record, t.contender) if t.ref == "fastest-other" else t.ref
        r = _ratio(record, t.contender, ref) if ref else None
        row = {"contender": t.contender, "ref": ref, "op": t.op, "value": t.value}
        row["target_ref"] = t.ref  # as the case states it ("fastest-other" unresolved)
        if r is None:
            row["status"] = "n/a"
        else:
            row.update(ratio=r["ratio"], q1=r["q1"], q3=r["q3"], kind=r["kind"])
            row.update(paired_median=r["paired_median"], min=r["min"], max=r["max"])
            judged = r["paired_median"] if paired else r["ratio"]
            row["judged_on"] = "paired median" if paired else "ratio of medians"
            ok = judged <= t.value if t.op == "<=" else judged >= t.value
            row["status"] = "met" if ok else "missed"
        targets.append(row)
    record["targets"] = targets


def _absolute_target(record: dict, t: Target) -> dict:
    """A goal on the contender's own median ns per operation."""
    row = {"contender": t.contender, "ref": "absolute", "op": t.op, "value": t.value}
    e = record["contenders"].get(t.contender, {})
    if "median_ns" not in e:
        row["status"] = "n/a"
        return row
    med = e["median_ns"]
    row.update(ratio=med, q1=e["q1_ns"], q3=e["q3_ns"], kind="ns")
    ok = med <= t.value if t.op == "<=" else med >= t.value
    row["status"] = "met" if ok else "missed"
    return row


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
