"""validate() against a big-integer model of its extent arithmetic.

validate() (cpp/src/tensor_view.cpp) computes every count of a view in int64
or uintptr arithmetic: the element count, each dimension's byte step and span,
the bytes below and above the first element, the bytes spanned (hi - lo) and
the address range.  The model below computes the same quantities with
Python's unbounded integers; the verdict (accepted, OverflowError, ValueError
for a NULL address) must agree for shapes, strides, offsets and addresses
drawn from the int64 and address-space edges.  Under the UBSan build
(.ci/reliability) an intermediate that overflows is a report even where the verdict
happens to come out right: the fuzzer found ``-lo`` negated in int64 for
lo == INT64_MIN.
"""

from __future__ import annotations

import dlpack_ctypes as dc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray
from dlpackarray._pickle import byte_extent

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINTPTR_MAX = 2**64 - 1

_DTYPES = {  # itemsize -> (code, bits, lanes)
    1: (dc.KDL_UINT, 8, 1),
    2: (dc.KDL_INT, 16, 1),
    4: (dc.KDL_FLOAT, 32, 1),
    8: (dc.KDL_FLOAT, 64, 1),
    16: (dc.KDL_COMPLEX, 128, 1),
}

_EDGES = [
    INT64_MIN,
    INT64_MIN + 1,
    INT64_MAX,
    INT64_MAX - 1,
    2**62,
    -(2**62),
    2**61,
    -(2**61),
    2**32,
    -(2**32),
    INT64_MAX // 2 + 1,
    INT64_MIN // 2 - 1,
]


def _fits(x: int) -> bool:
    return INT64_MIN <= x <= INT64_MAX


def expected_verdict(shape, strides, itemsize, data, byte_offset):
    """'ok' with the bytes spanned, 'overflow' or 'null', computed without bounds."""
    if byte_offset > INT64_MAX:
        return "overflow"
    nonzero = 1
    for n in shape:
        nonzero *= n or 1
    if not _fits(nonzero):
        return "overflow"
    if 0 in shape:
        return "ok", 0
    lo = hi = 0
    for n, s in zip(shape, strides, strict=True):
        if n == 1:  # one element whatever the stride says
            continue
        step = s * itemsize
        span = (n - 1) * step
        if not (_fits(step) and _fits(span)):
            return "overflow"
        if span >= 0:
            hi += span
        else:
            lo += span
    # The partial sums of one sign move one way: the last one is the extreme.
    hi += itemsize
    if not (_fits(lo) and _fits(hi) and _fits(hi - lo)):
        return "overflow"
    if data == 0:
        return "null"
    first = data + byte_offset
    if first > UINTPTR_MAX or -lo > first or first + hi > UINTPTR_MAX:
        return "overflow"
    return "ok", hi - lo


def import_verdict(shape, strides, itemsize, data, byte_offset):
    p = dc.Producer(
        None,
        shape=shape,
        strides=strides,
        dtype=_DTYPES[itemsize],
        data=data,
        byte_offset=byte_offset,
    )
    try:
        a = DLPackArray(p.capsule())
    except OverflowError:
        verdict = "overflow"
    except ValueError as e:
        assert "NULL" in str(e)
        verdict = "null"
    else:
        # Accepted: report the bytes spanned (Dask's sizeof); never read them.
        verdict = "ok", byte_extent(a)
        del a
    assert p.deleter_calls == 1
    return verdict


_extent = st.one_of(st.integers(0, 4), st.sampled_from([2, 3, 2**31, 2**32 + 1, 2**62, INT64_MAX]))
_stride = st.one_of(st.integers(-4, 4), st.sampled_from(_EDGES), st.integers(INT64_MIN, INT64_MAX))
_address = st.one_of(
    st.sampled_from([0, 8, 0x1000, 2**62, 2**63, 2**63 + 0x1000, 2**64 - 64, UINTPTR_MAX]),
    st.integers(1, UINTPTR_MAX),
)
_offset = st.one_of(st.integers(0, 64), st.sampled_from([2**62, INT64_MAX, 2**63, UINTPTR_MAX - 7]))


_NDIM = st.integers(1, 3)


@st.composite
def _views(draw, ndim=_NDIM):
    ndim = draw(ndim)
    shape = tuple(draw(_extent) for _ in range(ndim))
    strides = tuple(draw(_stride) for _ in range(ndim))
    itemsize = draw(st.sampled_from(sorted(_DTYPES)))
    return shape, strides, itemsize, draw(_address), draw(_offset)


@settings(max_examples=400, deadline=None)
@given(_views())
# lo == INT64_MIN exactly (the fuzzer's case), below and far from 2**63.
@example(((2,), (INT64_MIN,), 1, 0x1000, 0))
@example(((2,), (INT64_MIN,), 1, 2**63, 0))
@example(((3,), (-(2**62),), 1, UINTPTR_MAX - 8, 0))
@example(((2, 2), (INT64_MIN // 2, INT64_MIN // 2), 1, 2**63 + 8, 0))
# hi - lo just past INT64_MAX with both halves legal on their own.
@example(((2, 2), (-(2**62), 2**62), 1, 2**63, 0))
def test_validate_matches_unbounded_model(view):
    assert import_verdict(*view) == expected_verdict(*view)


@settings(max_examples=400, deadline=None)
@given(_views(ndim=st.just(1)))
@example(((2**62,), (0,), 8, 0x1000, 0))  # broadcast: 2**62 elements in 8 bytes
@example(((2**62,), (1,), 2, 0x1000, 0))  # nbytes exactly 2**63: refused
@example(((0,), (INT64_MIN,), 8, 0, 0))  # empty: no stride or address is read
@example(((1,), (INT64_MIN,), 8, UINTPTR_MAX - 7, 0))  # one element at the top
def test_one_dimension_matches_unbounded_model(view):
    # validate() writes its one-dimensional pass out (every Arrow column, most
    # imports): it must reach the general loops' verdict for every input.
    assert import_verdict(*view) == expected_verdict(*view)


@pytest.mark.parametrize(
    "data", [0x1000, 2**63, 2**63 + 2**62], ids=["low-address", "at-2**63", "high-address"]
)
def test_lowest_byte_at_int64_min_is_refused(data):
    # lo == INT64_MIN: the bytes spanned (hi - lo) do not fit int64.  Before
    # the fix a high enough address was accepted and byte_extent() (Dask's
    # sizeof) came back negative.
    p = dc.Producer(
        None, shape=(2,), strides=(INT64_MIN,), dtype=_DTYPES[1], data=data, byte_offset=0
    )
    with pytest.raises(OverflowError, match="array extent overflows int64"):
        DLPackArray(p.capsule())
    assert p.deleter_calls == 1
