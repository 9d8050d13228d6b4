"""The adversarial corpus: malformed inputs on every import path, each with
its exact expected outcome.

A case is a function plus an expectation: the exception type and a regular
expression its message must match, or the JSON summary of the valid result
(``summarise``).  Cases are grouped by import path in the ``cases_*``
modules; ids are ``path/family/detail`` and unique.  The cases run in a
worker process (worker.py) so that a crash fails only its own case.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Case:
    id: str
    body: Callable[[], Any]
    exc: type[BaseException] | None = None
    match: str | None = None
    value: Any = None
    # A known defect: the reason names it; the case runs and must fail
    # (pytest xfail strict), so fixing the defect flips it to a failure
    # until the marker is removed.
    defect: str | None = None
    extra: dict = field(default_factory=dict)

    def run(self) -> dict:
        """Runs the body; the outcome is JSON-serialisable."""
        try:
            value = self.body()
        except Exception as exc:  # noqa: BLE001 - the outcome is the exception
            return {"exc": [type(exc).__name__, str(exc)], "value": None}
        return {"exc": None, "value": summarise(value)}

    def check(self, outcome: dict) -> None:
        """Asserts the worker's outcome matches the expectation."""
        if outcome.get("outcome") in ("crash", "hang"):
            raise AssertionError(
                f"{self.id}: the worker {outcome['outcome']}ed "
                f"(status {outcome.get('returncode')})\n{outcome.get('stderr', '')}"
            )
        got = outcome["result"]
        if self.exc is not None:
            assert got["exc"] is not None, f"{self.id}: expected {self.exc.__name__}, got {got}"
            name, message = got["exc"]
            assert name == self.exc.__name__, f"{self.id}: expected {self.exc.__name__}, got {got}"
            assert re.search(self.match, message), f"{self.id}: {message!r} !~ {self.match!r}"
        else:
            assert got["exc"] is None, f"{self.id}: expected a result, got {got['exc']}"
            assert got["value"] == summarise(self.value), f"{self.id}: {got['value']!r}"


def summarise(value: Any) -> Any:
    """JSON-comparable form: tuples become lists, DLPackArrays their layout."""
    from dlpackarray import DLPackArray

    if isinstance(value, DLPackArray):
        value = layout(value)
    return json.loads(json.dumps(value, default=repr))


def layout(a) -> dict:
    """Shape, element strides, dtype name, device and read-only flag."""
    dev = a.device
    return {
        "shape": list(a.shape),
        "strides": list(a.strides),
        "dtype": a.dtype.name,
        "device": [int(dev[0]), int(dev[1])],
        "readonly": bool(a.readonly),
    }


def all_cases() -> dict[str, Case]:
    import cases_arrow
    import cases_arrow_protocol
    import cases_arrow_request
    import cases_buffer
    import cases_dlpack
    import cases_interface
    import cases_protocols
    import cases_struct

    table: dict[str, Case] = {}
    modules = (
        cases_dlpack,
        cases_interface,
        cases_struct,
        cases_buffer,
        cases_protocols,
        cases_arrow,
        cases_arrow_protocol,
        cases_arrow_request,
    )
    for module in modules:
        for case in module.cases():
            assert case.id not in table, f"duplicate case id {case.id}"
            table[case.id] = case
    return table
