"""The installed binaries need glibc 2.28 at most (manylinux_2_28 or older; docs/install.rst).

Reads the symbol versions every shared object of the package references: a reference to
``dlopen@GLIBC_2.34`` (what linking on a new glibc gives without cpp/src/glibc_dl_compat.hpp)
made the wheel manylinux_2_34.  The core must also depend on libdl.so.2 itself, which provides
the old ``dlopen`` & co. on glibc < 2.34.  .ci/wheels checks the repaired wheels' tags too.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

import dlpackarray

PACKAGE = pathlib.Path(dlpackarray.__file__).parent
READELF = shutil.which("readelf")
pytestmark = pytest.mark.skipif(READELF is None, reason="readelf (binutils) is not installed")


def _readelf(*args: str) -> str:
    return subprocess.run(
        [READELF, "-W", *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def _objects():
    found = sorted(PACKAGE.glob("*.so"))
    assert any(p.name == "libdlpackarray_core.so" for p in found)
    return found


def test_no_symbol_needs_a_glibc_newer_than_2_28():
    newest = {}
    for so in _objects():
        for symbol, minor in re.findall(r"(\w+)@GLIBC_2\.(\d+)", _readelf("--dyn-syms", str(so))):
            if int(minor) > 28:
                newest[f"{so.name}: {symbol}"] = f"GLIBC_2.{minor}"
    assert newest == {}


def test_the_core_loads_libdl_where_dlopen_lives_there():
    core = PACKAGE / "libdlpackarray_core.so"
    syms = _readelf("--dyn-syms", str(core))
    assert re.search(r"\bdlopen@GLIBC_2\.(2\.5|17)\b", syms), "dlopen not at its old version"
    assert "Shared library: [libdl.so.2]" in _readelf("-d", str(core))
