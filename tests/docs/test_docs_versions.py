"""Every version number the documentation states is the one the code has.

The pages state the C API table's version (``C_API_VERSION``), the DLPack version
dlpackarray produces and understands (``DLPACK_VERSION``, "DLPack 1.3 ABI", "versioned
capsules report version 1.3", ``max_version=(1, 3)``) and the header's macros.  Each such
statement is found by its wording and compared with ``dlpackarray`` and the shipped headers,
so a version bump that forgets a page fails here.  Generated pages (the interop matrix and the
conformance report) are left out: they are rewritten from the code.
"""

from __future__ import annotations

import pathlib
import re

import pytest

import dlpackarray

ROOT = pathlib.Path(__file__).resolve().parents[2]
GENERATED = {"interop.md", "conformance.md"}
PAGES = sorted(
    [ROOT / "README.md"]
    + [p for p in (ROOT / "docs").glob("*.md") if p.name not in GENERATED]
    + sorted((ROOT / "docs").glob("*.rst"))
)
PAIR = r"\(\s*(\d+)\s*,\s*(\d+)\s*\)"
DOTTED = r"(\d+)\.(\d+)"


def _text(page: pathlib.Path) -> str:
    # Line breaks and the markup's indentation do not change what a sentence states.
    return re.sub(r"\s+", " ", page.read_text(encoding="utf-8"))


def _define(header: str, name: str) -> int:
    text = (pathlib.Path(dlpackarray.get_include()) / "dlpackarray" / header).read_text()
    match = re.search(rf"#define {name} (\d+)", text)
    assert match, f"{header} defines no {name}"
    return int(match.group(1))


# (what, pattern whose two groups are a (major, minor) pair, the code's value)
STATEMENTS = [
    # "C_API_VERSION ... ``(1, 1)``": the first pair of numbers within 200 characters of the
    # name (the entry that names it states its value; "(major, minor)" is passed over).
    ("C_API_VERSION", rf"C_API_VERSION\b.{{0,200}}?{PAIR}", dlpackarray.C_API_VERSION),
    ("DLPACK_VERSION", rf"DLPACK_VERSION\b.{{0,200}}?{PAIR}", dlpackarray.DLPACK_VERSION),
    (
        "the DLPack version produced",
        rf"DLPack {DOTTED}(?= (?:ABI|C exchange|`dlpack\.h`|``dlpack\.h``|tensor|lets|,))",
        dlpackarray.DLPACK_VERSION,
    ),
    ("capsule version", rf"report version {DOTTED}", dlpackarray.DLPACK_VERSION),
    ("exchange table version", rf"\(version {DOTTED}", dlpackarray.DLPACK_VERSION),
    (
        "max_version asked of producers",
        rf"calls with ``max_version={PAIR}``",
        dlpackarray.DLPACK_VERSION,
    ),
]


def _found(pattern: str) -> list[tuple[str, tuple[int, int]]]:
    out = []
    for page in PAGES:
        for m in re.finditer(pattern, _text(page)):
            out.append((page.name, (int(m.group(1)), int(m.group(2)))))
    return out


@pytest.mark.parametrize("what,pattern,value", STATEMENTS, ids=[s[0] for s in STATEMENTS])
def test_stated_versions_match_the_code(what, pattern, value):
    """Each statement of a version on a page equals the code's version."""
    found = _found(pattern)
    assert found, f"no page states {what}: the pattern no longer matches the docs' wording"
    wrong = [(page, got) for page, got in found if got != tuple(value)]
    assert not wrong, f"{what} is {tuple(value)} but the docs say {wrong}"


def test_no_page_names_a_newer_dlpack_than_the_code():
    """Older DLPack versions appear as history; none newer than the one implemented."""
    found = _found(rf"DLPack {DOTTED}\b")
    newer = [(page, got) for page, got in found if got > tuple(dlpackarray.DLPACK_VERSION)]
    assert found and not newer, newer


def test_header_macros_match_the_module_constants():
    """The C header, the Python constants and abi.md's macro table agree."""
    assert (
        _define("dlpackarray.h", "DLPACKARRAY_C_API_MAJOR"),
        _define("dlpackarray.h", "DLPACKARRAY_C_API_MINOR"),
    ) == tuple(dlpackarray.C_API_VERSION)
    dlpack = (
        _define("dlpack_abi.h", "DLPACK_MAJOR_VERSION"),
        _define("dlpack_abi.h", "DLPACK_MINOR_VERSION"),
    )
    assert dlpack == tuple(dlpackarray.DLPACK_VERSION)
    text = _text(ROOT / "docs" / "abi.md")
    stated = re.search(r"`DLPACK_MAJOR_VERSION (\d+)`, `DLPACK_MINOR_VERSION (\d+)`", text)
    assert stated, "abi.md no longer states the header's version macros"
    assert (int(stated.group(1)), int(stated.group(2))) == dlpack
