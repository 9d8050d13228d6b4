"""The code a user copies type-checks against the shipped stubs.

README.md's ``python`` blocks and every ``docs/examples/*.py`` file are checked with
``mypy --strict`` and with pyright in strict mode (the ``basedpyright`` wheel, which bundles
its Node.js runtime: the ``pyright`` PyPI wrapper downloads one on first use), each for the
oldest and the newest supported Python (3.10, 3.15): the stubs declare ``__buffer__`` for
every version and type the Arrow parameters as Polars' stubs expect.  The checkers come with
the ``typecheck`` extra; .ci/run sets DLPACKARRAY_TYPECHECK=1, which turns a missing checker
into a failure instead of a skip.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

import dlpackarray

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ("3.10", "3.15")


def _sources() -> dict[str, str]:
    """name -> code of each README python block and docs/examples file."""
    out = {}
    readme = (ROOT / "README.md").read_text()
    for i, block in enumerate(re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M)):
        out[f"readme_block_{i}.py"] = block
    for path in sorted((ROOT / "docs" / "examples").glob("*.py")):
        out[f"example_{path.name}"] = path.read_text()
    return out


SOURCES = _sources()


def _imported_modules() -> set[str]:
    """Top-level names of every module the sources import, wherever the import sits."""
    names = set()
    for code in SOURCES.values():
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"__future__"}


def _not_run(reason: str) -> None:
    if os.environ.get("DLPACKARRAY_TYPECHECK") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _checker_missing(what: str) -> None:
    _not_run(f'{what} is not installed: pip install ".[typecheck]"')


def _require_imported_modules() -> None:
    """A strict checker reports an unresolved import as an error: the sources' libraries
    (torch, polars, pyarrow) must be installed for the check to mean anything."""
    missing = sorted(m for m in _imported_modules() if importlib.util.find_spec(m) is None)
    if missing:
        _not_run(
            f"{', '.join(missing)} not installed (imported by the checked examples): "
            'pip install ".[interop]"'
        )


def _environment_checker(name: str) -> Path:
    """The checker's entry point in the environment under test.  A checker found on
    PATH may belong to another environment (an outer virtualenv), whose pythonPath and
    installed libraries are not the ones this run tests."""
    return Path(sys.executable).parent / name


@pytest.fixture(scope="module")
def sources_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("typed_sources")
    for name, code in SOURCES.items():
        (d / name).write_text(code)
    return d


def _package_root() -> str | None:
    """The folder holding the package under test when it is not in site-packages
    (a ``-t`` install on PYTHONPATH); checkers do not read PYTHONPATH."""
    root = str(Path(dlpackarray.__file__).resolve().parent.parent)
    site_dirs = {str(Path(p).resolve()) for p in site.getsitepackages()}
    return None if root in site_dirs else root


def test_sources_found() -> None:
    assert sum(n.startswith("readme_block_") for n in SOURCES) >= 2
    assert any(n.startswith("example_") for n in SOURCES)


@pytest.mark.parametrize("version", VERSIONS)
def test_mypy_strict(sources_dir: Path, version: str) -> None:
    if importlib.util.find_spec("mypy") is None:
        _checker_missing("mypy")
    _require_imported_modules()
    env = dict(os.environ)
    root = _package_root()
    if root:
        env["MYPYPATH"] = root
    cmd = [sys.executable, "-m", "mypy", "--strict", "--python-version", version]
    cmd += ["--cache-dir", str(sources_dir / f".mypy_cache_{version}")]
    cmd += sorted(str(p) for p in sources_dir.glob("*.py"))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_pyright_strict(sources_dir: Path, version: str) -> None:
    exe = _environment_checker("basedpyright")
    if not exe.exists():
        _checker_missing("basedpyright")
    _require_imported_modules()
    config = {
        "typeCheckingMode": "strict",
        "pythonVersion": version,
        "pythonPath": sys.executable,
        # pyarrow ships no stubs; its untyped module is not ours to check.
        "reportMissingTypeStubs": False,
        "extraPaths": [p for p in [_package_root()] if p],
    }
    (sources_dir / "pyrightconfig.json").write_text(json.dumps(config))
    r = subprocess.run(
        [str(exe), "--project", str(sources_dir), "--level", "error", "--outputjson"],
        capture_output=True,
        text=True,
        cwd=sources_dir,
        timeout=600,
    )
    report = json.loads(r.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    assert not errors, json.dumps(errors, indent=1)
    assert report["summary"]["filesAnalyzed"] >= len(SOURCES)


@pytest.mark.parametrize("name", sorted(n for n in SOURCES if n.startswith("example_")))
def test_examples_run(sources_dir: Path, name: str) -> None:
    from conftest import run_python

    r = run_python((sources_dir / name).read_text())
    assert r.returncode == 0, r.stderr
