"""The Arrow consumer rules: what readers of ``__arrow_c_schema__`` / ``__arrow_c_array__``
/ ``__arrow_c_stream__`` must do with the structs they are handed.

The baseline probe finds the shape the consumer reads: a plain int64 column, else a
one-column struct (what table readers take); a consumer that refuses both is not an Arrow
consumer and every rule is not applicable.
"""

from __future__ import annotations

import gc

from dlpackarray.testing import _spec, report
from dlpackarray.testing.consumer_arrow_craft import ArrowProducer, Column
from dlpackarray.testing.consumer_arrow_read import values as read_values
from dlpackarray.testing.consumer_dlpack import _describe, call, refusal_problem
from dlpackarray.testing.report import Recorder, rule_table

RELEASE = _spec.arrow_c(
    "Release callback semantics -- for consumers", "release-callback-semantics-for-consumers"
)
MOVING = _spec.arrow_c("Moving an array", "moving-an-array")
LIFETIME = _spec.arrow_capsule("Lifetime of capsules", "lifetime-of-capsules")
ARRAY = _spec.arrow_c("The ArrowArray structure", "the-arrowarray-structure")
FORMAT = _spec.arrow_c(
    "Data type description -- format strings", "data-type-description-format-strings"
)
STREAM = _spec.arrow_stream("The ArrowArrayStream structure", "the-arrowarraystream-structure")

RULES = rule_table(
    "arrow_consumer",
    [
        (
            "consumer.arrow.values",
            "must",
            "an int64 column imports with its elements",
            f"{ARRAY}; {LIFETIME}",
        ),
        (
            "consumer.arrow.release-once",
            "must",
            "once the result and the capsules are gone every struct handed out has been "
            "released exactly once",
            f"{RELEASE}; {LIFETIME}",
        ),
        (
            "consumer.arrow.keeps-alive",
            "must",
            "what the result keeps it moved or copied: its elements survive the producer and "
            "the capsules being dropped",
            f"{MOVING}; {LIFETIME}",
        ),
        (
            "consumer.arrow.offset",
            "must",
            "a non-zero ArrowArray offset is honoured",
            _spec.arrow_c("ArrowArray.offset", "c.ArrowArray.offset"),
        ),
        (
            "consumer.arrow.validity",
            "must",
            "the validity bitmap is honoured (nulls stay null, values stay valid), or a "
            "consumer without nulls refuses them with an exception",
            _spec.arrow_columnar("Validity bitmaps", "validity-bitmaps") + f"; {ARRAY}",
        ),
        (
            "consumer.arrow.released-refused",
            "must",
            "a struct handed out already released (release NULL) is refused with an exception",
            _spec.arrow_c("Released structure", "released-structure") + f"; {STREAM}",
        ),
        (
            "consumer.arrow.unknown-format",
            "must",
            "a schema whose format string is invalid is refused with an exception",
            FORMAT,
        ),
        (
            "consumer.arrow.bad-buffers",
            "must",
            "an int64 array claiming one buffer instead of two is refused with an exception",
            f"{ARRAY}; " + _spec.arrow_columnar("Buffer listing", "buffer-listing-for-each-layout"),
        ),
        (
            "consumer.arrow.refusal-release",
            "must",
            "after a refusal every struct handed out is released exactly once (by the consumer "
            "or by its capsule)",
            f"{RELEASE}; {LIFETIME}",
        ),
    ],
)

BASE = [10, 20, 30, 40, 50]


def _consume(consume, producer, what: str):
    report.note(None, None, f"consume(<Arrow producer of {what}>)")
    return call(consume, producer)


def _judge_values(rec, rule, result, want, what) -> bool:
    try:
        got = read_values(result)
    except Exception as exc:  # noqa: BLE001 - an unreadable result fails the rule
        rec.fail(rule, f"{what}: reading the result raised {_describe(exc)}")
        return False
    return rec.check(rule, got == want, f"{what}: the result holds {got[:8]}, expected {want}")


def _judge_release(rec, producer, rule, what) -> None:
    producer.drop_capsules()
    gc.collect()
    bad = producer.unreleased()
    rec.check(rule, not bad, f"{what}: " + "; ".join(bad))


def check(consume, rec: Recorder) -> None:
    """Run every Arrow consumer rule on ``consume``."""
    if not rec.probe("consumer.arrow.values", "consume(<int64 column>)"):
        return
    column = Column(BASE)
    producer = ArrowProducer(column)
    result, exc = _consume(consume, producer, "int64 column")
    if exc is not None:
        column = Column(BASE, table=True)
        producer = ArrowProducer(column)
        result, exc2 = _consume(consume, producer, "one-column struct")
        if exc2 is not None:
            why = (
                f"the consumer refused a valid int64 column ({_describe(exc)}) and a one-column "
                f"struct ({_describe(exc2)}): not an Arrow consumer"
            )
            for rule_id in rec.rules:
                rec.na(rule_id, why)
            return
    shape = "one-column struct" if column.table else "int64 column"
    used = [c for c in producer.calls]
    _judge_values(rec, "consumer.arrow.values", result, BASE, f"{shape} via {used}")
    first, _ = call(read_values, result)
    if rec.probe("consumer.arrow.keeps-alive", "the result after the producer is gone"):
        producer.drop_capsules()
        keep = producer
        del producer
        gc.collect()
        _judge_values(rec, "consumer.arrow.keeps-alive", result, first, "after the producer went")
        producer = keep
    del result
    gc.collect()
    if rec.probe("consumer.arrow.release-once", "dropping the result"):
        _judge_release(rec, producer, "consumer.arrow.release-once", shape)
    layouts = [
        ("consumer.arrow.offset", column.with_(offset=3), BASE, "offset 3"),
        (
            "consumer.arrow.validity",
            column.with_(values=[1, None, 3, None, 5, 6, 7, 8, None]),
            [1, None, 3, None, 5, 6, 7, 8, None],
            "nulls at 1, 3 and 8",
        ),
    ]
    for rule, col, want, what in layouts:
        if not rec.probe(rule, f"consume(<{what}>)"):
            continue
        producer = ArrowProducer(col)
        result, exc = _consume(consume, producer, what)
        if exc is not None and rule == "consumer.arrow.validity" and not refusal_problem(exc):
            # A consumer whose arrays have no nulls (DLPack, NumPy) refuses them instead.
            rec.ok(rule, f"refuses nulls it cannot represent: {_describe(exc)}")
        elif exc is not None:
            rec.fail(rule, f"{what} was refused: {_describe(exc)}")
        else:
            _judge_values(rec, rule, result, want, what)
        del result
        gc.collect()
        if rec.probe("consumer.arrow.release-once", f"dropping the {what} result"):
            _judge_release(rec, producer, "consumer.arrow.release-once", what)
    faults = [
        (
            "consumer.arrow.released-refused",
            column.with_(released=True),
            "an already released struct",
        ),
        ("consumer.arrow.unknown-format", column.with_(fmt=b"?!"), "format '?!'"),
        ("consumer.arrow.bad-buffers", column.with_(n_buffers=1), "int64 with n_buffers 1"),
    ]
    for rule, col, what in faults:
        if not rec.probe(rule, f"consume(<{what}>)"):
            continue
        producer = ArrowProducer(col)
        result, exc = _consume(consume, producer, what)
        if exc is None:
            # A lazy consumer may defer validation to the first use of its result.
            got, late = call(read_values, result)
            if late is not None and not refusal_problem(late):
                rec.ok(rule, f"accepted lazily; the first read raised {_describe(late)}")
            else:
                rec.fail(
                    rule,
                    f"{what} was accepted: the consumer returned {type(result).__name__}"
                    + (f" holding {got[:8]}" if late is None else f", whose read raised {late!r}"),
                )
        elif refusal_problem(exc):
            rec.fail(rule, f"{what}: {refusal_problem(exc)}")
        else:
            rec.ok(rule, _describe(exc))
        del result
        gc.collect()
        if rec.probe("consumer.arrow.refusal-release", f"structs of the {what} probe"):
            _judge_release(rec, producer, "consumer.arrow.refusal-release", what)
