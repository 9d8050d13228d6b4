"""The library and the tool built on it are separate.

The command line (``python -m dlpackarray`` and its sub-commands) is the ``dlpackarray.cli``
sub-package.  Importing the library, or its conformance checker ``dlpackarray.testing``,
loads no module of the tool and not ``argparse``; every module of the package that parses
arguments lives under ``cli/``; and ``python -m dlpackarray`` still reaches every
sub-command.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import assert_clean_exit, run_python

import dlpackarray

PACKAGE = pathlib.Path(dlpackarray.__file__).parent

#: The sub-commands docs/cli.md describes.
SUBCOMMANDS = ("inspect", "matrix", "bench", "conform")

#: The command line's modules before they moved into cli/ (none may come back).
OLD_TOOL_MODULES = {f"dlpackarray.{m}" for m in ("_cli", "_inspect", "_matrix", "_matrix_cells",
                                                  "_report", "_conform")}  # fmt: skip

# What a fresh interpreter loads for itself (site, .pth files) is not the library's doing.
_LOADED_BY = """
import json, sys
before = set(sys.modules)
{imports}
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def _loaded_by(imports: str) -> set[str]:
    proc = run_python(_LOADED_BY.format(imports=imports))
    assert_clean_exit(proc, imports)
    return set(json.loads(proc.stdout))


def _tool_modules(loaded: set[str]) -> set[str]:
    return {m for m in loaded if m == "dlpackarray.cli" or m.startswith("dlpackarray.cli.")}


@pytest.mark.parametrize(
    "imports", ["import dlpackarray", "import dlpackarray.testing", "from dlpackarray import *"]
)
def test_importing_the_library_loads_nothing_of_the_tool(imports):
    loaded = _loaded_by(imports)
    assert "dlpackarray" in loaded  # the probe did import the library
    assert not _tool_modules(loaded)
    assert not loaded & OLD_TOOL_MODULES
    assert "argparse" not in loaded


def test_the_probe_sees_the_tool_when_it_is_loaded():
    # The check above can fail: importing the tool's entry point shows up in it.
    loaded = _loaded_by("import dlpackarray.cli.main")
    assert _tool_modules(loaded) >= {"dlpackarray.cli", "dlpackarray.cli.main"}


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_only_the_cli_subpackage_parses_arguments():
    cli = PACKAGE / "cli"
    assert (cli / "__init__.py").is_file()
    outside = [
        p for p in PACKAGE.rglob("*.py")
        if cli not in p.parents and p.name != "__main__.py"
    ]  # fmt: skip
    assert outside, "no library module found"
    for path in outside:
        imports = _imports(path)
        rel = path.relative_to(PACKAGE)
        assert "argparse" not in imports, f"{rel} parses arguments outside dlpackarray/cli/"
        assert not {m for m in imports if m.startswith("dlpackarray.cli")}, (
            f"{rel} imports the tool"
        )
    for name in OLD_TOOL_MODULES:
        assert not (PACKAGE / f"{name.split('.')[1]}.py").exists(), name
    # python -m dlpackarray is only the door to the tool.
    main_imports = _imports(PACKAGE / "__main__.py")
    assert {m for m in main_imports if m.startswith("dlpackarray")} <= {
        "dlpackarray.cli.main",
        "dlpackarray.cli.main.main",
    }


def _run_module(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run(
        [sys.executable, "-m", "dlpackarray", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_help_lists_every_subcommand_and_each_one_answers_help():
    from dlpackarray.cli.main import COMMANDS

    assert set(COMMANDS) == set(SUBCOMMANDS)
    proc = _run_module("--help")
    assert proc.returncode == 0, proc.stderr
    listed = {ln.split()[0] for ln in proc.stdout.splitlines() if ln.startswith("  ")}
    assert set(SUBCOMMANDS) <= listed
    for option in ("--version", "--json", "--include", "--cmake-dir", "--pkgconfig-dir"):
        assert option in listed, option
    for name in SUBCOMMANDS:
        sub = _run_module(name, "--help")
        assert sub.returncode == 0, (name, sub.stderr)
        assert sub.stdout.startswith(f"usage: python -m dlpackarray {name}"), (name, sub.stdout)


@pytest.mark.parametrize("option", ["--include", "--cmake-dir", "--pkgconfig-dir"])
def test_build_folder_queries_still_point_into_the_package(option):
    # The queries' code moved one folder down (cli/); the folders did not.
    proc = _run_module(option)
    assert proc.returncode == 0, proc.stderr
    folder = pathlib.Path(proc.stdout.strip())
    assert folder.is_dir() and PACKAGE in folder.parents
    assert folder.relative_to(PACKAGE).parts[0] in ("include", "share")
