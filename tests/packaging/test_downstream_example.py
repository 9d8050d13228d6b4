"""The downstream example package, docs/examples/downstream_pkg/, builds and runs.

It is what a user's own package looks like: scikit-build-core drives CMake, which finds the
installed dlpackarray with ``python -m dlpackarray --cmake-dir`` and ``find_package``, Cython
translates a module that cimports ``dlpackarray.c_api``, and the module calls the C API
(``DLPackArray_FromObject``, ``_Converter``, ``_GetDLTensor``, ``_IsContiguous``).  Here it
is installed with pip (no build isolation, so against this dlpackarray) into a temporary
folder and called with NumPy arrays and torch tensors.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import require_torch
from toolchain import tool

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples" / "downstream_pkg"


@pytest.fixture(scope="module")
def dlpa_sum(tmp_path_factory):
    tool("cmake")
    cc = os.environ.get("CC") or "cc"
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) to build the example")
    pytest.importorskip(
        "scikit_build_core",
        reason="scikit-build-core is not installed (the example's build backend): "
        'pip install ".[reliability]"',
    )
    pytest.importorskip("Cython", reason="Cython is needed to build the example")
    root = tmp_path_factory.mktemp("downstream_pkg")
    target, build = root / "site", root / "build"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps"]
    cmd += ["--no-index", "-t", str(target), f"-Cbuild-dir={build}", str(EXAMPLE)]
    # The build backend runs in a subprocess that finds this dlpackarray on the same path.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (EXAMPLE / "build").exists()  # the source tree stays clean
    sys.path.insert(0, str(target))
    try:
        import dlpa_sum

        yield dlpa_sum
    finally:
        sys.path.remove(str(target))
        for name in [m for m in sys.modules if m == "dlpa_sum" or m.startswith("dlpa_sum.")]:
            del sys.modules[name]


DTYPES = ["float64", "float32", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "bool"]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES)
def test_sums_numpy_arrays_of_every_layout(dlpa_sum, dtype):
    base = (np.arange(60) % 7).astype(dtype).reshape(3, 4, 5)
    views = [base, base[:, ::2, ::-1], base.transpose(2, 0, 1), base[1], base[0, 0, 0:0]]
    readonly = base.copy()
    readonly.flags.writeable = False
    views += [readonly[::2], np.asarray(base[1, 2, 3])]
    for v in views:
        got = dlpa_sum.total(v)
        assert got == v.sum(), (dtype, v.shape, v.strides)
        assert isinstance(got, float if v.dtype.kind == "f" else int)


def test_sums_torch_tensors(dlpa_sum):
    torch = require_torch()
    t = torch.arange(24, dtype=torch.int32).reshape(4, 6)
    assert dlpa_sum.total(t) == int(t.sum())
    assert dlpa_sum.total(t.T[1:, ::2]) == int(t.T[1:, ::2].sum())
    f = torch.linspace(0, 1, 11, dtype=torch.float64)
    assert dlpa_sum.total(f) == pytest.approx(float(f.sum()))
    assert dlpa_sum.total(torch.tensor(True)) == 1


def test_describe_goes_through_the_converter(dlpa_sum):
    a = np.zeros((2, 3), dtype=np.float32)
    assert dlpa_sum.describe(a) == ((2, 3), (2, 32, 1), False, True)
    r = np.zeros((4, 2), dtype=np.uint8)[::2]
    r.flags.writeable = False
    assert dlpa_sum.describe(r) == ((2, 2), (1, 8, 1), True, False)
    assert dlpa_sum.describe(memoryview(b"abc")) == ((3,), (1, 8, 1), True, True)


def test_errors_reach_python(dlpa_sum):
    with pytest.raises(TypeError, match="cannot wrap a 'object'"):
        dlpa_sum.total(object())
    with pytest.raises(TypeError, match="does not sum dtype code 2, 16 bits"):
        dlpa_sum.total(np.zeros(3, dtype=np.float16))
    with pytest.raises(TypeError):
        dlpa_sum.describe(object())
