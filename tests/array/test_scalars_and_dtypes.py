"""Interned immutable DType objects, and elements as Python scalars.

``DType(x)`` returns the one shared instance of its type, which nothing can change.
``item()``, ``tolist()`` and ``float()``/``int()``/``complex()``/``bool()``/``operator.index()``
read the elements straight from memory, for every dtype (bfloat16 and float8 decoded by the
C++ core, compared here with ml_dtypes), and follow NumPy 2's rules on which arrays convert.
"""

from __future__ import annotations

import copy
import math
import operator
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_clean_exit, require_ml_dtypes, run_python
from dtype_names import NUMPY_DTYPES
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import ML_DTYPES, strided_views, wrap

from dlpackarray import DLPackArray, DType

# -- DType: interned and immutable ---------------------------------------------------------


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_dtype_of_an_array_is_the_interned_instance(name):
    x = DLPackArray(np.zeros(3, name))
    assert DType(name) is x.dtype
    assert DType(np.dtype(name)) is x.dtype
    assert DType(np.dtype(name).type) is x.dtype
    assert DType(np.dtype(name).str) is x.dtype
    assert DType(x.dtype) is x.dtype
    assert DType(name=name) is x.dtype


@pytest.mark.parametrize(
    ("alias", "name"),
    [("f4", "float32"), ("<f4", "float32"), ("float", "float64"), ("double", "float64"),
     ("bool_", "bool"), ("int", "int64"), ("complex", "complex128"), ("half", "float16")],
)  # fmt: skip
def test_aliases_give_the_same_object(alias, name):
    assert DType(alias) is DType(name)


@pytest.mark.parametrize(("pytype", "name"), [(bool, "bool"), (int, "int64"), (float, "float64")])
def test_python_types_give_the_same_object(pytype, name):
    assert DType(pytype) is DType(name)


@pytest.mark.parametrize("name", ML_DTYPES)
def test_ml_dtypes_give_the_same_object(name):
    ml = require_ml_dtypes()
    assert DType(getattr(ml, name)) is DType(name) is DType(np.dtype(getattr(ml, name)))


def test_reinit_cannot_change_a_shared_dtype():
    x = DLPackArray(np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="immutable"):
        x.dtype.__init__("int8")
    # A dtype is shared (interned): re-initialising it would rewrite float32 for every array.
    assert x.dtype.name == "float32"
    assert (x.dtype.code, x.dtype.bits, x.dtype.lanes) == (2, 32, 1)
    assert DLPackArray(np.zeros(1, np.float32)).dtype.name == "float32"
    assert "float32" in repr(DLPackArray(np.zeros(1, np.float32)))
    x.dtype.__init__("f4")  # the same type: nothing to change, so allowed
    assert x.dtype is DType("float32")
    for attr in ("name", "code", "bits", "lanes", "itemsize", "other"):
        with pytest.raises(AttributeError):
            setattr(x.dtype, attr, 1)
        with pytest.raises(AttributeError):
            delattr(x.dtype, attr)
    assert (x.dtype.name, x.dtype.code, x.dtype.itemsize) == ("float32", 2, 4)


def test_dtype_cannot_be_subclassed():
    # A subclass could carry state of its own and break "same type, same object".
    with pytest.raises(TypeError):
        type("Sub", (DType,), {})


@pytest.mark.parametrize("name", NUMPY_DTYPES + ML_DTYPES)
def test_pickle_and_copy_return_the_same_object(name):
    d = DType(name)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(d, protocol)) is d
    assert copy.copy(d) is d
    assert copy.deepcopy(d) is d
    assert copy.deepcopy([d, d])[1] is d


@pytest.mark.parametrize(
    "args, kwargs",
    [((), {}), (("f4", "f8"), {}), (("f4",), {"name": "f4"}), ((), {"dtype": "f4"})],
)
def test_dtype_constructor_takes_exactly_one_type(args, kwargs):
    with pytest.raises(TypeError):
        DType(*args, **kwargs)
    with pytest.raises(TypeError):
        DType.__new__(DType, *args, **kwargs)


def test_no_blank_dtype_can_be_made():
    # A DType without a name and code is no dtype: DType.__new__ alone cannot make one.
    with pytest.raises(TypeError):
        DType.__new__(DType)
    assert DType.__new__(DType, "u2") is DType("uint16")
    with pytest.raises(TypeError):
        DType.__new__(DType, "no such type")
    with pytest.raises(TypeError):
        DType("no such type")


def test_dtype_equality_hash_and_repr():
    d = DType("complex64")
    assert DType("c8") is d
    assert d == DType("c8") and d == "complex64" and d == "c8"
    assert d != "complex128" and d != DType("float64") and d != "no such type"
    assert d.__eq__(3) is NotImplemented
    assert hash(d) == hash(DType("complex64"))
    assert repr(d) == "DType('complex64')" and str(d) == "complex64"
    assert isinstance(d, DType)
    assert {DType("f4"): 1}[DType("float32")] == 1


# -- elements as Python scalars ------------------------------------------------------------


def same(ours, theirs) -> bool:
    """Equal values of the same Python type; NaN equals NaN and the sign of zero counts."""
    if isinstance(theirs, list):
        return (
            isinstance(ours, list)
            and len(ours) == len(theirs)
            and all(same(a, b) for a, b in zip(ours, theirs, strict=True))
        )
    if type(ours) is not type(theirs):
        return False
    if isinstance(theirs, complex):
        return same(ours.real, theirs.real) and same(ours.imag, theirs.imag)
    if isinstance(theirs, float):
        if math.isnan(theirs):
            return math.isnan(ours)
        return ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs)
    return ours == theirs


def expected_list(name: str, view: np.ndarray):
    """What tolist() must give: NumPy's own, or ml_dtypes values widened to float."""
    if name in NUMPY_DTYPES:
        return view.tolist()
    ml_view = view.view(getattr(require_ml_dtypes(), name))
    return ml_view.astype(np.float64).tolist()


@given(strided_views())
def test_tolist_matches_numpy_for_every_dtype_and_layout(case):
    name, _, view = case
    x = wrap(name, view)
    assert same(x.tolist(), expected_list(name, view))


@given(strided_views(), st.data())
def test_item_matches_numpy(case, data):
    name, _, view = case
    x = wrap(name, view)
    expected = expected_list(name, view)
    flat = np.asarray(expected, dtype=object).reshape(-1) if view.ndim else [expected]
    if view.size == 0:
        with pytest.raises(IndexError):
            x.item(0)
        with pytest.raises(ValueError, match="size 1"):
            x.item()
        return
    i = data.draw(st.integers(-view.size, view.size - 1))
    assert same(x.item(i), flat[i])
    if name in NUMPY_DTYPES:
        assert same(x.item(i), view.item(i))
    index = tuple(data.draw(st.integers(-n, n - 1)) for n in view.shape)
    want = view[index] if view.ndim else view[()]
    want = want.item() if name in NUMPY_DTYPES else float(want.view(getattr(
        require_ml_dtypes(), name)).astype(np.float64))  # fmt: skip
    if view.ndim > 1:
        assert same(x.item(*index), want)
    assert same(x.item(index), want)
    if view.size == 1:
        assert same(x.item(), flat[0])
    else:
        with pytest.raises(ValueError, match="size 1"):
            x.item()
    with pytest.raises(IndexError):
        x.item(view.size)
    with pytest.raises(IndexError):
        x.item(-view.size - 1)
    if view.ndim > 1:  # (one int is a flat index)
        bad = list(index)
        bad[-1] = view.shape[-1]
        with pytest.raises(IndexError, match=f"axis {view.ndim - 1}"):
            x.item(tuple(bad))
    if view.ndim:
        with pytest.raises(ValueError, match="number of indices"):
            x.item((0,) * (view.ndim + 1))


@pytest.mark.parametrize("name", ML_DTYPES)
def test_every_bit_pattern_of_narrow_floats_decodes_like_ml_dtypes(name):
    ml_type = getattr(require_ml_dtypes(), name)
    width = np.dtype(ml_type).itemsize
    bits = np.arange(2 ** (8 * width), dtype=f"u{width}")
    x = DLPackArray(bits).view(name)
    with np.errstate(invalid="ignore"):  # NaN patterns
        want = bits.view(ml_type).astype(np.float64).tolist()
    got = x.tolist()
    bad = [hex(b) for b, g, w in zip(bits.tolist(), got, want, strict=True) if not same(g, w)]
    assert not bad, f"{name}: {len(bad)} patterns decode wrongly, e.g. {bad[:8]}"
    # The scalar conversions go through the same decoding.
    for b in (0, 1, 2 ** (8 * width) - 1, 0x7C if width == 1 else 0x7F80):
        assert same(float(x[b]), want[b]) and same(x.item(b), want[b])


def test_float16_every_bit_pattern():
    bits = np.arange(2**16, dtype=np.uint16)
    want = bits.view(np.float16).tolist()
    assert same(DLPackArray(bits).view("float16").tolist(), want)


@pytest.mark.parametrize(
    ("name", "values"),
    [("int64", [-(2**63), 2**63 - 1]), ("uint64", [2**64 - 1, 2**63]), ("int8", [-128, 127]),
     ("uint32", [2**32 - 1]), ("float64", [-0.0, math.inf, 5e-324]), ("bool", [True, False]),
     ("complex128", [complex(-0.0, math.nan)])],
)  # fmt: skip
def test_extreme_values(name, values):
    arr = np.array(values, dtype=name)
    assert same(DLPackArray(arr).tolist(), arr.tolist())


def test_tolist_of_empty_and_zero_d_shapes():
    for shape in [(0,), (2, 0), (0, 3), (2, 0, 3), (1, 1, 0)]:
        arr = np.zeros(shape, np.int32)
        assert DLPackArray(arr).tolist() == arr.tolist()
    assert same(DLPackArray(np.array(2.5)).tolist(), 2.5)
    assert same(DLPackArray(np.array(7, np.uint8)).tolist(), 7)


def test_unaligned_elements_are_read():
    raw = bytearray(np.arange(9, dtype=np.uint8).tobytes())
    x = DLPackArray.from_buffer(raw, "int64", shape=(1,), offset=1)
    assert x.tolist() == np.frombuffer(raw, np.int64, count=1, offset=1).tolist()


def test_huge_broadcast_tolist_refuses_instead_of_running_away():
    # 2**62 elements of stride 0: a list that large cannot exist.
    x = DLPackArray.from_buffer(bytes(8), "float64", shape=(2**31, 2**31), strides=(0, 0))
    with pytest.raises(MemoryError):
        x.tolist()
    assert x.item(2**62 - 1) == 0.0
    assert x.item(2**31 - 1, -1) == 0.0
    # Size 0, yet (2**62, 0) would need 2**62 empty lists.
    y = DLPackArray.from_buffer(bytes(8), "float64", shape=(2**62, 0), strides=(0, 0))
    with pytest.raises(MemoryError):
        y.tolist()


def test_item_arguments_follow_numpy():
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    x = DLPackArray(arr)
    assert x.item(np.int8(4)) == arr.item(np.int8(4))
    assert x.item(1, -1) == arr.item(1, -1) and x.item((1, -1)) == arr.item((1, -1))
    for bad in (1.0, True, [1, 2], "1"):
        with pytest.raises(TypeError):
            arr.item(bad)
        with pytest.raises(TypeError):
            x.item(bad)
    zero_d = DLPackArray(np.array(5))
    assert zero_d.item() == zero_d.item(()) == zero_d.item(0) == zero_d.item(-1) == 5
    with pytest.raises(IndexError):
        zero_d.item(1)


# -- float(), int(), complex(), bool(), operator.index() ------------------------------------

CONVERSIONS = [float, int, complex, bool, operator.index]


def outcome(func, value):
    """func(value)'s result, or the exception type it raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return func(value)
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return type(exc)


def assert_converts_like_numpy(arr: np.ndarray):
    x = DLPackArray(arr)
    for func in CONVERSIONS:
        want = outcome(func, arr)
        got = outcome(func, x)
        if want is DeprecationWarning and arr.ndim > 0:
            # What NumPy's deprecations ended in, which dlpackarray raises
            # whichever NumPy is installed: the truth value of an empty array
            # is a ValueError (NumPy 2.2), converting an array with ndim > 0 to
            # another Python scalar a TypeError (deprecated since NumPy 1.25).
            want = ValueError if func is bool else TypeError
        if isinstance(want, type):
            assert got is want, f"{func.__name__}({arr!r}): {got}, NumPy raises {want.__name__}"
        else:
            assert same(got, want), f"{func.__name__}({arr!r}): {got!r}, NumPy gives {want!r}"


@given(st.sampled_from(NUMPY_DTYPES).flatmap(lambda n: hnp.from_dtype(np.dtype(n))))
def test_zero_d_conversions_match_numpy(value):
    assert_converts_like_numpy(np.array(value))


@pytest.mark.parametrize("name", NUMPY_DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (2,), (0,), (3, 0)])
def test_conversions_by_shape_match_numpy(name, shape):
    arr = np.ones(shape, name)
    assert_converts_like_numpy(arr)
    assert_converts_like_numpy(np.zeros(shape, name))


def test_user_reported_float_of_zero_d():
    # Failed with "could not convert string to float" before.
    assert float(DLPackArray(np.array(2.5))) == 2.5
    d = DLPackArray(np.array(7, np.int32))
    assert (float(d), int(d), complex(d), bool(d), operator.index(d)) == (7.0, 7, 7 + 0j, True, 7)
    assert list(range(10))[d] == 7


def test_zero_d_of_a_view_reads_its_element():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, ::2]
    x = DLPackArray(arr)
    assert float(x[1, 1]) == float(arr[1, 1])
    assert int(x[0, -1]) == int(arr[0, -1])


@pytest.mark.parametrize("name", ML_DTYPES)
def test_narrow_float_zero_d_conversions(name):
    ml_type = getattr(require_ml_dtypes(), name)
    arr = np.array([0.5, 2.0], dtype=ml_type)
    x = DLPackArray.from_buffer(arr.tobytes(), name)
    assert same(float(x[1]), float(arr[1]))
    assert same(int(x[1]), int(float(arr[1])))
    assert same(complex(x[0]), complex(float(arr[0])))
    assert bool(x[0]) is True
    with pytest.raises(TypeError, match="integer"):
        operator.index(x[0])


def test_device_memory_raises_buffer_error():
    # A CUDA capsule with an address the host must never read: reading would crash, so
    # the checks run in a child process.
    code = f"""
import ctypes, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[1] / "helpers")!r})
import dlpack_ctypes as dc
from dlpackarray import DLPackArray
p = dc.Producer(None, shape=(1,), strides=(1,), dtype=(2, 32, 1), data=16,
                device=(dc.KDL_CUDA, 0))
x = DLPackArray(p.capsule())
for call in (x.item, x.tolist, lambda: float(x[0]), lambda: bool(x),
             lambda: x.item(0), lambda: float(x.reshape(()))):
    try:
        call()
    except BufferError as exc:
        assert "device" in str(exc), exc
    else:
        raise AssertionError("no BufferError")
print("ok")
"""
    proc = run_python(code)
    assert_clean_exit(proc)
    assert proc.stdout.strip() == "ok"
