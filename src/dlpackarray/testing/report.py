"""Rules, per-rule results and the conformance report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TextIO

PASS = "pass"
FAIL = "fail"
NOT_APPLICABLE = "not-applicable"
STATUSES = (PASS, FAIL, NOT_APPLICABLE)


@dataclass(frozen=True)
class Rule:
    """One checkable requirement of an exchange protocol.

    Attributes
    ----------
    id : str
        Stable identifier, ``family.topic.detail`` (never reused for another meaning).
    statement : str
        The requirement in one line.
    reference : str
        Where the requirement comes from: the public specification's title, section
        (``§``) and URL, several joined by ``"; "``.
    level : str
        ``"must"`` (a failure makes the report non-conformant) or ``"should"``.
    protocol : str
        The protocol family: ``dlpack``, ``buffer``, ``array_interface``,
        ``cuda_array_interface``, ``arrow`` or ``exchange``.
    """

    id: str
    statement: str
    reference: str
    level: str
    protocol: str


@dataclass(frozen=True)
class Result:
    """The outcome of one rule on one object."""

    rule: Rule
    status: str
    message: str

    @property
    def reference(self) -> str:
        return self.rule.reference

    def to_dict(self) -> dict:
        return {
            "rule": self.rule.id,
            "level": self.rule.level,
            "protocol": self.rule.protocol,
            "status": self.status,
            "message": self.message,
            "statement": self.rule.statement,
            "reference": self.rule.reference,
        }


class ConformanceReport:
    """Every rule's result for one object.

    ``ok`` is true when no *must* rule failed; ``should`` failures are reported but do not
    make the object non-conformant.
    """

    def __init__(self, subject: str, results: list[Result] | tuple[Result, ...]):
        self.subject = subject
        self.results = tuple(results)

    @property
    def ok(self) -> bool:
        return not any(r.status == FAIL and r.rule.level == "must" for r in self.results)

    def failures(self, level: str | None = None) -> list[Result]:
        """The failed results, optionally only those of one ``level``."""
        return [
            r for r in self.results if r.status == FAIL and (level is None or r.rule.level == level)
        ]

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for r in self.results:
            out[r.status] += 1
        return out

    def to_dict(self) -> dict:
        return {
            "subject": self.subject,
            "ok": self.ok,
            "counts": self.counts(),
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON (``subject``, ``ok``, ``counts`` and one entry per rule)."""
        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        c = self.counts()
        head = "CONFORMANT" if self.ok else "NOT CONFORMANT"
        lines = [
            f"{self.subject}: {head} ({c[PASS]} passed, {c[FAIL]} failed, "
            f"{c[NOT_APPLICABLE]} not applicable)"
        ]
        for r in self.results:
            if r.status == NOT_APPLICABLE:
                continue
            mark = "ok  " if r.status == PASS else ("FAIL" if r.rule.level == "must" else "warn")
            line = f"  {mark} {r.rule.id} [{r.rule.level}]"
            if r.status == FAIL:
                line += f": {r.message}\n       ({r.rule.statement}; {r.rule.reference})"
            lines.append(line)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ConformanceReport {self.subject!r} ok={self.ok} {self.counts()}>"


#: Where probes announce themselves (``note``): the isolated child's stderr, so that the
#: parent can name the probe that was running when the child died.  None: silent.
TRACE: TextIO | None = None
#: The prefix of an announcement line (the rest: family, rule or "-", action; tab-separated).
TRACE_PREFIX = "dlpackarray-conform-probe\t"


_family = ["-"]


def note(family: str | None, rule_id: str | None, action: str) -> None:
    """Announce the probe about to run (see :data:`TRACE`); ``family`` None: a call made
    for the family announced last (shared helpers such as DLPack exports)."""
    if TRACE is not None:
        family = _family[0] = family or _family[0]
        TRACE.write(f"{TRACE_PREFIX}{family}\t{rule_id or '-'}\t{action}\n")
        TRACE.flush()


class Recorder:
    """Collects one family's outcomes; a rule recorded several times keeps its worst one.

    ``skip``: rules whose probe crashed an earlier isolated run; ``probe`` answers False
    for them so that the rerun goes past them.
    """

    def __init__(self, rules: dict[str, Rule], skip=frozenset()):
        self.rules = rules
        self.outcomes: dict[str, tuple[str, str]] = {}
        self.skip = skip
        self.family = next(iter(rules.values())).protocol if rules else ""
        #: The rule whose probe runs now (announced by ``probe``).
        self.current: str | None = None

    def probe(self, rule_id: str, action: str) -> bool:
        """Announce the probe of ``rule_id`` (``action``: what it calls); False when it
        must not run (it crashed an earlier run)."""
        if rule_id not in self.rules:
            raise KeyError(f"unknown rule id {rule_id!r}")
        if rule_id in self.skip:
            return False
        self.current = rule_id
        note(self.family, rule_id, action)
        return True

    def _set(self, rule_id: str, status: str, message: str) -> None:
        if rule_id not in self.rules:
            raise KeyError(f"unknown rule id {rule_id!r}")
        old = self.outcomes.get(rule_id)
        rank = {NOT_APPLICABLE: 0, PASS: 1, FAIL: 2}
        if old is None or rank[status] > rank[old[0]]:
            self.outcomes[rule_id] = (status, message)

    def ok(self, rule_id: str, message: str = "") -> None:
        self._set(rule_id, PASS, message)

    def fail(self, rule_id: str, message: str) -> None:
        self._set(rule_id, FAIL, message)

    def na(self, rule_id: str, message: str) -> None:
        self._set(rule_id, NOT_APPLICABLE, message)

    def check(self, rule_id: str, condition: bool, message: str) -> bool:
        """Pass ``rule_id`` when ``condition`` holds, else fail it with ``message``."""
        if condition:
            self.ok(rule_id)
        else:
            self.fail(rule_id, message)
        return bool(condition)


def rule_table(protocol: str, rows) -> dict[str, Rule]:
    """``{id: Rule}`` from ``(id, level, statement, reference)`` rows."""
    return {i: Rule(i, s, ref, lvl, protocol) for i, lvl, s, ref in rows}
