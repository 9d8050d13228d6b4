"""Under AddressSanitizer the core recycles no memory (cpp/src/memory_recycling.hpp).

The managed-tensor block pool and the Arrow export record's spare slot keep freed memory
for the next export.  In the sanitizer build both are off, so a lifetime bug -- a deleter
run twice, a consumer reading a tensor after deleting it, our own code releasing a block
twice -- reaches the allocator and is reported, instead of parking one block twice in the
pool and handing it to two later exports.  These tests run in CI's ASan+UBSan step
(``DLPACKARRAY_SANITIZED=1``, .ci/reliability) and are skipped elsewhere, where a double free is
undefined behaviour rather than a report.  Each misuse runs in a child process with the
report on its stderr (not in CI's report folder, which fails the run).
"""

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from dlpack_ctypes import capsule_struct

from dlpackarray import DLPackArray

pytestmark = pytest.mark.skipif(
    not os.environ.get("DLPACKARRAY_SANITIZED"),
    reason="needs the ASan build (DLPACKARRAY_SANITIZED=1, as in .ci/reliability)",
)

_CHILD = textwrap.dedent(
    """
    import ctypes, sys
    import numpy as np
    import dlpackarray
    from dlpackarray.testing._abi import DLManagedTensor, DLManagedTensorVersioned, PY_VOID_FN, api

    kind = sys.argv[1]
    versioned = kind != "legacy"
    name = b"dltensor_versioned" if versioned else b"dltensor"
    d = dlpackarray.DLPackArray(np.ones(8))
    capsule = d.__dlpack__(max_version=(1, 3)) if versioned else d.__dlpack__()
    ptr = api.PyCapsule_GetPointer(capsule, name)
    api.PyCapsule_SetName(capsule, b"used_" + name)  # consumed: the tensor is ours to delete
    struct = (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(ptr)
    deleter = PY_VOID_FN(struct.deleter)  # called with the GIL, like a Python consumer
    deleter(ptr)
    if kind == "recycled":
        # With a pool, these exports would take the deleted block back, and the second
        # call below would delete a live export's tensor without a word.
        others = [d.__dlpack__(max_version=(1, 3)) for _ in range(4)]
    deleter(ptr)  # the misuse: a second deleter call on the same tensor
    print("no report", flush=True)
    """
)


def _run_child(kind):
    env = dict(os.environ)
    # Same options as CI's step, but the report on stderr: CI fails on any report
    # file, and this one is expected.
    env["ASAN_OPTIONS"] = "detect_leaks=0:allocator_may_return_null=1"
    return subprocess.run(
        [sys.executable, "-c", _CHILD, kind],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.parametrize("kind", ["versioned", "legacy", "recycled"])
def test_a_second_deleter_call_is_reported(kind):
    proc = _run_child(kind)
    assert "no report" not in proc.stdout, proc.stderr[-2000:]
    assert proc.returncode != 0
    assert "ERROR: AddressSanitizer" in proc.stderr, proc.stderr[-2000:]
    # The freed block itself is what the second call touches.
    assert "heap-use-after-free" in proc.stderr or "double-free" in proc.stderr
    assert "owner_deleter" in proc.stderr, proc.stderr[-2000:]


def test_no_block_is_handed_out_again():
    # With the pool a dropped capsule's block is the next export's (test_one_core.py);
    # here every block goes back to the allocator, whose quarantine keeps it out of
    # reach, so three exports in a row never share an address.
    a = DLPackArray(np.arange(4.0))
    seen = set()
    for _ in range(3):
        cap = a.__dlpack__(max_version=(1, 3))
        seen.add(ctypes.addressof(capsule_struct(cap)))
        del cap
    assert len(seen) == 3
