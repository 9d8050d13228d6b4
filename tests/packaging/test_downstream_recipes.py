"""The build recipes of docs/c_api.md work as written.

Two recipes are copied out of the page and run for real in a temporary folder, each in a child
process with a timeout, against the dlpackarray under test (found through ``PYTHONPATH``):

* the hand build (shell commands: Cython, then ``cc``/``c++`` with the include folders and the
  extension suffix that ``sysconfig`` gives for the interpreter that imports the modules);
* the setuptools project (the page's ``pyproject.toml`` and ``setup.py`` around the
  downstream example's ``_sum.pyx``), built with pip without build isolation.

The built modules are then imported by that interpreter and called with data that makes a
round trip through dlpackarray's C API.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "c_api.md"
EXAMPLES = ROOT / "docs" / "examples"


def _section(label: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"({label})=")
    rest = text[start + 1 :]
    end = re.search(r"\n\([a-z0-9-]+\)=\n|\n## ", rest)
    return rest[: end.start()] if end else rest


def _blocks(label: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", _section(label), re.S | re.M)


def _env() -> dict:
    env = dict(os.environ)
    # The recipe's `python` is this interpreter, and it sees the package under test.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def _need_compilers(*names: str) -> None:
    for name in names:
        if shutil.which(name) is None:
            pytest.skip(f"no {name} to build the recipe")
    pytest.importorskip("Cython", reason="Cython translates the recipe's .pyx")


def test_hand_build_recipe_builds_modules_that_import(tmp_path):
    """The page's shell commands build both modules, with a suffix this Python imports."""
    _need_compilers("cc", "c++")
    (script,) = _blocks("c-api-hand-build", "bash")
    assert "python3-config" not in script  # absent from virtual environments
    for f in (EXAMPLES / "c_api").iterdir():
        shutil.copy(f, tmp_path)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import numpy as np
        import consumer_c, extension
        import dlpackarray

        assert consumer_c.api_version() == dlpackarray.C_API_VERSION
        x = np.arange(6, dtype=np.float32)
        a = consumer_c.wrap(x)
        assert np.from_dlpack(a).tolist() == x.tolist()
        assert a.data_ptr == x.ctypes.data  # no copy on the way through C
        assert extension.total(extension.wrap(x)) == 15.0
        print("ok")
        """
    )
    result = run_python(check, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_setuptools_recipe_builds_the_example_module(tmp_path):
    """The page's pyproject.toml and setup.py build a module that sums through the C API."""
    _need_compilers("cc")
    try:  # setuptools 70.1 and newer build wheels without the separate `wheel` package
        import setuptools.command.bdist_wheel  # noqa: F401
    except ImportError:
        pytest.skip(
            "setuptools 70.1 or newer is not installed (the recipe's build backend): "
            'pip install ".[reliability]"'
        )
    (pyproject,) = _blocks("c-api-setuptools", "toml")
    (setup_py,) = _blocks("c-api-setuptools", "python")
    project = tmp_path / "project"
    shutil.copytree(EXAMPLES / "downstream_pkg" / "src", project / "src")
    (project / "pyproject.toml").write_text(pyproject)
    (project / "setup.py").write_text(setup_py)
    target = tmp_path / "site"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps"]
    cmd += ["--no-index", "-t", str(target), str(project)]
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(target)!r})
        import numpy as np
        import dlpa_sum

        x = np.arange(10)[::3]
        assert dlpa_sum.total(x) == 18
        r = np.arange(8, dtype=np.uint8).reshape(2, 4)[:, ::2]
        r.flags.writeable = False
        assert dlpa_sum.describe(r) == ((2, 2), (1, 8, 1), True, False)
        assert dlpa_sum.total(memoryview(b"abc")) == 97 + 98 + 99
        print("ok")
        """
    )
    result = run_python(check, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
