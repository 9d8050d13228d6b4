"""CI's builds share Cython's translations (CMakeLists.txt DLPACKARRAY_CYTHON_CACHE).

The option is safe only while a translation taken from the cache is the one Cython would
have written: these tests hold the build's Cython command to the cache and the cached C++ to
a fresh translation, for the same command line the build runs.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _configure(tmp_path: Path, *defines: str) -> Path:
    found = shutil.which(
        "cmake", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])
    )
    if found is None:
        pytest.skip('cmake is not installed: pip install ".[reliability]"')
    if (
        shutil.which(
            "ninja", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])
        )
        is None
    ):
        pytest.skip('ninja is not installed: pip install ".[reliability]"')
    build = tmp_path / "build"
    cmd = [found, "-S", str(ROOT), "-B", str(build), "-G", "Ninja"]
    cmd += [f"-DPython_EXECUTABLE={sys.executable}", *defines]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return build


def _cython_command(build: Path, module: str) -> list[str]:
    """The command build.ninja runs to translate ``module``."""
    text = (build / "build.ninja").read_text()
    for line in text.splitlines():
        if "-m cython" in line and f"dlpackarray/{module}.pyx" in line:
            # cd SOURCE && CYTHON ... && cmake -E cmake_transform_depfile ...
            parts = line.split("COMMAND = ", 1)[-1].split(" && ")
            return shlex.split(next(part for part in parts if "-m cython" in part))
    raise AssertionError(f"no Cython command for {module} in build.ninja")


def test_without_the_option_the_build_translates_without_a_cache(tmp_path):
    command = _cython_command(_configure(tmp_path), "_views")
    assert "--cache" not in command
    assert not any(arg.startswith("CYTHON_CACHE_DIR=") for arg in command)


def test_a_cached_translation_is_the_fresh_one(tmp_path):
    """The build's own command, run twice against one cache folder, gives the fresh
    translation's bytes the second time too, when it comes from the cache."""
    pytest.importorskip(
        "Cython", reason='Cython translates the modules: pip install ".[reliability]"'
    )
    cache = tmp_path / "cython-cache"
    build = _configure(tmp_path, f"-DDLPACKARRAY_CYTHON_CACHE={cache}")
    command = _cython_command(build, "_views")
    assert "--cache" in command and f"CYTHON_CACHE_DIR={cache}" in command
    out = Path(command[command.index("-o") + 1])
    out.parent.mkdir(parents=True, exist_ok=True)

    def run(cmd):
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return out.read_bytes()

    fresh = run([arg for arg in command if arg != "--cache"])
    out.unlink()
    stored = run(command)
    out.unlink()
    assert [p.name for p in (cache / "compiler").iterdir()], "nothing was stored"
    cached = run(command)
    assert fresh == stored == cached
