"""What ``python -m dlpackarray matrix`` prints: every crash, whole words, missing libraries.

Each crashed cell is listed with its reason (crashes are rare and each one matters; refusals
may be summarised), stored reasons are shortened only between two words, and a consumer
that is not installed reads "not installed" with its PyPI name, not a row of zeros.
"""

from __future__ import annotations

from conftest import require
from hidden_modules import run_dlpackarray
from hypothesis import given
from hypothesis import strategies as st

from dlpackarray.cli import matrix as _matrix
from dlpackarray.cli import matrix_report as _matrix_report


def run_matrix(*args: str, env: dict | None = None, hide: tuple[str, ...] = (), tmp=None):
    """``python -m dlpackarray matrix ARGS``; the hidden modules look uninstalled to the
    command and to its matrix workers (they inherit its PYTHONPATH)."""
    return run_dlpackarray("matrix", *args, hide=hide, env=env, tmp=tmp)


def _cell(status, consumer, producer, case, reason, see=""):
    return {
        "status": status,
        "consumer": consumer,
        "producer": producer,
        "case": case,
        "reason": reason,
        "see": see,
    }


def test_closing_report_lists_every_crashed_cell_and_summarises_refusals():
    """Nine crashes with one reason: all nine cells are listed; nine refusals: five and
    "and 4 more"."""
    crashed = [
        _cell(
            _matrix_report.CRASHED,
            "jax",
            f"p{i}",
            "int8",
            "the process died with SIGSEGV in consume",
        )
        for i in range(9)
    ]
    refused = [
        _cell(_matrix_report.REFUSED, "numpy", f"q{i}", "int8", "BufferError: no") for i in range(9)
    ]
    lines, unknown = _matrix_report.closing_report({"cells": crashed + refused})
    assert unknown
    text = "\n".join(lines)
    assert "crashed in jax (9): the process died with SIGSEGV in consume" in text
    for i in range(9):
        assert f"p{i} [int8]" in text
    assert "q4 [int8], and 4 more (--json lists every cell)" in text
    assert "q5 [int8]" not in text
    # Crash listings have no "more": each crashed cell has its own line.
    crash_lines = lines[1 : 1 + 9]
    assert sorted(ln.strip() for ln in crash_lines) == sorted(f"p{i} [int8]" for i in range(9))


def test_matrix_prints_every_crashed_cell():
    """A run where seven cells crash (a worker abort hook) lists all seven with the reason
    and exits with the unknown-crash status."""
    require("numpy", "builds the reference arrays")
    producers = [
        "numpy",
        "memoryview",
        "__array_interface__ only",
        "__array_struct__ only",
        "__array__ only",
        "versioned capsule",
        "legacy capsule",
    ]
    proc = run_matrix(
        "--producers",
        ",".join(producers),
        "--consumers",
        "numpy",
        "--cases",
        "int16 1-D",
        env={"DLPACKARRAY_MATRIX_ABORT_CASE": "int16 1-D"},
    )
    assert proc.returncode == _matrix.UNKNOWN_CRASH_STATUS, proc.stdout + proc.stderr
    closing = proc.stdout.split("Crashed and refused cells:\n", 1)[1]
    assert "crashed in numpy (7): the process died with SIGABRT in consume" in closing
    assert "more (--json lists every cell)" not in closing
    for p in producers:
        assert f"    {p} [int16 1-D]\n" in closing + "\n"


_WORD = st.text(
    # No 'x' or '0': an "0x.." run would be masked as an address, which is not this test's
    # subject.
    alphabet=st.characters(
        min_codepoint=33, max_codepoint=0x2FF, blacklist_categories=("Zs", "Cc", "Zl", "Zp")
    ).filter(lambda ch: ch not in "x0"),
    min_size=1,
    max_size=50,
)


@given(words=st.lists(_WORD, min_size=1, max_size=80), limit=st.integers(20, 200))
def test_stored_reasons_are_cut_between_words(words, limit):
    """A reason longer than the limit keeps whole words only, then " ..."; it fits the
    limit unless its first word alone is longer."""
    line = " ".join(words)
    out = _matrix._clean(line, limit=limit)
    if len(line) <= limit:
        assert out == line
        return
    assert out.endswith(" ...")
    kept = out[: -len(" ...")].split(" ")
    assert kept == words[: len(kept)] and 0 < len(kept) < len(words)
    assert len(out) <= limit or len(kept) == 1


def test_reasons_keep_their_first_line_and_mask_addresses():
    """Only the first line is kept, and addresses never reach the page (they change from
    run to run)."""
    assert _matrix._clean("ValueError: bad <obj at 0x7f12ab>\nmore") == "ValueError: bad <obj>"
    assert _matrix._clean("word " * 100, limit=None) == ("word " * 100).strip()


def test_summary_says_not_installed_for_a_missing_consumer():
    """A consumer with no cells because its library is missing reads "not installed" and
    its PyPI name; an installed one with cells keeps its counts."""
    doc = {
        "consumers": ["numpy", "tvm-ffi"],
        "cells": [_cell(_matrix_report.ZERO_COPY, "numpy", "numpy", "int8 1-D", "")],
        "totals": {s: 0 for s in _matrix_report.STATUSES} | {_matrix_report.ZERO_COPY: 1},
        "not_installed": {"producers": ["pydlpack"], "consumers": ["tvm-ffi"]},
    }
    lines = _matrix_report.summary_table(doc).splitlines()
    assert lines[1].split() == ["numpy", "1", "0", "0", "0", "0"]
    assert lines[2].split() == ["tvm-ffi", "not", "installed", "(pip", "install", "apache-tvm-ffi)"]
    assert lines[-1] == "producers not installed: pydlpack (pip install pydlpack)"


def test_matrix_run_marks_a_hidden_consumer_not_installed(tmp_path):
    """End to end: with tvm_ffi uninstalled, its row says so instead of five zeros."""
    require("numpy", "builds the reference arrays")
    proc = run_matrix(
        "--producers",
        "numpy",
        "--consumers",
        "numpy,tvm-ffi",
        "--cases",
        "int8 1-D",
        hide=("tvm_ffi",),
        tmp=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {ln.split()[0]: ln for ln in proc.stdout.split("\n\n")[0].splitlines()}
    assert rows["tvm-ffi"].split()[1:] == ["not", "installed", "(pip", "install", "apache-tvm-ffi)"]
    assert rows["numpy"].split()[1:] == ["1", "0", "0", "0", "0"]
