"""The suite runs wherever the README says it does: with only the ``test``
extra installed, and on every supported interpreter.

A test module, or a helper module the tests import, that imports an interop
library (``torch``, ``pyarrow``, ...) when it is itself imported stops the
whole collection on a machine with the small extra only, hiding every other
test of that module.  Interop libraries are imported inside the tests that
need them, through ``require``/``pytest.importorskip`` (tests/conftest.py), so
only those tests skip, each naming the ``interop`` extra.

A reference count is compared only with another reading of it: its absolute
value counts the interpreter's own references to a local, which Python 3.14
borrows from the frame instead of counting.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent

# Import names of the libraries that only the interop (or bench) extra installs,
# with the distribution that provides each; every requirement of those extras
# must appear here (test_every_interop_requirement_has_its_import_names).
INTEROP_IMPORTS = {
    "torch": "torch",
    "jax": "jax",
    "jaxlib": "jaxlib",
    "tvm_ffi": "apache-tvm-ffi",
    "PIL": "pillow",
    "dlpack": "pydlpack",
    "pyarrow": "pyarrow",
    "matplotlib": "matplotlib",
    "polars": "polars",
    "duckdb": "duckdb",
    "nanoarrow": "nanoarrow",
    "dask": "dask",
    "distributed": "distributed",
    "ray": "ray",
}
# Array libraries no extra installs that tests may still use where present.
OTHER_OPTIONAL = {"cupy", "numba", "pandas", "tensorflow", "mlx", "paddle", "cudf", "yaml"}
OPTIONAL_ROOTS = frozenset(INTEROP_IMPORTS) | OTHER_OPTIONAL

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


def _imported_roots(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module.split(".")[0]]
    return []


def import_time_optional_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every optional library imported while ``source``
    itself is imported: statements at module level and in class bodies (both
    run at import), not function bodies (they run when a test calls them), and
    not guarded by a ``try`` whose handler catches ImportError."""
    found: list[tuple[int, str]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            found.extend(
                (node.lineno, root) for root in _imported_roots(node) if root in OPTIONAL_ROOTS
            )
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                if not any(_catches_import_error(h) for h in node.handlers):
                    visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)
                continue
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    visit(inner)
            if isinstance(node, ast.Match):
                for case in node.cases:
                    visit(case.body)

    visit(ast.parse(source).body)
    return found


def bare_interop_importorskips(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of each ``pytest.importorskip`` of an interop library:
    its skip reason would not say which extra installs it, as require()'s does."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0]
        if (
            name == "importorskip"
            and isinstance(first, ast.Constant)
            and isinstance(first.value, str)
            and first.value.split(".")[0] in INTEROP_IMPORTS
        ):
            found.append((node.lineno, first.value))
    return found


def _test_python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_imports_an_interop_library_when_imported():
    """Every Python file under tests/ (test modules, conftest and the helpers
    they import) imports no interop library at import time."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: import {module}"
        for path in _test_python_files()
        for line, module in import_time_optional_imports(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, (
        "import these inside the tests that need them, through "
        "conftest.require(...), so that only those tests skip with the test extra:\n"
        + "\n".join(offenders)
    )


def test_interop_libraries_are_required_with_the_extra_named():
    """Every skip for a missing interop library goes through conftest.require,
    whose reason names the extra that installs the library."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: importorskip({module!r})"
        for path in _test_python_files()
        for line, module in bare_interop_importorskips(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "use conftest.require(module, why):\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('pa = pytest.importorskip("pyarrow")\n', [(1, "pyarrow")]),
        ('def t():\n    importorskip("jax.numpy", reason="x")\n', [(2, "jax.numpy")]),
        ('pytest.importorskip("yaml")\n', []),
        ("pytest.importorskip(module, reason=why)\n", []),
    ],
)
def test_bare_importorskip_scan(source, expected):
    """The scan reports importorskip of an interop library by name, and only that."""
    assert bare_interop_importorskips(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import pyarrow as pa\n", [(1, "pyarrow")]),
        ("import numpy, torch.utils.dlpack\n", [(1, "torch")]),
        ("from jax import numpy as jnp\n", [(1, "jax")]),
        ("if True:\n    import polars\n", [(2, "polars")]),
        ("class T:\n    import duckdb\n", [(2, "duckdb")]),
        ("try:\n    import ray\nfinally:\n    pass\n", [(2, "ray")]),
        ("try:\n    import ray\nexcept ValueError:\n    pass\n", [(2, "ray")]),
        ("with ctx():\n    import nanoarrow\n", [(2, "nanoarrow")]),
        ("def f():\n    import torch\n", []),
        ("class T:\n    def m(self):\n        import torch\n", []),
        ("try:\n    import cupy\nexcept ImportError:\n    cupy = None\n", []),
        ("try:\n    import cupy\nexcept (OSError, ModuleNotFoundError):\n    pass\n", []),
        ("from . import pyarrow\nimport numpy\nimport pyarrowish\n", []),
        ('CODE = """\nimport torch\n"""\n', []),
    ],
)
def test_import_time_scan_finds_exactly_the_unguarded_imports(source, expected):
    """The scan reports an optional import that runs at import time, and only those."""
    assert import_time_optional_imports(source) == expected


def test_every_interop_requirement_has_its_import_names():
    """A library added to the interop or bench extra is added to the scan too."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli", reason="reads pyproject.toml on Python 3.10")
    pyproject = ROOT / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("needs a source checkout (pyproject.toml)")
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    required = {
        re.split(r"[<>=!\[ ;~]", r, maxsplit=1)[0].lower()
        for extra in ("interop", "bench")
        for r in extras[extra]
    }
    small = {re.split(r"[<>=!\[ ;~]", r, maxsplit=1)[0].lower() for r in extras["test"]}
    assert required - small <= set(INTEROP_IMPORTS.values())


_ABSOLUTE_REFCOUNT = re.compile(
    r"getrefcount\((?:[^()]|\([^()]*\))*\)\s*(?:==|!=|<=|>=|<|>)\s*\d"
    r"|\d\s*(?:==|!=|<=|>=|<|>)\s*(?:sys\.)?getrefcount\("
)


def absolute_refcount_comparisons(source: str) -> list[int]:
    """Lines comparing ``sys.getrefcount(...)`` with a number literal, in code
    and in the code strings the tests run in a child interpreter alike."""
    return [source.count("\n", 0, m.start()) + 1 for m in _ABSOLUTE_REFCOUNT.finditer(source)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("assert sys.getrefcount(x) == 2\n", [1]),
        ("ok = 3 <= getrefcount(f(x))\n", [1]),
        ('code = """\nassert sys.getrefcount(a) < 4\n"""\n', [2]),
        ("assert sys.getrefcount(x) == rc + 1\n", []),
        ("assert sys.getrefcount(f(x)) >= base\n", []),
    ],
)
def test_absolute_refcount_scan_finds_number_comparisons(source, expected):
    """The scan reports a refcount compared with a literal, and only that."""
    assert absolute_refcount_comparisons(source) == expected


def test_no_test_compares_a_refcount_with_a_number():
    """Every reference-count check in tests/ is relative to an earlier reading."""
    this = Path(__file__).resolve()
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _test_python_files()
        if path != this
        for line in absolute_refcount_comparisons(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, (
        "compare with a reading taken before (or use weakref/gc.get_referrers): "
        + ", ".join(offenders)
    )
