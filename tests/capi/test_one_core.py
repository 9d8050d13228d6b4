"""The C++ core and the Python shim are linked once, into libdlpackarray_core.

Every extension module calls into that one library, so there is one pool of
managed-tensor blocks, one set of deleters and capsule destructors, and one
``dla::Error`` type: what one module creates, another recognises.
"""

from __future__ import annotations

import array
import ctypes
import gc
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from dlpack_ctypes import KDL_FLOAT, Producer, capsule_struct
from exchange_ctypes import CallbackProvider, Functions, call_deleter

import dlpackarray
from dlpackarray import DLPackArray

PKG = pathlib.Path(dlpackarray.__file__).parent
CORE = "libdlpackarray_core.so"
EXTENSIONS = sorted(p for p in PKG.glob("_*.so"))
OURS = Functions(DLPackArray.__dlpack_c_exchange_api__)


@pytest.mark.skipif(sys.platform != "linux", reason="reads ELF dynamic sections")
def test_every_extension_module_links_the_one_core_library():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    assert (PKG / CORE).is_file()
    assert {p.name.split(".")[0] for p in EXTENSIONS} >= {
        "_array", "_buffer", "_common", "_dlpack", "_views", "_array_interface", "_exchange",
        "_capi",
    }  # fmt: skip
    for ext in EXTENSIONS:
        dynamic = subprocess.run(
            [readelf, "-d", str(ext)], capture_output=True, text=True, check=True
        ).stdout
        symbols = subprocess.run(
            [readelf, "-W", "--dyn-syms", str(ext)], capture_output=True, text=True, check=True
        ).stdout
        # No module carries a copy of the core: every dla:: symbol it uses is
        # undefined in it (resolved from the one library); a module that uses
        # none needs no link at all.
        core_symbols = [line for line in symbols.splitlines() if "_ZN3dla" in line]
        assert all(" UND " in line for line in core_symbols), f"{ext.name} defines dla:: code"
        if core_symbols:
            assert f"[{CORE}]" in dynamic, f"{ext.name} does not link {CORE}"
            assert "$ORIGIN" in dynamic, f"{ext.name} cannot find {CORE} beside itself"
    # The core exports its C++ API (and nothing has to export it twice).
    lib = ctypes.CDLL(str(PKG / CORE))
    assert lib["_ZN3dla8validateERKNS_10TensorViewE"]
    with pytest.raises(AttributeError):
        lib["PyInit__array"]


@pytest.mark.skipif(
    bool(os.environ.get("DLPACKARRAY_SANITIZED")),
    reason="the sanitizer build recycles no block (cpp/src/memory_recycling.hpp; "
    "tests/lifetime/test_sanitizer_recycling.py checks that instead)",
)
def test_block_pool_is_shared_by_every_module():
    """A block freed by a capsule of _dlpack is the next one _capi hands out,
    and the other way round: one pool, not one per module."""
    a = DLPackArray(np.arange(4.0))
    cap = a.__dlpack__(max_version=(1, 3))
    first = ctypes.addressof(capsule_struct(cap))
    del cap  # unconsumed: the destructor returns the block to the pool
    address = OURS.managed(a)  # dlpackarray._capi takes a block
    assert address == first
    call_deleter(address)  # ...and gives it back
    cap = a.__dlpack__(max_version=(1, 3))
    assert ctypes.addressof(capsule_struct(cap)) == first


def test_tensor_adopted_in_one_module_is_released_by_another():
    """The exchange consumer (dlpackarray._exchange) adopts the tensor; a refused
    device request makes _array release it through _dlpack's helper at once."""
    p = Producer(np.arange(3.0))
    provider = CallbackProvider(lambda obj: p.address)

    class Foreign:
        __dlpack_c_exchange_api__ = provider.capsule

    with pytest.raises(BufferError, match="copies between host memory"):
        DLPackArray(Foreign(), device=(2, 0))
    assert provider.calls == 1 and p.deleter_calls == 1


def _bad_dltensor_capsule():
    return Producer(None, shape=(2,), dtype=(KDL_FLOAT, 32, 1), data=0x1000, ndim=65).capsule()


def _bad_interface():
    class Iface:
        __array_interface__ = {"shape": (2,), "typestr": "<x4", "data": (0, False), "version": 3}

    return Iface()


def _foreign_bad_tensor():
    bad = Producer(np.arange(2.0), ndim=70)
    provider = CallbackProvider(lambda obj: bad.address)
    # The class keeps the provider (and so its table) alive.
    attrs = {"__dlpack_c_exchange_api__": provider.capsule, "provider": provider}
    return type("Foreign", (), attrs)()


# (module whose code calls the core, call, exception type, message fragment)
CORE_ERRORS = [
    ("_views", lambda: DLPackArray(np.arange(6)).reshape(4), ValueError, "reshape"),
    ("_common", lambda: dlpackarray.DType("nope"), TypeError, "unknown dtype name 'nope'"),
    ("_buffer", lambda: DLPackArray(array.array("u", "ab")), BufferError, "buffer format"),
    ("_array_interface", lambda: DLPackArray(_bad_interface()), TypeError, "x4"),
    ("_dlpack", lambda: DLPackArray(_bad_dltensor_capsule()), BufferError, "ndim 65"),
    (
        "_capi",
        lambda: OURS.to_py(Producer(np.arange(2.0), ndim=-1).address),
        BufferError,
        "ndim -1",
    ),
    ("_exchange", lambda: DLPackArray(_foreign_bad_tensor()), BufferError, "ndim 70"),
]


@pytest.mark.parametrize(("module", "call", "exc", "fragment"), CORE_ERRORS, ids=lambda x: x)
def test_core_errors_become_the_same_exceptions_in_every_module(module, call, exc, fragment):
    """dla::Error thrown deep in the shared core reaches Python as its mapped
    exception whichever module called, never as a RuntimeError or a crash."""
    with pytest.raises(exc) as info:
        call()
    assert fragment in str(info.value)
    assert type(info.value) is exc
    gc.collect()
