"""The ``no_cuda_driver`` marker: tests of what a process without a CUDA driver does.

Such tests describe CUDA data by made-up pointers (``0x10000``) and streams
(``0x7F00``) and check the errors a process that cannot load a driver gives.
Where a driver loads (a GPU machine, or ``DLPACKARRAY_CUDA_DRIVER`` naming
the fake one), the core would hand those values to it: a made-up stream is
not a CUstream and the real driver cannot tell (it crashes inside), and the
errors are the driver's.  There the test runs in a child interpreter whose
``DLPACKARRAY_CUDA_DRIVER`` names a file that does not exist, so its
assertions hold on every machine and a crash fails that test only.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import subprocess
import sys
import tempfile

import pytest

# Set in the child, which must run the test itself.
_CHILD = "DLPACKARRAY_TEST_NO_CUDA_DRIVER_CHILD"
MISSING_DRIVER = os.path.join(tempfile.gettempdir(), "dlpackarray-no-cuda-driver", "libcuda.so.1")


@functools.cache
def cuda_driver_loads() -> bool:
    """Whether the core of this process could load a CUDA driver."""
    path = os.environ.get("DLPACKARRAY_CUDA_DRIVER") or "libcuda.so.1"
    try:
        ctypes.CDLL(path)
    except OSError:
        return False
    return True


def _run_in_child(item) -> None:
    env = dict(os.environ)
    env.update(
        {
            "DLPACKARRAY_CUDA_DRIVER": MISSING_DRIVER,
            _CHILD: "1",
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "PYTHONFAULTHANDLER": "1",
        }
    )
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", item.nodeid]
    proc = subprocess.run(
        cmd, cwd=str(item.config.rootpath), env=env, capture_output=True, text=True, timeout=600
    )
    out = proc.stdout + proc.stderr
    if proc.returncode == 0 and re.search(r"\b1 passed\b", out):
        return
    if proc.returncode == 0 and re.search(r"\b1 skipped\b", out):
        reasons = re.findall(r"^SKIPPED \[\d+\] (.*)$", out, re.MULTILINE)
        pytest.skip(f"(run without a CUDA driver in a child) {' '.join(reasons)}")
    pytest.fail(
        f"run in a child without a CUDA driver, the test failed (status {proc.returncode}):\n{out}",
        pytrace=False,
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if pyfuncitem.get_closest_marker("no_cuda_driver") is None or os.environ.get(_CHILD):
        return None
    if not cuda_driver_loads():
        return None  # this process is the one the test describes
    _run_in_child(pyfuncitem)
    return True
