"""B11: CUDA stream-ordered export overhead -- here against the FAKE driver.

The issue's B11 compares ``DLPackArray.__dlpack__(stream=S)`` for data ready
on another stream with ``torch.Tensor.__dlpack__(stream=S)`` on a GPU (target
<= 0.5x) and device-to-host copy bandwidth with ``tensor.cpu()`` (target
>= 0.9x).  No GPU was available when this was written: these cases load the
fake driver of tests/helpers/fake_cuda (compiled on the fly; DLPACKARRAY_CUDA_DRIVER)
and measure dlpackarray's own overhead around the driver calls only -- the
fake calls cost next to nothing, a real driver's do not.  docs/cuda.md gives
the GPU procedure (benchmarks/gpu_b11.py).
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile

from benchmarks.harness import Case, Contender

_HELPERS = pathlib.Path(__file__).resolve().parent.parent / "tests" / "helpers"
_FAKE = {}


def _fake_driver():
    if "lib" not in _FAKE:
        sys.path.insert(0, str(_HELPERS))
        import fake_cuda

        path = fake_cuda.build(tempfile.mkdtemp(prefix="dla-fake-cuda-"))
        os.environ["DLPACKARRAY_CUDA_DRIVER"] = str(path)
        from dlpackarray import _cuda

        _cuda._reset_driver()  # load the fake one on next use
        lib = fake_cuda.FakeCuda(path)
        lib.lib.fake_set_logging(0)
        lib.standard_streams()  # the stream handles 0x5000 and 0x7000 used below
        _FAKE["lib"] = lib
        _FAKE["module"] = fake_cuda
    return _FAKE["lib"], _FAKE["module"]


def _setup():
    import numpy as np

    import dlpackarray

    fake, module = _fake_driver()
    src = np.ones((256, 256), dtype=np.float32)
    p = fake.device_array(src)
    x = dlpackarray.DLPackArray(module.cai(p, src.shape, stream=0x5000))
    return {"x": x, "DLPackArray": dlpackarray.DLPackArray}


def cases() -> list[Case]:
    return [
        Case(
            family="B11",
            name="B11/cross-stream-export/fake-driver",
            title="FAKE DRIVER (overhead only): __dlpack__(stream=S), data ready on another stream",
            setup=_setup,
            contenders=[
                Contender(
                    "dlpackarray cross-stream",
                    "x.__dlpack__(stream=0x7000, max_version=(1, 3))",
                    "event create/record/wait/destroy through the fake driver",
                ),
                Contender(
                    "dlpackarray same stream",
                    "x.__dlpack__(stream=0x5000, max_version=(1, 3))",
                    "no driver call",
                ),
                Contender(
                    "dlpackarray no stream ordering",
                    "x.__dlpack__(stream=-1, max_version=(1, 3))",
                    "stream=-1",
                ),
            ],
            anchor="dlpackarray no stream ordering",
            params={"driver": "fake", "gpu": False},
        ),
        Case(
            family="B11",
            name="B11/device-to-host/fake-driver",
            title="FAKE DRIVER (overhead only): DLPackArray(x, device='cpu') of 256x256 float32",
            setup=_setup,
            contenders=[
                Contender("dlpackarray strided D2H", "DLPackArray(x[:, ::2], device='cpu')"),
                Contender("dlpackarray contiguous D2H", "DLPackArray(x, device='cpu')"),
            ],
            anchor="dlpackarray contiguous D2H",
            params={"driver": "fake", "gpu": False},
        ),
    ]
