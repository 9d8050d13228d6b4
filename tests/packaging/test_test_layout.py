"""tests/ mirrors the product, so that a new test has one obvious place.

Every test module lives in one folder named for the part of the product it
pins (tests/README.md lists them), never directly in tests/ and never among
the helpers.  Test modules share code only through helpers/ (ctypes mirrors,
fakes, corpora, strategies) and conftest.py: a test module importing another
one runs that module's import-time code and ties two folders' tests together.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HELPERS = TESTS / "helpers"

FOLDERS = {
    "adversarial",
    "array",
    "array_interface",
    "arrow",
    "benchmarks",
    "buffer",
    "capi",
    "cli",
    "cuda",
    "dlpack",
    "docs",
    "imports",
    "lifetime",
    "packaging",
    "processes",
    "testing",
}


def _python_files():
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _test_modules():
    return [p for p in _python_files() if p.name.startswith("test_")]


def _imported(path: Path):
    """Top-level module names ``path`` imports, wherever the import statement is."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_every_test_module_is_in_a_listed_folder():
    misplaced = [
        str(p.relative_to(TESTS))
        for p in _test_modules()
        if len(p.relative_to(TESTS).parts) != 2 or p.relative_to(TESTS).parts[0] not in FOLDERS
    ]
    assert not misplaced, f"test modules outside the folders of tests/README.md: {misplaced}"


def test_every_folder_is_listed_and_described():
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == FOLDERS | {"helpers"}
    readme = (TESTS / "README.md").read_text()
    undescribed = sorted(f for f in folders if f"`{f}/`" not in readme)
    assert not undescribed, f"tests/README.md does not say what goes in {undescribed}"


def test_test_modules_import_test_code_only_from_helpers():
    helpers = {p.stem for p in HELPERS.glob("*.py")} | {
        p.name for p in HELPERS.iterdir() if (p / "__init__.py").is_file()
    }
    # Test-tree modules outside helpers/: every test module, and the
    # adversarial corpus's own runner, worker and case modules.
    elsewhere = {
        p.stem: p.parent
        for p in _python_files()
        if HELPERS not in p.parents and p.name != "conftest.py"
    }
    assert not helpers & set(elsewhere), "a module name is in helpers/ and elsewhere"
    wrong = []
    for path in _python_files():
        rel = path.relative_to(TESTS).as_posix()
        for name in set(_imported(path)):
            if name not in elsewhere:
                continue  # a helper, conftest or a library
            if elsewhere[name] == path.parent and not name.startswith("test_"):
                continue  # the adversarial corpus's own runner, worker and cases
            wrong.append(f"{rel} imports {name}")
    assert not wrong, "test code shared outside helpers/: " + "; ".join(sorted(wrong))


def test_module_names_are_unique():
    # pytest imports each test folder's modules by their bare name (no
    # packages), so two files with one name would shadow each other.
    names = [p.stem for p in _python_files() if p.name != "__init__.py"]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_helpers_hold_no_test_module():
    assert not [p.name for p in HELPERS.rglob("test_*.py")]


def test_scripts_name_only_test_files_that_exist():
    # CI and the GPU script run chosen subsets by path; a moved test file
    # would otherwise fail only where that script runs (a lent GPU machine).
    import re

    root = TESTS.parent
    scripts = [p for d in (".ci", "tools") for p in sorted((root / d).iterdir()) if p.is_file()]
    named = {
        (script.relative_to(root).as_posix(), path)
        for script in scripts
        for path in re.findall(r"\btests/[\w/]+\.(?:py|c)\b", script.read_text())
    }
    assert named, "no script names a test file: the pattern no longer matches them"
    missing = sorted(
        f"{script} names {path}" for script, path in named if not (root / path).exists()
    )
    assert not missing, "; ".join(missing)
