"""Materialising a view (tolist, copy, ``in``, list, bytes, repr) never runs away.

A broadcast view can hold far more elements than the memory it views (2**40
copies of one byte travel in a 117-byte pickle).  Every path that builds
Python objects or a dense copy from such a view either finishes in time
proportional to the memory it really reads, or raises MemoryError up front --
before it allocates anything -- when the result cannot fit in the process
(physical memory or RLIMIT_AS), as NumPy fails at once.  The huge cases run in
a child under an address-space limit and a timeout, so a regression fails one
test instead of exhausting the machine.
"""

from __future__ import annotations

import os
import sys
import textwrap

import numpy as np
import pytest
from conftest import assert_clean_exit, run_python
from hypothesis import given
from hypothesis import strategies as st
from strategies import strided_views, wrap

from dlpackarray import DLPackArray

NATIVE = ["bool", "int8", "uint16", "int32", "int64", "float32", "float64", "complex128"]

posix_only = pytest.mark.skipif(
    sys.platform == "win32", reason="RLIMIT_AS (the child's memory limit) is POSIX only"
)
# AddressSanitizer reserves terabytes of address space for its shadow memory, which a
# child under RLIMIT_AS cannot map: those children run in the plain suite only.
unsanitized = pytest.mark.skipif(
    bool(os.environ.get("DLPACKARRAY_SANITIZED")),
    reason="RLIMIT_AS leaves no room for AddressSanitizer's shadow memory "
    "(DLPACKARRAY_SANITIZED=1)",
)

_CHILD = """
import copy, pickle, resource, time
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from dlpackarray import DLPackArray

def huge(dtype, shape):
    itemsize = DLPackArray.from_buffer(bytes(16), dtype, shape=(1,)).itemsize
    return DLPackArray.from_buffer(bytes(itemsize), dtype, shape=shape,
                                   strides=(0,) * len(shape))

cases = [huge("uint8", (2**40,)), huge("float64", (2**10, 2**30)),
         huge("complex64", (2**10, 2**15, 2**15)), huge("bool", (2**34,))]
ops = {{
    "tolist": lambda a: a.tolist(),
    "copy": lambda a: a.copy(),
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "list": list,
    "bytes": bytes,
    "memoryview.tobytes": lambda a: memoryview(a).tobytes(),
    "in (present)": lambda a: a.item(0) in a,
    "in (absent)": lambda a: 7 in a,
    "repr": repr,
    "str": str,
    "pickle": lambda a: len(pickle.dumps(a, protocol=5)),
    "len": len,
    "iter+next": lambda a: next(iter(a)),
}}
for a in cases:
    for name, op in ops.items():
        t = time.perf_counter()
        try:
            result = op(a)
            outcome = "ok"
        except MemoryError as e:
            outcome = "MemoryError"
            result = str(e)
        took = time.perf_counter() - t
        assert took < 10, (name, a.shape, took)
        if name in ("tolist", "copy", "copy.copy", "copy.deepcopy"):
            assert outcome == "MemoryError", (name, a.shape)
            # The message names the element count.
            assert str(a.size) in result, result
        if name == "in (present)":
            assert result is True, (name, a.shape)
        if name == "in (absent)":
            assert result is False, (name, a.shape)
        if name in ("repr", "str"):
            assert len(result) < 200
        if name == "pickle":
            assert result < 400, result
print("done")
"""


@posix_only
@unsanitized
def test_huge_broadcast_views_never_exhaust_memory_or_spin():
    """Every materialising path on a 2**40-element broadcast view answers within
    seconds under a 2 GiB address-space limit: MemoryError naming the element
    count (tolist, copies), or a cheap answer (``in``, repr, pickle, len)."""
    proc = run_python(textwrap.dedent(_CHILD.format(limit=2 << 30)), timeout=120)
    assert_clean_exit(proc, "materialising child")
    assert proc.stdout.strip().endswith("done")


@posix_only
@unsanitized
@pytest.mark.parametrize(
    ("dtype", "shape", "fits"),
    [
        # 2**27 float64 elements: 1 GiB of list slots plus 3 GiB of floats.
        ("float64", (2**27,), False),
        # 2**26 bools are shared objects: 512 MiB of slots, within 3 GiB.
        ("bool", (2**13, 2**13), True),
        # Nested lists count too: 2**26 rows of one element, ~4.7 GiB of lists.
        ("int8", (2**26, 1), False),
    ],
)
def test_tolist_refuses_exactly_what_cannot_fit(dtype, shape, fits):
    """tolist() of a broadcast view is refused up front iff its least possible
    size (a list slot per element and per nested list, each list object, and a
    float/complex object per element) exceeds the process's address-space
    limit; results that fit are built."""
    code = f"""
        import resource, time
        resource.setrlimit(resource.RLIMIT_AS, ({3 << 30}, {3 << 30}))
        from dlpackarray import DLPackArray
        a = DLPackArray.from_buffer(bytes(8), {dtype!r}, shape={shape!r},
                                    strides=(0,) * {len(shape)})
        t = time.perf_counter()
        try:
            n = len(a.tolist())
            print("built", n)
        except MemoryError as e:
            assert time.perf_counter() - t < 1, "refused, but not up front"
            assert str(a.size) in str(e), e
            print("refused")
        """
    proc = run_python(textwrap.dedent(code), timeout=120)
    assert_clean_exit(proc, "tolist child")
    assert proc.stdout.split()[0] == ("built" if fits else "refused")


def _same_values(a, b) -> bool:
    """Equality of nested lists of Python scalars in which NaN equals NaN (each
    tolist() makes its own float objects, so list equality alone fails on NaN)."""
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same_values, a, b))
    if isinstance(a, complex) or isinstance(b, complex):
        a, b = complex(a), complex(b)
        return _same_values(a.real, b.real) and _same_values(a.imag, b.imag)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return type(a) is type(b) and a == b


@given(strided_views(NATIVE), st.data())
def test_tolist_and_in_agree_with_numpy(case, data):
    """For any strided or broadcast view, tolist() equals NumPy's and ``v in a``
    equals NumPy's ``(a == v).any()``, for values present and absent."""
    name, _base, view = case
    x = wrap(name, view)
    assert _same_values(x.tolist(), view.tolist())
    flat = view.reshape(-1)
    probes = [data.draw(st.sampled_from(list(flat)))] if flat.size else []
    probes += [7, -1, 0.5, True, 1 + 2j]
    # NumPy's answer from a contiguous copy: NumPy 2.1 and 2.2.0 crash comparing a
    # zero-stride view with an out-of-range Python int (uint16 == -1).
    dense = np.ascontiguousarray(view)
    for v in probes:
        # A NaN element compared with some probes sets the floating-point
        # "invalid" flag, which NumPy reports as a warning; only the answer counts.
        with np.errstate(invalid="ignore"):
            want = bool((dense == v).any())
        assert (v in x) == want, (v, view)


def test_in_reads_each_distinct_element_once():
    """A broadcast view answers ``in`` by reading its few real elements: a
    (2**40, 2**20) view over three values answers in microseconds."""
    row = np.array([1.5, -2.0, 3.0])
    x = DLPackArray.from_buffer(row, "float64", shape=(3, 2**40, 2**20), strides=(8, 0, 0))
    assert -2.0 in x and 3 in x and 4 not in x
    assert 1 in DLPackArray(np.array(1)) and 2 not in DLPackArray(np.array(1))
    assert 0 not in DLPackArray(np.zeros((3, 0)))
