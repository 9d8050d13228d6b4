"""One internal boundary between the package's Cython modules.

A module uses another module's cdef functions and classes only through
``src/dlpackarray/_internal.pxd``, which lists, per owning module, what the others may
use; no ``.pyx`` or ``.pxd`` but that one cimports from a module that has an implementation
(a ``.pyx``).  Pure declaration files (``abi.pxd``, ``c_api.pxd``, ``core.pxd``, the
package's ``__init__.pxd``) may be cimported by anyone.  The boundary lists exactly what
crosses: every name in it is used by some module other than its owner.

The checks read the sources as text, so they also run without a build.
"""

from __future__ import annotations

import pathlib
import re

import pytest

PKG = pathlib.Path(__file__).resolve().parents[2] / "src" / "dlpackarray"
BOUNDARY = "_internal"

# `from X cimport a, b` (a parenthesised list may span lines) and `cimport X [as y], Z`.
_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+cimport[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_PLAIN = re.compile(r"^[ \t]*cimport[ \t]+([^\n]*)", re.M)


def _names(text: str) -> list[str]:
    text = re.sub(r"#[^\n]*", "", text).strip().strip("()")
    return [n.split(" as ")[0].strip() for n in text.replace("\n", " ").split(",") if n.strip()]


def _module(dotted: str) -> str | None:
    """The package module a cimport names (``_array`` for ``dlpackarray._array`` or
    ``._array``), "" for the package itself, None outside the package."""
    if dotted.startswith("."):
        dotted = "dlpackarray" + ("." + dotted.lstrip(".") if dotted.strip(".") else "")
    if dotted == "dlpackarray" or not dotted.startswith("dlpackarray."):
        return "" if dotted == "dlpackarray" else None
    return dotted.split(".")[1]


def cimports(text: str) -> list[tuple[str, str]]:
    """(module, name) for every name cimported from a package module; name is "*" for a
    whole-module cimport.  ``from dlpackarray cimport _array`` counts as module _array."""
    text = re.sub(r"(?s)(\"\"\"|''').*?\1", "", text)  # no cimports inside docstrings
    found = []
    for m in _FROM.finditer(text):
        module = _module(m[1])
        if module is None:
            continue
        for name in _names(m[2]):
            found.append((name, "*") if module == "" else (module, name))
    for m in _PLAIN.finditer(text):
        for target in _names(m[1]):
            module = _module(target)
            if module:
                found.append((module, "*"))
    return found


def implementation_modules() -> set[str]:
    return {p.stem for p in PKG.glob("*.pyx")}


def violations(files: dict[str, str], implemented: set[str]) -> list[str]:
    """Each cimport of another module's names that bypasses the boundary."""
    out = []
    for filename, text in sorted(files.items()):
        importer = filename.rsplit(".", 1)[0]
        if importer == BOUNDARY:
            continue
        for module, name in cimports(text):
            if module in implemented:
                out.append(f"{filename}: cimports {name} from dlpackarray.{module}")
    return out


def _sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(PKG.glob("*.p[yx][xd]"))}


def test_no_module_cimports_another_modules_names_outside_the_boundary():
    found = violations(_sources(), implementation_modules())
    assert found == [], "cimport these from dlpackarray._internal instead:\n" + "\n".join(found)


def test_the_boundary_is_declared_once_and_is_not_a_module():
    assert (PKG / f"{BOUNDARY}.pxd").is_file()
    assert not (PKG / f"{BOUNDARY}.pyx").exists()  # it declares nothing of its own
    text = (PKG / f"{BOUNDARY}.pxd").read_text()
    code = re.sub(r"#[^\n]*", "", text)
    assert not re.search(r"^\s*(cdef|ctypedef|cpdef)\b", code, re.M)
    listed = cimports(text)
    names = [name for _, name in listed]
    assert len(names) == len(set(names)), "a name is listed twice"
    assert {module for module, _ in listed} <= implementation_modules()


def test_the_boundary_lists_exactly_what_crosses():
    """Every listed name is used by a module other than its owner, and no module takes its
    own names through the boundary."""
    owner = {name: module for module, name in cimports((PKG / f"{BOUNDARY}.pxd").read_text())}
    used = {}
    for filename, text in _sources().items():
        importer = filename.rsplit(".", 1)[0]
        for module, name in cimports(text):
            if module == BOUNDARY:
                assert owner.get(name) != importer, f"{filename} takes its own {name}"
                used.setdefault(name, set()).add(importer)
    assert set(owner) - set(used) == set(), "listed but used by no other module"


@pytest.mark.parametrize(
    "line",
    [
        "from dlpackarray._array cimport DLPackArray",
        "from dlpackarray._array cimport (\n    DLPackArray,\n    wrap_view,\n)",
        "from dlpackarray._array cimport *",
        "from ._array cimport wrap_view",
        "cimport dlpackarray._array",
        "cimport dlpackarray._array as arr",
        "from dlpackarray cimport _array",
        "from . cimport _array",
        "    from dlpackarray._array cimport wrap_view  # inside a function",
    ],
)
def test_every_cimport_form_bypassing_the_boundary_is_found(line):
    files = {"_capi.pyx": f"# cython: language_level=3\n{line}\n"}
    assert violations(files, {"_array", "_capi"}) != []


@pytest.mark.parametrize(
    "line",
    [
        "from dlpackarray._internal cimport DLPackArray",
        "from dlpackarray.abi cimport DLTensor",
        "from dlpackarray.core cimport TensorView",
        "cimport dlpackarray",
        "from libc.stdint cimport int64_t",
        '"""Docstring: from dlpackarray._array cimport wrap_view."""',
    ],
)
def test_cimports_through_the_boundary_or_of_declarations_pass(line):
    files = {"_capi.pyx": f"{line}\n", "_internal.pxd": "from dlpackarray._array cimport X\n"}
    assert violations(files, {"_array", "_capi"}) == []
