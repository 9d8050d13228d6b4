""".ci/wheel_check.py, the bar every wheel CI builds must meet, refuses what it names.

Each case builds a small shared object with the C compiler, packs it into a wheel-shaped
zip with a manylinux name and runs the check: a stripped plain build passes; an object
left with its symbol table, or built with ``-fprofile-generate`` (the first stage of
tools/pgo_wheel.sh), is refused by name.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / ".ci" / "wheel_check.py"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = [
    pytest.mark.skipif(not CHECK.is_file(), reason="needs the source tree (.ci/wheel_check.py)"),
    pytest.mark.skipif(CC is None, reason="no C compiler (cc) to build the test objects"),
    pytest.mark.skipif(
        shutil.which("readelf") is None or shutil.which("strip") is None,
        reason="readelf and strip (binutils) are not installed",
    ),
]

SOURCE = "int answer(int x) { return x > 0 ? x * 2 : -x; }\n"


def _wheel(tmp_path: pathlib.Path, *flags: str, strip: bool = True) -> pathlib.Path:
    src = tmp_path / "m.c"
    src.write_text(SOURCE)
    so = tmp_path / "m.so"
    subprocess.run([CC, "-shared", "-fPIC", "-O2", *flags, "-o", str(so), str(src)],
                   check=True, timeout=120)  # fmt: skip
    if strip:
        subprocess.run(["strip", "--strip-all", str(so)], check=True, timeout=60)
    wheel = tmp_path / "dlpackarray-0.1.0-cp311-cp311-manylinux_2_24_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(so, "dlpackarray/m.so")
    return wheel


def _check(wheel: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHECK), str(wheel), str(wheel.parent / "sizes.txt")],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_stripped_plain_build_passes(tmp_path):
    r = _check(_wheel(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "stripped" in r.stdout


def test_an_unstripped_object_is_refused(tmp_path):
    r = _check(_wheel(tmp_path, strip=False))
    assert r.returncode != 0
    assert "is not stripped" in r.stderr


def test_a_profile_instrumented_object_is_refused(tmp_path):
    """An object of pgo_wheel.sh's instrumented stage names its .gcda file; shipped, it
    would write profiles wherever it runs."""
    r = _check(_wheel(tmp_path, f"-fprofile-generate={tmp_path / 'profiles'}"))
    assert r.returncode != 0
    assert "profile-instrumented" in r.stderr
