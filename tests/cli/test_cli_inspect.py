"""``python -m dlpackarray inspect``: any buffer-protocol object, honest zero-copy rows, and
reasons printed whole.

ctypes objects export the buffer protocol with PEP 3118 formats (``<i``) and types that
may have no ``__module__``; a consumer that turns read-only memory into a writable object
says so in its row; the text report breaks lines between words only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import require
from hypothesis import given
from hypothesis import strategies as st

from dlpackarray.cli import inspect as _inspect


def run_inspect(*args: str):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run(
        [sys.executable, "-m", "dlpackarray", "inspect", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.mark.parametrize(
    ("expr", "kind", "shape", "dtype"),
    [
        ("(ctypes.c_int * 4)()", "c_int_Array_4", [4], "int32"),
        ("(ctypes.c_double * 3 * 2)()", "c_double_Array_3_Array_2", [2, 3], "float64"),
        ("(ctypes.c_uint8 * 5).from_buffer(bytearray(5))", "c_ubyte_Array_5", [5], "uint8"),
        ("ctypes.c_int16(7)", "ctypes.c_short", [], "int16"),
    ],
)
def test_inspect_reports_ctypes_objects(expr, kind, shape, dtype):
    """A ctypes array or scalar made by EXPR is inspected like any buffer: its type is
    named even though EXPR's namespace gives a new ctypes type no module."""
    proc = run_inspect(expr, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    # Python 3.13 names a ctypes type made at run time after its C module (_ctypes).
    assert report["type"] == kind or report["type"] == f"_ctypes.{kind}"
    assert "buffer protocol" in report["protocols"]
    assert report["dlpackarray"]["shape"] == shape
    assert report["dlpackarray"]["dtype"] == dtype
    assert report["dlpackarray"]["readonly"] is False


@pytest.mark.parametrize(
    "expr",
    [
        "ctypes.pointer(ctypes.c_int(5))",
        "type('S', (ctypes.Structure,), {'_fields_': [('a', ctypes.c_int), "
        "('b', ctypes.c_double)]})()",
    ],
)
def test_inspect_names_why_ctypes_pointers_and_structures_are_refused(expr):
    """A pointer ('&<i') or a structure ('T{...}') has no DLPack dtype: the report names
    the format and exits 1, with no traceback."""
    proc = run_inspect(expr)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "DLPackArray refuses it: BufferError: buffer format" in proc.stdout


def test_type_name_of_a_type_without_a_module():
    """A type whose ``__module__`` is missing is named by its qualified name alone."""
    # A class made where the globals have no __name__, as EXPR's namespace has none.
    kind = eval("type('Made', (), {})", {"__builtins__": __builtins__})  # noqa: S307
    assert not hasattr(kind, "__module__")
    assert _inspect.type_name(kind()) == "Made"
    assert _inspect.type_name(b"") == "builtins.bytes"


@pytest.mark.parametrize(("consumer", "module"), [("torch", "torch"), ("tvm-ffi", "tvm_ffi")])
def test_read_only_bytes_into_a_consumer_that_drops_read_only(consumer, module):
    """torch and tvm-ffi import read-only data zero-copy as a writable object: the
    zero-copy row says that writes would modify immutable memory (DLPack's READ_ONLY
    flag, https://dmlc.github.io/dlpack/latest/c_api.html#c.DLPACK_FLAG_BITMASK_READ_ONLY)."""
    require(module, "the consumer whose read-only handling is reported")
    proc = run_inspect("b'immutable bytes'", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["consumer"]: r for r in json.loads(proc.stdout)["consumers"]}
    assert rows[consumer]["status"] == "zero-copy"
    assert "read-only" in rows[consumer]["reason"]
    assert "writes would modify immutable memory" in rows[consumer]["reason"]
    # A writable source has nothing to warn about.
    proc = run_inspect("bytearray(b'mutable bytes')", "--json")
    rows = {r["consumer"]: r for r in json.loads(proc.stdout)["consumers"]}
    assert rows[consumer] == {**rows[consumer], "status": "zero-copy", "reason": ""}


def test_read_only_note_in_the_text_report():
    """The text report carries the note whole, wrapped under the reason column."""
    require("torch", "the consumer whose read-only handling is reported")
    proc = run_inspect("b'immutable bytes'")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "torch zero-copy zero-copy, but torch ignores read-only: writes would modify " in text
    assert "immutable memory" in text


_WORD = st.text(
    alphabet=st.characters(
        min_codepoint=33, max_codepoint=0x2FF, blacklist_categories=("Zs", "Cc", "Zl", "Zp")
    ),
    min_size=1,
    max_size=40,
)


@given(words=st.lists(_WORD, min_size=1, max_size=60), name=st.sampled_from(["torch", "jax"]))
def test_printed_reason_lines_end_between_words(words, name):
    """However long a reason, every line of the text report ends at a word's end: the
    words read back from the lines are exactly the reason's words, and a line outgrows
    the width only when it holds one word."""
    reason = " ".join(words)
    report = {
        "source": "x",
        "type": "builtins.bytes",
        "protocols": [],
        "owner_chain": [],
        "dlpackarray": None,
        "error": reason,
    }
    lines = _inspect.format_text(report).splitlines()[3:]
    head = "DLPackArray refuses it: "
    assert lines[0].startswith(head)
    assert " ".join(lines)[len(head) :].split() == words
    row = {"consumer": name, "call": "", "status": "refused", "reason": reason}
    lines = _inspect._consumer_lines(row)
    assert [w for ln in lines for w in ln.split()][2:] == words
    for ln in lines:
        assert len(ln) <= _inspect.WIDTH or len(ln.split()) <= 3
