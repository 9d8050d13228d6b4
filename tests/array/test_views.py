"""Zero-copy views on DLPackArray: indexing, reshape, transpose/permute/T, view(dtype).

NumPy is the reference for every result: values, shapes and strides must
match, and the view must share memory with (and keep alive) its source.
"""

import gc

import numpy as np
import pytest
from conftest import require
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dlpackarray import DLPackArray

torch = require("torch", "these tests exchange data with it")


def element_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def assert_same_view(view, expected):
    """`view` (DLPackArray) describes exactly the ndarray `expected`."""
    assert isinstance(view, DLPackArray)
    assert view.shape == expected.shape
    got = np.asarray(view)
    np.testing.assert_array_equal(got, expected)
    if expected.size > 1:
        # Strides that move between elements must agree; others are free.
        pairs = zip(expected.shape, view.strides, element_strides(expected), strict=True)
        for n, s_got, s_exp in pairs:
            if n > 1:
                assert s_got == s_exp
    if expected.size and isinstance(expected, np.ndarray):  # numpy scalars are copies
        assert got.__array_interface__["data"][0] == expected.__array_interface__["data"][0]


@pytest.fixture
def base():
    return np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4)


KEYS = [
    0,
    -1,
    1,
    (0, 1),
    (1, -1, 2),
    (-2, 0, -4),
    slice(None),
    slice(1, None),
    slice(None, None, -1),
    slice(None, None, 2),
    (slice(None), slice(None, None, -2)),
    (Ellipsis, 1),
    (1, Ellipsis),
    (Ellipsis,),
    (None,),
    (None, 0, None),
    (Ellipsis, None),
    (slice(5, 1, -1), slice(-1, -100, -2)),
    (slice(10, 20),),
    (slice(1, 1), 0),
    (0, slice(None), slice(3, 0, -2), None),
    (np.int64(1), np.int8(-1)),
    (),
    (0, 0, 0),
    (Ellipsis, 0, 0, 0),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_basic_indexing_matches_numpy(base, key):
    assert_same_view(DLPackArray(base)[key], base[key])


@settings(max_examples=150, deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
def test_random_basic_indices_match_numpy(data, shape):
    base = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    key = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    assert_same_view(DLPackArray(base)[key], base[key])


def test_chained_negative_steps_fold_below_data():
    # numpy exports a[::-1] with data pointing at its first element (the
    # highest address); a later view can start below that pointer.
    src = np.arange(10.0)
    rev = DLPackArray(src[::-1])
    v = rev[3:][::-1]
    assert_same_view(v, src[::-1][3:][::-1])
    assert v.byte_offset == 0 and v.data_ptr == src.ctypes.data


def test_index_writes_reach_the_source(base):
    d = DLPackArray(base)
    np.asarray(d[1, ::-1, 2])[0] = -7
    assert base[1, 2, 2] == -7
    torch.from_dlpack(d[0, 1:])[0, 0] = -9
    assert base[0, 1, 0] == -9


@pytest.mark.parametrize(
    "key, exc, text",
    [
        (2, IndexError, "out of bounds for axis 0 with size 2"),
        ((0, 3), IndexError, "out of bounds for axis 1"),
        ((0, 0, -5), IndexError, "out of bounds"),
        ((0, 0, 0, 0), IndexError, "too many indices"),
        ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
        (1.0, IndexError, "got float"),
        (True, IndexError, "got bool"),
        ([0, 1], IndexError, "advanced"),
        (np.array([0, 1]), IndexError, "advanced"),
        (slice(None, None, 0), ValueError, "zero"),
        (slice(0.5, None), TypeError, "slice indices"),
        (2**70, IndexError, "out of bounds"),
        ((None,) * 62, IndexError, "more than 64 dimensions"),
        ((0,) * 200, IndexError, "cannot be valid"),
    ],
)
def test_bad_indices_raise(base, key, exc, text):
    with pytest.raises(exc, match=text):
        DLPackArray(base)[key]


def test_view_keeps_source_alive():
    src = np.arange(100, dtype=np.float64)
    expected = src[::-3].copy()
    v = DLPackArray(src)[::-3].reshape(-1, 1)[:, 0]
    del src
    gc.collect()
    np.testing.assert_array_equal(np.asarray(v), expected)


def test_views_keep_readonly_and_owner():
    d = DLPackArray(b"abcdefgh")
    for v in (d[2:], d.reshape(2, 4), d.reshape(2, 4).T, d.view("uint16")):
        assert v.readonly
        assert not np.asarray(v).flags.writeable
        assert v.__array_interface__["data"][1] is True


# -- reshape ---------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [(24,), (4, 6), (2, 3, 4), (2, -1), (-1,), (1, 24, 1), (1, 1, 2, 1, 12), (3, 8), ()]
)
@pytest.mark.parametrize("order", ["C", "F"])
def test_reshape_contiguous_matches_numpy(base, shape, order):
    if shape == ():
        src = np.array(5.0)
        assert_same_view(DLPackArray(src).reshape(shape, order=order), src.reshape(shape))
        return
    # A C-ordered reshape of C-contiguous data, or an F-ordered one of
    # F-contiguous data, is always a view.
    src = base if order == "C" else np.asfortranarray(base)
    assert_same_view(
        DLPackArray(src).reshape(shape, order=order),
        np.reshape(src, shape, order=order, copy=False),
    )


def test_reshape_spellings(base):
    d = DLPackArray(base)
    assert d.reshape(4, 6).shape == d.reshape((4, 6)).shape == d.reshape([4, 6]).shape
    assert d.reshape(np.int64(24)).shape == (24,)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_reshape_of_strided_views_follows_numpy_copy_false(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    base = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    view = base[data.draw(hnp.basic_indices(shape, allow_newaxis=True))]
    assume(isinstance(view, np.ndarray))  # not a NumPy scalar (a copy)
    if data.draw(st.booleans()):
        view = view.T
    size = view.size
    factors = [f for f in range(1, size + 1) if size % f == 0] or [1]
    first = data.draw(st.sampled_from(factors))
    target = data.draw(
        st.sampled_from([(size,), (first, -1), (-1, first, 1), (1, first, size // first)])
    )
    order = data.draw(st.sampled_from("CF"))
    try:
        expected = np.reshape(view, target, order=order, copy=False)
    except ValueError:
        with pytest.raises(ValueError, match="without copying"):
            DLPackArray(view).reshape(target, order=order)
        return
    assert_same_view(DLPackArray(view).reshape(target, order=order), expected)


@pytest.mark.parametrize(
    "shape, text",
    [
        ((5, 5), "cannot reshape array of size 24"),
        ((-1, -1), "one unknown dimension"),
        ((7, -1), "cannot reshape array of size 24"),
        ((-2, 12), "negative dimension"),
        ((1,) * 65, "at most 64"),
        ((2.0, 12), "must be an integer"),
        ("24", "must be integers"),
    ],
)
def test_reshape_errors(base, shape, text):
    with pytest.raises((ValueError, TypeError), match=text):
        DLPackArray(base).reshape(shape)


def test_reshape_never_copies(base):
    with pytest.raises(ValueError, match="without copying"):
        DLPackArray(base).T.reshape(-1)
    with pytest.raises(ValueError, match="order must be"):
        DLPackArray(base).reshape(-1, order="A")


def test_reshape_zero_size():
    src = np.zeros((0, 4), dtype=np.float32)
    assert DLPackArray(src).reshape(2, 0, 3).shape == (2, 0, 3)
    assert DLPackArray(src).reshape(-1).shape == (0,)
    with pytest.raises(ValueError):
        DLPackArray(src).reshape(0, -1)


# -- transpose / permute / T ----------------------------------------------------


@pytest.mark.parametrize("axes", [(), (2, 0, 1), ((1, 0, 2),), (-1, -2, -3), ([0, 2, 1],)])
def test_transpose_matches_numpy(base, axes):
    flat = axes[0] if len(axes) == 1 else (axes or None)
    assert_same_view(DLPackArray(base).transpose(*axes), base.transpose(flat))


def test_permute_and_T(base):
    d = DLPackArray(base)
    assert_same_view(d.permute(2, 1, 0), base.transpose(2, 1, 0))
    assert_same_view(d.permute((1, 2, 0)), torch.from_numpy(base).permute(1, 2, 0).numpy())
    assert_same_view(d.T, base.T)
    assert DLPackArray(np.float32(3)).T.shape == ()
    with pytest.raises(ValueError, match="do not match"):
        d.permute()


@pytest.mark.parametrize(
    "axes, text",
    [
        ((0, 1), "do not match"),
        ((0, 0, 1), "repeated axis"),
        ((0, 1, 3), "out of bounds"),
        ((0, 1, -4), "out of bounds"),
        ((0, 1, "2"), "must be an integer"),
    ],
)
def test_transpose_errors(base, axes, text):
    with pytest.raises((ValueError, TypeError), match=text):
        DLPackArray(base).transpose(*axes)


# -- view(dtype) -------------------------------------------------------------


@pytest.mark.parametrize(
    "src_dtype, dtype",
    [
        ("float32", "uint8"),
        ("float32", "int32"),
        ("uint8", "float32"),
        ("int16", "float16"),
        ("float64", "complex64"),
        ("complex128", "float64"),
        ("uint8", "bool"),
        ("int64", "int16"),
    ],
)
def test_dtype_view_matches_numpy(src_dtype, dtype):
    src = np.arange(96, dtype=np.uint8).view(src_dtype).reshape(2, -1)
    assert_same_view(DLPackArray(src).view(dtype), src.view(dtype))
    # Strided outer dimension with whole items of the new type.
    assert_same_view(DLPackArray(src)[::-1].view(dtype), src[::-1].view(dtype))


def test_dtype_view_accepts_dtype_objects():
    src = np.arange(4, dtype=np.float32)
    d = DLPackArray(src)
    assert d.view(np.uint32).dtype == "uint32"
    assert d.view(d.dtype).dtype == d.dtype
    bf = d.view("bfloat16")
    assert bf.shape == (8,) and bf.dtype == "bfloat16"
    assert bf.view("float32").shape == (4,)


@pytest.mark.parametrize(
    "make, dtype, text",
    [
        (lambda a: a[:, ::2], "float64", "contiguous last dimension"),
        (lambda a: a[:, :3], "float64", "not a multiple of the new item size"),
        (lambda a: a[0, 0], "float64", "0-d"),
        (lambda a: a[:, 1:5:1][::1], "int64", None),  # 16 bytes per row: fine
        (lambda a: a, "not-a-type", "unknown dtype"),
        # A type DLPack knows but packs below a byte: refused for that reason.
        (lambda a: a, "float6_e2m3fn", "is a 6-bit type"),
    ],
)
def test_dtype_view_errors(make, dtype, text):
    src = np.zeros((3, 6), dtype=np.float32)
    v = DLPackArray(make(src)) if text is None else DLPackArray(src)
    if text is None:
        assert v.view(dtype).shape == (3, 2)
        return
    with pytest.raises((ValueError, TypeError, BufferError), match=text):
        make(DLPackArray(src)).view(dtype)


def test_dtype_view_rejects_misaligned_outer_stride():
    src = np.zeros((4, 3), dtype=np.uint8)[:, :2]  # row stride 3 bytes
    with pytest.raises(ValueError, match="stride of dimension 0"):
        DLPackArray(src).view("uint16")


# -- every view speaks every protocol ---------------------------------------------


class _Iface:
    def __init__(self, iface):
        self.__array_interface__ = iface


class _Struct:
    def __init__(self, capsule):
        self.__array_struct__ = capsule


@pytest.mark.parametrize(
    "make",
    [
        lambda d: d[1:, ::2],
        lambda d: d.reshape(6, 4)[::-1],
        lambda d: d.transpose(1, 2, 0),
        lambda d: d[..., None, 1],
        lambda d: d.view("uint8")[:, 1],
        lambda d: d[1, 2, 3],
    ],
    ids=["slice", "reshape-flip", "transpose", "newaxis", "dtype-view", "0-d"],
)
def test_views_export_through_every_protocol(base, make):
    v = make(DLPackArray(base))
    expected = np.asarray(v).copy()
    np.testing.assert_array_equal(np.asarray(memoryview(v)), expected)
    np.testing.assert_array_equal(np.asarray(_Iface(v.__array_interface__)), expected)
    np.testing.assert_array_equal(np.asarray(_Struct(v.__array_struct__)), expected)
    np.testing.assert_array_equal(v.__array__(), expected)
    np.testing.assert_array_equal(np.from_dlpack(v), expected)
    np.testing.assert_array_equal(np.asarray(DLPackArray(v)), expected)
    if all(s >= 0 for s in v.strides):
        # torch 2.13 aborts the process on negative DLPack strides; see docs.
        np.testing.assert_array_equal(torch.from_dlpack(v).numpy(), expected)
