"""dlpackarray.testing on fake CUDA memory (tests/testing/test_conformance_cuda.py runs each
function in a child whose DLPACKARRAY_CUDA_DRIVER names the fake driver).

Fake device memory is mapped PROT_NONE: a probe that reads it from the host kills the
child.  Every forked probe is watched too: a forked child must not call the driver (its
context belongs to the parent), which the fake driver's call log shows.
"""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dlpackarray import DLPackArray  # noqa: E402
from dlpackarray.testing import _abi, _forked, check_conformance  # noqa: E402
from fake_cuda import FakeCuda, cai  # noqa: E402

#: Rules the device data must have passed (not merely left not-applicable).
DEVICE_RULES = {
    "buffer.device-data",
    "array-interface.device-data",
    "array-struct.device-data",
    "arrow.host-methods.device-data",
    "dlpack.tensor.first-element",
    "dlpack.tensor.layout-agrees",
    "dlpack.copy.true-new-memory",
    "dlpack.copy.false-no-copy",
    "dlpack.stream.cuda-legal-accepted",
    "dlpack.stream.cuda-zero-rejected",
    "dlpack.stream.below-minus-one-rejected",
    "arrow.device-array.device-agrees",
    "exchange.from-py-agrees",
    "cuda-array-interface.data",
}


def _watch_forks(f: FakeCuda) -> list:
    """Make every forked probe fail when it calls the driver; returns the list of runs."""
    runs = []
    original = _forked.run

    def run(probe, timeout=_forked.TIMEOUT):
        def guarded():
            before = len(f.log())
            why = probe()
            used = f.log()[before:]
            return f"a forked probe called the CUDA driver: {used}" if used else why

        runs.append(probe)
        return original(guarded, timeout)

    _forked.run = run
    return runs


_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DriverReleasing:
    """DLPackArray's device Arrow export, with a release callback that calls the driver."""

    def __init__(self, f: FakeCuda, x):
        self.f, self.x, self.keep = f, x, []

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        s, a = self.x.__arrow_c_device_array__(requested_schema, **kwargs)
        d = _abi.ArrowDeviceArray.from_address(_abi.capsule_pointer(a))
        original = d.array.release

        def release(ptr):
            self.f.lib.cuInit(0)  # logged by the fake driver, in whichever process
            ctypes.c_void_p.from_address(ptr + _abi.ArrowArray.release.offset).value = original
            _abi.PY_VOID_FN(original)(ptr)

        cb = _RELEASE(release)
        self.keep.append(cb)
        d.array.release = ctypes.cast(cb, ctypes.c_void_p).value
        return s, a


def _statuses(report) -> dict[str, tuple[str, str]]:
    return {r.rule.id: (r.status, r.message) for r in report.results}


def dlpackarray_on_device_memory_conforms():
    f = FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])
    f.standard_streams()
    runs = _watch_forks(f)
    src = np.arange(24, dtype=np.float32).reshape(4, 6)
    p = f.device_array(src)
    for make in (
        lambda: DLPackArray(cai(p, src.shape)),
        lambda: DLPackArray(cai(p, src.shape))[1:, ::2],  # a strided view
        lambda: DLPackArray(cai(p, src.shape, readonly=True)),
    ):
        x = make()
        report = check_conformance(x)
        got = _statuses(report)
        assert not report.failures(), str(report)
        missed = {r for r in DEVICE_RULES if got[r][0] != "pass"}
        assert not missed, {r: got[r] for r in missed}
        # The GIL probe would call the deleter of device data in a forked child.
        status, why = got["dlpack.deleter.without-gil"]
        assert status == "not-applicable" and "host memory" in why, why
    assert runs, "no forked probe ran at all (the schema's release is host memory)"
    # A device Arrow producer whose release calls the driver, as a CUDA library's frees do:
    # the forked consumption probe must leave it alone.
    report = check_conformance(_DriverReleasing(f, x), protocols=["arrow"])
    assert not report.failures(), str(report)
    status, why = _statuses(report)["arrow.device-array.capsule-names"]
    assert status == "pass", why
    # The data is intact: nothing wrote to it either.
    np.testing.assert_array_equal(np.asarray(DLPackArray(x, device="cpu")), src)


def cuda_interface_only_object_conforms():
    f = FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])
    _watch_forks(f)
    p = f.device_array(np.arange(12, dtype=np.float32))
    report = check_conformance(cai(p, (3, 4)))
    assert report.ok and not report.failures(), str(report)
    passed = {r.rule.id for r in report.results if r.status == "pass"}
    assert {"cuda-array-interface.data", "process.no-crash"} <= passed, passed
    # Host-only protocols the object does not offer are not applicable, not refused.
    assert _statuses(report)["buffer.device-data"][0] == "not-applicable"
