"""Typed hand-offs: a DLPackArray passed to NumPy, Polars and the buffer protocol.

tests/docs/test_typing_examples.py type-checks this file (mypy --strict and pyright strict,
Python 3.10 and 3.15) and runs it.  Polars is optional here; NumPy is required.
"""

from __future__ import annotations

import numpy as np

import dlpackarray as dla

a = dla.DLPackArray(np.arange(6, dtype=np.float32), device="cpu")
x = np.from_dlpack(a)  # zero-copy NumPy view
m = memoryview(a)  # a DLPackArray is a Buffer on every supported Python
moved = dla.DLPackArray(a, device=a)  # device= takes anything with __dlpack_device__
assert x.shape == (6,) and m.nbytes == 24 and moved.shape == (6,)
assert dla.DType(np.dtype("float32")) == dla.DType("float32")

try:
    import polars as pl
except ImportError:
    pass
else:
    s = pl.Series(a)  # Arrow PyCapsule interface: requested_schema typed as Polars expects
    assert s.to_list() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
