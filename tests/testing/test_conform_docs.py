"""docs/conformance.md is current: regenerating the reports of the installed libraries --
producers and consumers -- gives the committed pass / fail / not-applicable status for
every rule, and the page is the rendering of docs/conformance.json and
docs/conformance_consumers.json (``python -m dlpackarray conform --check docs``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlpackarray.cli import conform as _conform
from dlpackarray.cli import conform_consumers as _consumers
from dlpackarray.testing import RULES
from dlpackarray.testing.consumer import RULES as CONSUMER_RULES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_committed_page_is_current():
    if not (DOCS / "conformance.json").exists():
        pytest.skip("no docs/ folder next to the tests (installed package run)")
    doc = _conform.generate()
    assert doc, "no library of the page is installed"
    consumers = _consumers.generate()
    not_compared: list[str] = []
    assert _conform.check(doc, str(DOCS), not_compared, consumers) == []
    # Libraries in other versions than the page's are left out; dlpackarray's
    # own row is compared everywhere.
    assert not any(lib.startswith("dlpackarray ") for lib in not_compared), not_compared


def test_only_the_versions_on_the_page_are_compared(tmp_path):
    committed = json.loads((DOCS / "conformance.json").read_text())
    (tmp_path / "conformance.json").write_text(json.dumps(committed))
    (tmp_path / "conformance.md").write_text((DOCS / "conformance.md").read_text())
    (tmp_path / _consumers.FILE).write_text((DOCS / _consumers.FILE).read_text())
    lib = "NumPy"
    rule = next(iter(committed[lib]["results"]))
    doc = json.loads(json.dumps(committed))
    status = doc[lib]["results"][rule][0]
    doc[lib]["results"][rule][0] = "fail" if status != "fail" else "pass"
    # The recorded version: the changed status is a difference.
    assert _conform.check(doc, str(tmp_path)) == [
        f"{lib} {rule}: committed {status}, now {doc[lib]['results'][rule][0]}"
    ]
    # Another version: not compared, and said so.
    doc[lib]["version"] = "0.0.0"
    skipped: list[str] = []
    assert _conform.check(doc, str(tmp_path), skipped) == []
    assert skipped == [f"{lib} 0.0.0 (the page has {committed[lib]['version']})"]


def test_committed_page_covers_every_rule_and_library():
    committed = json.loads((DOCS / "conformance.json").read_text())
    assert {name for name, *_ in _conform.SUBJECTS} == set(committed)
    for entry in committed.values():
        assert set(entry["results"]) == set(RULES)
        assert entry["version"], entry["expression"]  # what the row describes
    # Every failure on the page is explained (upstream bug or spec-permitted deviation).
    for lib, entry in committed.items():
        for rule_id, (status, _message) in entry["results"].items():
            if status == "fail":
                assert (lib, rule_id) in _conform.NOTES, (lib, rule_id)
    assert committed["dlpackarray"]["ok"] is True
    assert all(s != "fail" for s, _ in committed["dlpackarray"]["results"].values())


def test_committed_page_covers_every_consumer_and_rule():
    """The consumers' section lists every consumer subject, each with a verdict for every
    consumer rule; every failure is explained, and dlpackarray's own consumers fail none."""
    committed = json.loads((DOCS / _consumers.FILE).read_text())
    assert {name for name, *_ in _consumers.SUBJECTS} == set(committed)
    for entry in committed.values():
        assert set(entry["results"]) == set(CONSUMER_RULES) | {"process.no-crash"}
        assert entry["version"], entry["expression"]
    for lib, entry in committed.items():
        for rule_id, (status, _message) in entry["results"].items():
            if status == "fail":
                assert (lib, rule_id) in _consumers.NOTES, (lib, rule_id)
    for lib in ("dlpackarray from_dlpack", "dlpackarray DLPackArray"):
        assert all(s != "fail" for s, _ in committed[lib]["results"].values()), lib
    assert "# Conformance of consumers" in (DOCS / "conformance.md").read_text()


def test_a_changed_consumer_status_is_a_difference(tmp_path):
    """A consumer row whose status changed is reported against the committed page."""
    committed = json.loads((DOCS / _consumers.FILE).read_text())
    lib = next(iter(committed))
    rule = next(iter(committed[lib]["results"]))
    doc = json.loads(json.dumps(committed))
    was = doc[lib]["results"][rule][0]
    doc[lib]["results"][rule][0] = now = "fail" if was != "fail" else "pass"
    assert _consumers.differences(doc, committed, None) == [
        f"{lib} {rule}: committed {was}, now {now}"
    ]
