"""docs/conformance.md is current: regenerating the reports of the installed libraries
gives the committed pass / fail / not-applicable status for every rule, and the page is
the rendering of docs/conformance.json (``python -m dlpackarray conform --check docs``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlpackarray.cli import conform as _conform
from dlpackarray.testing import RULES

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_committed_page_is_current():
    if not (DOCS / "conformance.json").exists():
        pytest.skip("no docs/ folder next to the tests (installed package run)")
    doc = _conform.generate()
    assert doc, "no library of the page is installed"
    assert _conform.check(doc, str(DOCS)) == []


def test_committed_page_covers_every_rule_and_library():
    committed = json.loads((DOCS / "conformance.json").read_text())
    assert {name for name, *_ in _conform.SUBJECTS} == set(committed)
    for entry in committed.values():
        assert set(entry["results"]) == set(RULES)
    # Every failure on the page is explained (upstream bug or spec-permitted deviation).
    for lib, entry in committed.items():
        for rule_id, (status, _message) in entry["results"].items():
            if status == "fail":
                assert (lib, rule_id) in _conform.NOTES, (lib, rule_id)
    assert committed["dlpackarray"]["ok"] is True
    assert all(s != "fail" for s, _ in committed["dlpackarray"]["results"].values())
