"""Property-based round trips DLPackArray <-> NumPy <-> torch <-> jax (CPU).

Every example builds a random strided view (slices with positive and
negative steps, transposes, broadcasting, read-only flags, 0- and 1-extents,
0..8 dimensions) over random bytes, wraps it, hands it to each consumer and
checks: identical bits, identical address (zero copy) where the consumer can
share, writes visible both ways when writable, and -- where a consumer copies
or refuses -- exactly that behaviour.

Known consumer limits asserted here (not skipped):

* NumPy's ``from_dlpack`` has no bfloat16/float8 support, so ml_dtypes data
  is checked through our own capsule (read with ctypes) and through torch/jax.
* jax (XLA) shares memory only for compact layouts (a permutation of a dense
  layout) whose first element is 64-byte aligned; other compact layouts are
  copied; non-compact ones (gaps, zero or negative strides) are refused.  jax
  calls ``__dlpack__`` without ``max_version``, so read-only data is refused
  with our BufferError (the legacy struct cannot carry READ_ONLY).
* torch 2.13 aborts the process on negative strides (pytorch#188023), so
  torch is never handed negative strides in-process; test_torch_negative_strides
  documents that in a subprocess.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import dlpack_ctypes as dc
import numpy as np
import pytest
from conftest import require_jax, require_ml_dtypes, require_torch
from dtype_names import NUMPY_DTYPES
from hypothesis import event, given
from hypothesis import strategies as st
from strategies import ALL_DTYPES, ML_DTYPES, address, strided_views, wrap

from dlpackarray import DLPackArray

# torch has no dtype for these DLPack codes and says so with a BufferError.
TORCH_MISSING = {"float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz"}

# NumPy imports every DLPack capsule read-only before 2.2, whatever its flag says.
_NUMPY_DLPACK_IMPORTS_ARE_WRITABLE = bool(np.from_dlpack(np.zeros(1)).flags.writeable)


def uint_views(arr: np.ndarray) -> list:
    """Same-strided unsigned views covering every byte of arr's elements."""
    if arr.dtype.kind == "c":
        return uint_views(arr.real) + uint_views(arr.imag)
    return [arr.view(f"u{arr.dtype.itemsize}")]


def flip_bits(arr: np.ndarray, is_bool: bool) -> None:
    """In-place bit flip that keeps bools valid (0 <-> 1)."""
    for u in uint_views(arr):
        np.bitwise_xor(u, 1 if is_bool else np.iinfo(u.dtype).max, out=u)


def first_element_address(x: DLPackArray) -> int:
    return x.data_ptr + x.byte_offset


def strides_that_matter(x) -> tuple:
    return tuple(s for n, s in zip(x.shape, x.strides, strict=False) if n > 1)


def is_compact(shape, strides) -> bool:
    """True when the layout is a permutation of a dense layout (what XLA shares)."""
    if math.prod(shape) == 0:
        return True
    dims = sorted((s, n) for n, s in zip(shape, strides, strict=False) if n != 1)
    expected = 1
    for s, n in dims:
        if s != expected:
            return False
        expected *= n
    return True


def check_wrapped(name: str, view: np.ndarray, x: DLPackArray) -> None:
    assert x.dtype.name == name
    assert x.shape == view.shape
    assert x.strides == tuple(s // view.itemsize for s in view.strides)
    assert x.readonly == (not view.flags.writeable)
    if view.size:
        assert first_element_address(x) == address(view)


@given(strided_views(NUMPY_DTYPES))
def test_numpy_roundtrip(case):
    name, _base, view = case
    x = DLPackArray(view)
    check_wrapped(name, view, x)
    # The buffer-protocol import route describes the same memory.
    m = DLPackArray(memoryview(view))
    assert (m.shape, m.dtype, m.readonly) == (x.shape, x.dtype, x.readonly)
    if view.size:
        # NumPy's buffer export normalises strides of empty and length-1 dims.
        assert strides_that_matter(m) == strides_that_matter(x)
        assert first_element_address(m) == address(view)

    b = np.from_dlpack(x)
    assert b.dtype == view.dtype and b.shape == view.shape and b.strides == view.strides
    assert b.tobytes() == view.tobytes()
    if _NUMPY_DLPACK_IMPORTS_ARE_WRITABLE:  # NumPy's own rule (the capsule's flag is below)
        assert b.flags.writeable == view.flags.writeable
    if view.size:
        assert address(b) == address(view)
    # Back again: NumPy's export of the consumer array is the same memory.
    again = DLPackArray(b)
    assert again.strides == x.strides
    assert again.readonly == (x.readonly or not _NUMPY_DLPACK_IMPORTS_ARE_WRITABLE)
    if view.size:
        assert first_element_address(again) == address(view)

    # Export through PEP 3118 as well.
    mv = memoryview(x)
    assert mv.shape == view.shape and mv.strides == view.strides
    assert mv.readonly == (not view.flags.writeable)
    assert np.asarray(mv).tobytes() == view.tobytes()

    if view.flags.writeable and view.size:
        before = view.tobytes()
        flip_bits(view, name == "bool")  # writes through the source ...
        assert b.tobytes() == view.tobytes() != before
        # ... and through the consumer (NumPy's DLPack import where it is
        # writable, else dlpackarray's array interface)
        flip_bits(b if _NUMPY_DLPACK_IMPORTS_ARE_WRITABLE else np.asarray(x), name == "bool")
        assert view.tobytes() == before


@given(strided_views(ML_DTYPES))
def test_ml_dtypes_through_own_capsule(case):
    name, _base, view = case
    ml = require_ml_dtypes()
    x = wrap(name, view)
    check_wrapped(name, view, x)
    # NumPy cannot consume these dtypes through DLPack at all ...
    with pytest.raises((RuntimeError, BufferError, TypeError)):
        np.from_dlpack(x)
    # ... so read our export back with ctypes: same dtype code/bits, layout, memory.
    cap = x.__dlpack__(max_version=(1, 3))
    f = dc.tensor_fields(cap)
    assert f["dtype"] == dc.numpy_dl_dtype(getattr(ml, name))
    assert f["shape"] == view.shape and f["strides"] == x.strides
    assert bool(f["flags"] & dc.FLAG_READ_ONLY) == (not view.flags.writeable)
    if view.size:
        assert f["data"] + f["byte_offset"] == address(view)
    # Reinterpreting the exported memory with the ml_dtypes dtype gives the
    # same bits as the source storage.
    typed = view.view(getattr(ml, name))
    assert typed.tobytes() == view.tobytes()


def torch_bytes(t) -> bytes:
    torch = require_torch()
    # A fresh dense copy: .contiguous() keeps odd strides on length-1 dims,
    # which .view(uint8) rejects.
    flat = torch.empty(t.shape, dtype=t.dtype).copy_(t).reshape(-1)
    if t.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    return flat.view(torch.uint8).numpy().tobytes()


@given(strided_views(ALL_DTYPES))
def test_torch_roundtrip(case):
    torch = require_torch()
    name, _base, view = case
    x = wrap(name, view)
    if name in TORCH_MISSING:
        with pytest.raises(BufferError, match="Unsupported code"):
            torch.from_dlpack(x)
        return
    # torch 2.13 aborts on negative strides (see test_torch_negative_strides):
    # hand it the IS_COPIED export instead, which must be dense and equal.
    negative = any(s < 0 for n, s in zip(x.shape, x.strides, strict=False) if n > 1)
    if negative:
        event("torch: negative strides, copy=True export")
        t = torch.from_dlpack(x.__dlpack__(max_version=(1, 3), copy=True))
        assert t.is_contiguous()
        assert torch_bytes(t) == view.tobytes()
        if view.size:
            assert t.data_ptr() != address(view)
        return
    event(f"torch: zero-copy, writable={view.flags.writeable and view.size > 0}")
    t = torch.from_dlpack(x)
    assert tuple(t.shape) == view.shape
    assert str(t.dtype).removeprefix("torch.") == name
    assert torch_bytes(t) == view.tobytes()
    if view.size:
        assert t.data_ptr() == address(view)
        # torch keeps strides except on length-1 dimensions (pytorch#163274).
        assert all(a == b for a, b, n in zip(t.stride(), x.strides, x.shape, strict=False) if n > 1)
    y = DLPackArray(t)
    assert y.dtype == x.dtype and y.shape == x.shape
    if view.size:
        assert first_element_address(y) == address(view)
    if view.flags.writeable and view.size:
        before = view.tobytes()
        flip_bits(view, name == "bool")
        assert torch_bytes(t) == view.tobytes() != before
        # Write through torch: bitwise ops on a same-size integer view.
        if t.is_complex():
            tv = torch.view_as_real(t).view(torch.int64 if name == "complex128" else torch.int32)
        else:
            tv = t.view(
                {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
            )
        if name == "bool":
            tv.bitwise_xor_(1)
        else:
            tv.bitwise_not_()
        assert view.tobytes() == before


@given(strided_views(ALL_DTYPES))
def test_jax_roundtrip(case):
    jax = require_jax()
    import jax.numpy as jnp

    name, _base, view = case
    x = wrap(name, view)
    if x.readonly:
        event("jax: refused read-only")
        # jax never passes max_version, so it asks for a legacy capsule, which
        # cannot carry READ_ONLY: we refuse rather than hand out writable memory.
        with pytest.raises(BufferError, match="read-only"):
            jnp.from_dlpack(x)
        return
    if not is_compact(x.shape, x.strides):
        event("jax: refused non-compact")
        with pytest.raises(Exception, match="compact"):
            jnp.from_dlpack(x)
        return
    j = jnp.from_dlpack(x)
    assert j.shape == view.shape
    assert j.dtype.name == name
    host = np.asarray(j)
    assert host.tobytes() == view.view(j.dtype).tobytes()
    if view.size:
        shared = j.unsafe_buffer_pointer() == address(view)
        event(f"jax: shared={shared}")
        # XLA shares memory exactly when the first element is 64-byte aligned.
        assert shared == (address(view) % 64 == 0)
    y = DLPackArray(j)
    assert y.dtype == x.dtype and y.shape == x.shape
    if view.size:
        assert first_element_address(y) == j.unsafe_buffer_pointer()
    assert jax is not None


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_jax_shares_aligned_dense_memory(name):
    """Deterministic companion of the property above: an aligned dense array is shared."""
    require_jax()
    import jax.numpy as jnp

    dt = np.dtype(name)
    raw = np.zeros(12 * dt.itemsize + 64, np.uint8)
    off = (-address(raw)) % 64
    a = raw[off : off + 12 * dt.itemsize].view(dt).reshape(3, 4)
    j = jnp.from_dlpack(DLPackArray(a.T))
    assert j.unsafe_buffer_pointer() == address(a)
    np.testing.assert_array_equal(np.asarray(j), a.T)


def test_torch_negative_strides():
    """Documents torch's handling of negative strides (run in a subprocess: it aborts).

    Whatever torch does, it must not silently return wrong values: either it
    fails (exception or abort) or the data matches.
    """
    require_torch()
    code = textwrap.dedent("""
        import numpy as np, torch
        from dlpackarray import DLPackArray
        a = np.arange(12.0).reshape(3, 4)[:, ::-1]
        try:
            t = torch.from_dlpack(DLPackArray(a))
        except Exception as e:
            print("RAISED", type(e).__name__)
        else:
            print("EQUAL" if np.array_equal(t.numpy(), a) else "WRONG")
    """)
    r = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env=_subprocess_env(),
        timeout=120,
    )
    assert "WRONG" not in r.stdout
    aborted = r.returncode != 0
    assert aborted or r.stdout.strip() in ("EQUAL", "RAISED RuntimeError", "RAISED BufferError")
    if aborted:
        assert "strides" in r.stderr  # torch's c10::Error message names the strides


def _subprocess_env():
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


@given(st.data())
def test_torch_source_roundtrip(data):
    """torch -> DLPackArray -> NumPy/torch keeps the address and the bits."""
    torch = require_torch()
    dtype = data.draw(
        st.sampled_from(
            [
                torch.float32,
                torch.int64,
                torch.bool,
                torch.bfloat16,
                torch.complex64,
                torch.uint16,
                torch.float8_e5m2,
            ]
        )
    )
    shape = tuple(data.draw(st.lists(st.integers(0, 4), max_size=4)))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31)))
    t = (
        torch.randint(0, 2, shape, generator=g).to(dtype)
        if dtype == torch.bool
        else torch.randint(0, 255, shape, generator=g, dtype=torch.uint8)
        .to(torch.float32)
        .to(dtype)
    )
    if t.ndim >= 2 and data.draw(st.booleans()):
        t = t.transpose(0, 1)
    x = DLPackArray(t)
    assert x.shape == tuple(t.shape)
    assert x.strides == tuple(t.stride())
    if t.numel():
        assert first_element_address(x) == t.data_ptr()
    back = torch.from_dlpack(x)
    assert torch_bytes(back) == torch_bytes(t)
    if t.numel():
        assert back.data_ptr() == t.data_ptr()
