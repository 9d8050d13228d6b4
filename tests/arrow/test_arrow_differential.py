"""Differential tests: every route into a DLPackArray gives the same array.

A producer that offers several protocols (pyarrow arrays, chunked arrays,
tensors and fixed-shape tensors, NumPy, torch, polars, nanoarrow, DLPackArray
itself) is imported through each of them: the default precedence, and every
protocol on its own through a wrapper that exposes only that protocol (or the
protocol's capsule itself).  Every route must give the same shape, dtype and
bits, and the same read-only flag within a group of routes that share the
producer's memory under the same rules.  The reference is computed here,
independently, with NumPy: for ``arrow.fixed_shape_tensor`` it is the
canonical extension definition (storage values reshaped to the physical cell
shape, then logical dimension i = physical dimension ``permutation[i]``).

pyarrow 26 reads permuted tensor cells the other way round in its own
``__dlpack__`` and ``to_numpy_ndarray`` (docs/limitations.md): those routes are
checked to differ from the reference only where that known bug predicts
(permutations that are not their own inverse), and dlpackarray's routes must
all match the reference.  Nulls: every route of every Arrow input with a null
in its window raises dlpackarray's ValueError naming the nulls.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import dlpack_ctypes as dc
import numpy as np
import pytest
from conftest import require
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray, from_dlpack

pa = require("pyarrow", "the reference Arrow implementation and a producer of every Arrow kind")

# Properties below import each example through ~10 routes: a twentieth of the
# profile's examples keeps the suite's time in line with the other files.
FEW = settings(max_examples=max(4, settings.default.max_examples // 20))

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
NUMERIC = INTS + FLOATS
DTYPES = [*NUMERIC, "bool"]
ALL_PERMUTATIONS = [
    list(p) for ndim in (2, 3, 4) for p in itertools.permutations(range(ndim))
]  # 2 + 6 + 24


# -- one-protocol wrappers -----------------------------------------------------


class OnlyDLPack:
    """Exposes ``__dlpack__`` only (no exchange table, no Arrow, no array
    interface): the producer's own DLPack reading."""

    def __init__(self, obj):
        self.obj = obj

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.obj.__dlpack__(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __dlpack_device__(self):
        return self.obj.__dlpack_device__()


class OnlyLegacyDLPack(OnlyDLPack):
    """``__dlpack__`` with the signature of a producer older than the
    2023.12 keywords (pyarrow before 26): the consumer's fallback decides
    from it to ask without ``max_version``."""

    def __dlpack__(self, stream=None):
        return self.obj.__dlpack__(stream=stream)


def refusal(call) -> str | None:
    """The producer's TypeError (pyarrow's ArrowTypeError is one) for ``call``,
    or None when it succeeds."""
    try:
        call()
    except TypeError as e:
        return f"{type(e).__name__}: {e}"
    return None


def keyword_refusal(obj) -> str | None:
    """Why ``obj.__dlpack__`` refuses ``max_version`` (DLPack 1.0, array API
    2023.12), or None where it takes it."""
    return refusal(lambda: obj.__dlpack__(max_version=(1, 3)))


class OnlyArrowArray:
    def __init__(self, obj):
        self.obj = obj

    def __arrow_c_array__(self, requested_schema=None):
        return self.obj.__arrow_c_array__(requested_schema)


class OnlyArrowDeviceArray:
    def __init__(self, obj):
        self.obj = obj

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return self.obj.__arrow_c_device_array__(requested_schema, **kwargs)


class OnlyArrowStream:
    def __init__(self, obj):
        self.obj = obj

    def __arrow_c_stream__(self, requested_schema=None):
        return self.obj.__arrow_c_stream__(requested_schema)


class OnlyArrowDeviceStream:
    def __init__(self, obj):
        self.obj = obj

    def __arrow_c_device_stream__(self, requested_schema=None, **kwargs):
        return self.obj.__arrow_c_device_stream__(requested_schema, **kwargs)


class OnlyArrayInterface:
    def __init__(self, obj):
        self.obj = obj
        self.__array_interface__ = obj.__array_interface__


class OnlyArrayStruct:
    def __init__(self, obj):
        self.obj = obj
        self.__array_struct__ = obj.__array_struct__


class OnlyArrayMethod:
    """Exposes ``__array__`` only: the producer converts itself."""

    def __init__(self, obj):
        self.obj = obj

    def __array__(self, dtype=None, copy=None):
        return self.obj.__array__()


# -- routes and their comparison -------------------------------------------------


@dataclass
class Route:
    name: str
    make: Callable[[], DLPackArray]
    # Routes in one group must agree on the read-only flag (and equal the
    # group's expectation where one is given); None: a conversion (__array__)
    # whose flag is the converter's business.
    flags: str | None = "native"
    # Arrow sees a 0-d tensor as a column of one row.
    arrow_shape: bool = False


def dlpack_routes(obj, flags="native"):
    routes = [Route("from_dlpack(obj)", lambda: from_dlpack(obj), flags)]
    if keyword_refusal(obj) is None:
        routes += [
            Route("__dlpack__ only", lambda: DLPackArray(OnlyDLPack(obj)), flags),
            Route(
                "__dlpack__ capsule",
                lambda: DLPackArray(obj.__dlpack__(max_version=(1, 3))),
                flags,
            ),
        ]
    else:
        # A producer that refuses max_version (pyarrow before 26; noted by
        # test_pyarrow_dlpack_takes_max_version): the versioned routes are
        # left out, its unversioned export is read instead.  An unversioned
        # capsule has no read-only flag, so its flag is not compared.
        routes += [
            Route("__dlpack__ (no keywords)", lambda: DLPackArray(OnlyLegacyDLPack(obj)), None),
            Route("__dlpack__() capsule", lambda: DLPackArray(obj.__dlpack__()), None),
        ]
    return routes


def arrow_routes(obj, flags="arrow", arrow_shape=False, label=""):
    kinds = [
        ("__arrow_c_array__", OnlyArrowArray),
        ("__arrow_c_device_array__", OnlyArrowDeviceArray),
        ("__arrow_c_stream__", OnlyArrowStream),
        ("__arrow_c_device_stream__", OnlyArrowDeviceStream),
    ]
    return [
        Route(f"{label}{name} only", lambda w=wrapper: DLPackArray(w(obj)), flags, arrow_shape)
        for name, wrapper in kinds
        if hasattr(type(obj), name)
    ]


def interface_routes(obj, flags="native"):
    routes = []
    if hasattr(obj, "__array_interface__"):
        routes.append(
            Route("__array_interface__ only", lambda: DLPackArray(OnlyArrayInterface(obj)), flags)
        )
    if hasattr(obj, "__array_struct__"):
        routes.append(
            Route("__array_struct__ only", lambda: DLPackArray(OnlyArrayStruct(obj)), flags)
        )
    try:
        memoryview(obj).release()
    except (TypeError, BufferError):
        pass
    else:
        routes.append(Route("buffer protocol", lambda: DLPackArray(memoryview(obj)), flags))
    return routes


def bits_of(d: DLPackArray) -> bytes:
    c = d.copy()
    return np.asarray(c.view(f"uint{8 * c.itemsize}")).tobytes()


def check_routes(routes, reference: np.ndarray, dtype: str | None = None, readonly=None):
    """Every route gives ``reference`` (shape, dtype, bits); read-only flags
    agree within each group and equal ``readonly[group]`` where given."""
    dtype = dtype or reference.dtype.name
    want_bits = np.ascontiguousarray(reference).tobytes()
    flags: dict[str, dict[str, bool]] = {}
    for route in routes:
        d = route.make()
        shape = reference.shape
        if route.arrow_shape and reference.ndim == 0:
            shape = (1,)
        got = (d.shape, d.dtype.name, bits_of(d))
        assert got == (shape, dtype, want_bits), f"route {route.name!r} differs from the reference"
        if route.flags is not None:
            flags.setdefault(route.flags, {})[route.name] = d.readonly
    for group, seen in flags.items():
        assert len(set(seen.values())) == 1, f"read-only flags differ in group {group!r}: {seen}"
        if readonly is not None and group in readonly:
            assert set(seen.values()) == {readonly[group]}, (group, seen)


# -- data --------------------------------------------------------------------------


def values_of(draw, dtype: str, n: int) -> np.ndarray:
    raw = np.frombuffer(draw(st.binary(min_size=8 * n, max_size=8 * n)), dtype=np.uint8)
    if dtype == "bool":
        return (raw[:n] & 1).astype(bool)
    return raw[: n * np.dtype(dtype).itemsize].view(dtype).copy()


@st.composite
def strided_numpy(draw, dtypes=DTYPES, negative=True, min_ndim=0):
    """Any dtype, 0-4 dimensions, transposed, sliced with steps (negative
    too), sometimes read-only."""
    dtype = draw(st.sampled_from(dtypes))
    ndim = draw(st.integers(min_ndim, 4))
    shape = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
    base = values_of(draw, dtype, int(np.prod(shape))).reshape(shape)
    if ndim:
        base = base.transpose(draw(st.permutations(range(ndim))))
        steps = [1, 1, 2] + ([-1] if negative else [])
        base = base[tuple(slice(None, None, draw(st.sampled_from(steps))) for _ in range(ndim))]
    if draw(st.booleans()):
        base.flags.writeable = False
    return base


def tensor_reference(arr) -> np.ndarray:
    """The canonical arrow.fixed_shape_tensor reading, computed with NumPy."""
    shape = list(arr.type.shape)
    perm = arr.type.permutation or list(range(len(shape)))
    values = arr.storage.flatten()  # the window's cells, offsets applied
    if isinstance(values.type, pa.ExtensionType):
        values = values.storage
    flat = np.asarray(values.to_numpy(zero_copy_only=False))
    return flat.reshape([len(arr), *shape]).transpose([0, *(p + 1 for p in perm)])


def is_involution(perm) -> bool:
    return all(perm[perm[i]] == i for i in range(len(perm)))


# -- NumPy and DLPackArray ---------------------------------------------------------


@FEW
@given(strided_numpy())
def test_numpy_every_route_agrees(x):
    routes = [
        Route("DLPackArray(obj)", lambda: DLPackArray(x)),
        *dlpack_routes(x),
        *interface_routes(x),
        Route("__array__ only", lambda: DLPackArray(OnlyArrayMethod(x)), None),
    ]
    check_routes(routes, x, readonly={"native": not x.flags.writeable})


@FEW
@given(strided_numpy())
def test_dlpackarray_every_route_agrees(x):
    d = DLPackArray(x)
    routes = [
        Route("DLPackArray(obj)", lambda: DLPackArray(d)),
        *dlpack_routes(d),
        *interface_routes(d),
        Route("__array__ only", lambda: DLPackArray(OnlyArrayMethod(d)), None),
        # Exported to Arrow (fixed_shape_tensor with a permutation for
        # permuted dense cells) and read back: immutable Arrow data.
        *arrow_routes(d, arrow_shape=True),
        Route("pa.array(obj)", lambda: DLPackArray(pa.array(d)), "arrow", True),
    ]
    check_routes(routes, x, readonly={"native": not x.flags.writeable, "arrow": True})


# -- torch ---------------------------------------------------------------------------

TORCH_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64",
                "bool", "bfloat16"]  # fmt: skip


@FEW
@given(st.data())
def test_torch_every_route_agrees(data):
    torch = require("torch", "a DLPack producer with a C exchange table")
    name = data.draw(st.sampled_from(TORCH_DTYPES))
    storage = "uint16" if name == "bfloat16" else name
    ndim = data.draw(st.integers(0, 4))
    shape = data.draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
    base = values_of(data.draw, storage, int(np.prod(shape))).reshape(shape)
    t = torch.from_numpy(base)
    if name == "bfloat16":
        t = t.view(torch.bfloat16)
    if ndim:
        perm = data.draw(st.permutations(range(ndim)))
        index = tuple(slice(None, None, data.draw(st.sampled_from([1, 2]))) for _ in range(ndim))
        t, base = t.permute(*perm)[index], base.transpose(perm)[index]
    routes = [Route("DLPackArray(obj)", lambda: DLPackArray(t)), *dlpack_routes(t)]
    if name != "bfloat16":
        routes.append(Route("__array__ only", lambda: DLPackArray(OnlyArrayMethod(t)), None))
    check_routes(routes, base, dtype=name, readonly={"native": False})


# -- pyarrow arrays, chunked arrays, nanoarrow and polars ------------------------------


@st.composite
def pyarrow_arrays(draw):
    """A primitive, bit-packed bool, arrow.bool8 or nested fixed-size-list
    array, with offsets at every level, and its NumPy reference."""
    kind = draw(st.sampled_from(["primitive", "bool", "bool8", "lists"]))
    dtype = {"bool": "bool", "bool8": "int8"}.get(kind) or draw(st.sampled_from(NUMERIC))
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)) if kind == "lists" else []
    rows = draw(st.integers(0, 6))
    cell = int(np.prod(sizes)) if sizes else 1
    values = values_of(draw, dtype, rows * cell + 2 * cell)
    if kind == "bool8":
        values = values % 3  # any byte is a valid bool8; 2 tests "non-zero is true"
    arr = pa.array(values)
    for size in reversed(sizes):
        arr = pa.FixedSizeListArray.from_arrays(arr, size)
    if kind == "bool8":
        arr = pa.ExtensionArray.from_storage(pa.bool8(), arr)
    start = draw(st.integers(0, 2))
    arr = arr.slice(start, rows)
    reference = values.reshape([-1, *sizes])[start : start + rows]
    if kind == "bool8":
        reference = reference.view(bool)
    return arr, reference


def arrow_producer_routes(arr, flags="arrow"):
    """The routes of a pyarrow Array: its own protocols, a chunked array of
    it, and nanoarrow's and polars' readings of its capsules."""
    chunked = pa.chunked_array([arr], type=arr.type)
    routes = [
        Route("DLPackArray(obj)", lambda: DLPackArray(arr), flags),
        Route("from_dlpack(obj)", lambda: from_dlpack(arr), flags),
        *arrow_routes(arr, flags),
        Route("DLPackArray(chunked)", lambda: DLPackArray(chunked), flags),
        *arrow_routes(chunked, flags, label="chunked "),
    ]
    na = _optional("nanoarrow")
    if na is not None:
        routes += [
            Route("DLPackArray(nanoarrow)", lambda: DLPackArray(na.Array(arr)), flags),
            *arrow_routes(na.Array(arr), flags, label="nanoarrow "),
        ]
    return routes


def _optional(module):
    try:
        return __import__(module)
    except ImportError:
        return None


@FEW
@given(pyarrow_arrays())
def test_pyarrow_array_every_route_agrees(case):
    arr, reference = case
    # Bit-packed booleans are unpacked into a fresh (writable) copy; no row,
    # nothing to unpack.
    unpacked = pa.types.is_boolean(arr.type) and len(arr) > 0
    routes = arrow_producer_routes(arr)
    if isinstance(arr, (pa.IntegerArray, pa.FloatingPointArray)):
        # The DLPack route dlpackarray keeps for plain numeric arrays must
        # agree with the Arrow definition exactly, flags included.
        routes += dlpack_routes(arr, "arrow")
    pl = _optional("polars")
    # polars knows neither float16 nor arrow.bool8 (it reads the storage).
    polars_types = [*INTS, "float32", "float64", "bool"]
    if (
        pl is not None
        and reference.ndim == 1
        and reference.dtype.name in polars_types
        and not isinstance(arr, pa.ExtensionArray)
    ):
        series = pl.from_arrow(arr)
        routes += [
            Route("DLPackArray(polars)", lambda: DLPackArray(series), "arrow"),
            Route("polars __array__", lambda: DLPackArray(OnlyArrayMethod(series)), None),
        ]
    check_routes(routes, reference, readonly={"arrow": not unpacked})


@FEW
@given(st.sampled_from(NUMERIC), st.lists(st.integers(0, 4), min_size=1, max_size=4), st.data())
def test_chunked_arrays_every_route_agrees(dtype, lengths, data):
    chunks = [values_of(data.draw, dtype, n) for n in lengths]
    chunked = pa.chunked_array([pa.array(c) for c in chunks], type=pa.from_numpy_dtype(dtype))
    reference = np.concatenate(chunks)
    routes = [
        Route("DLPackArray(obj)", lambda: DLPackArray(chunked), "arrow"),
        *arrow_routes(chunked),
    ]
    na = _optional("nanoarrow")
    if na is not None:
        routes.append(
            Route("DLPackArray(nanoarrow)", lambda: DLPackArray(na.Array(chunked)), "arrow")
        )
    # Several non-empty chunks are concatenated into one writable copy.
    copied = sum(1 for c in chunks if len(c)) > 1
    check_routes(routes, reference, readonly={"arrow": not copied})


@FEW
@given(strided_numpy(dtypes=NUMERIC, negative=False, min_ndim=1))
def test_pyarrow_tensor_every_route_agrees(x):
    t = pa.Tensor.from_numpy(x)
    routes = [Route("DLPackArray(obj)", lambda: DLPackArray(t)), *dlpack_routes(t)]
    if x.size and exports_null_data(t):
        # pyarrow before 26 exports a tensor over read-only memory with a
        # NULL data pointer (docs/limitations.md): every route refuses it.
        for route in routes:
            with pytest.raises(ValueError, match="data pointer is NULL"):
                route.make()
        return
    check_routes(routes, x)


def _pyarrow_before_26(arr):
    """``arr`` as a pyarrow 25 integer array shows itself to a consumer:
    pyarrow's module and class names, its Arrow capsules, and its DLPack
    export of that era (``__dlpack__(self, stream=None)``, an unversioned
    capsule, which cannot say that the data is read-only)."""
    source = np.asarray(arr)

    class Array:
        __module__ = "pyarrow.lib"

        def __arrow_c_schema__(self):
            return arr.type.__arrow_c_schema__()

        def __arrow_c_array__(self, requested_schema=None):
            return arr.__arrow_c_array__(requested_schema)

        def __dlpack__(self, stream=None):
            return dc.Producer(source, versioned=False).capsule()

        def __dlpack_device__(self):
            return (1, 0)

    class IntegerArray(Array):
        __module__ = "pyarrow.lib"

    class Int64Array(IntegerArray):
        __module__ = "pyarrow.lib"

    return Int64Array()


@pytest.mark.parametrize("consumer", [DLPackArray, from_dlpack])
def test_pyarrow_array_without_versioned_dlpack_is_read_as_arrow(consumer):
    # Arrow data is immutable: read through an unversioned capsule it would
    # come back writable, so the Arrow capsules are read instead.
    d = consumer(_pyarrow_before_26(pa.array(np.arange(5, dtype=np.int64))))
    assert d.readonly
    np.testing.assert_array_equal(np.asarray(d), np.arange(5))


def exports_null_data(t) -> bool:
    """Whether pyarrow's unversioned export of ``t`` has a NULL data pointer."""
    return keyword_refusal(t) is not None and dc.tensor_fields(t.__dlpack__())["data"] == 0


def _small_fixed_shape_tensor():
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(4, dtype=np.int32)), 4)
    return pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.int32(), [2, 2]), storage)


def _read_only_tensor():
    x = np.arange(4, dtype=np.int32)
    x.flags.writeable = False
    return pa.Tensor.from_numpy(x)


@pytest.mark.parametrize(
    "make",
    [
        lambda: pa.array(np.arange(4, dtype=np.int32)),
        _read_only_tensor,
        _small_fixed_shape_tensor,
    ],
    ids=["Array", "Tensor", "FixedShapeTensorArray"],
)
def test_pyarrow_dlpack_takes_max_version(make):
    """pyarrow's DLPack export of immutable data is a versioned, read-only
    capsule over the data.  An older pyarrow's refusal of ``max_version`` is
    noted here (a skip naming it): the differential tests above then read its
    unversioned export (flags not compared) or leave its reading out."""
    obj = make()
    why = keyword_refusal(obj)
    if why is not None:
        pytest.skip(
            f"pyarrow {pa.__version__}: {type(obj).__name__}.__dlpack__ refuses max_version "
            f"({why}); the differential tests read its unversioned export instead"
        )
    fields = dc.tensor_fields(obj.__dlpack__(max_version=(1, 3)))
    assert fields["version"][0] == 1
    assert fields["flags"] & dc.FLAG_READ_ONLY
    assert fields["data"] != 0


# -- arrow.fixed_shape_tensor: every permutation of 2-D to 4-D cells -----------------


@st.composite
def fixed_shape_tensors(draw, perm):
    dtype = draw(st.sampled_from(DTYPES))
    physical = draw(st.lists(st.integers(1, 3), min_size=len(perm), max_size=len(perm)))
    cell = int(np.prod(physical))
    rows = draw(st.integers(0, 4))
    start = draw(st.integers(0, 2))
    values = values_of(draw, dtype, (rows + 2) * cell)
    leaf = pa.array(values.view(np.int8) if dtype == "bool" else values)
    if dtype == "bool":
        leaf = pa.ExtensionArray.from_storage(pa.bool8(), leaf)
    storage = pa.FixedSizeListArray.from_arrays(leaf, cell)
    ttype = pa.fixed_shape_tensor(leaf.type, physical, permutation=perm)
    return pa.ExtensionArray.from_storage(ttype, storage).slice(start, rows)


@pytest.mark.parametrize("perm", ALL_PERMUTATIONS, ids=lambda p: "".join(map(str, p)))
@settings(max_examples=max(3, settings.default.max_examples // 25))
@given(data=st.data())
def test_fixed_shape_tensor_every_route_follows_the_arrow_definition(perm, data):
    fst = data.draw(fixed_shape_tensors(perm))
    reference = tensor_reference(fst)
    if fst.type.value_type == pa.bool8():
        reference = reference.view(bool)
    # Ours all follow the definition: pyarrow's object, its chunked array,
    # each capsule, nanoarrow's reading, and the round trip through our own
    # export (the permutation written back) and pyarrow.
    routes = arrow_producer_routes(fst)
    routes += [
        Route(
            "pa.array(DLPackArray(obj))", lambda: DLPackArray(pa.array(DLPackArray(fst))), "arrow"
        ),
        Route(
            "export of the reference",
            lambda: DLPackArray(OnlyArrowArray(DLPackArray(reference))),
            "arrow",
        ),
    ]
    check_routes(routes, reference, readonly={"arrow": True})

    # pyarrow's own readings may differ only where its known bug says
    # (docs/limitations.md): never for a permutation that is its own inverse.
    if fst.type.value_type != pa.bool8() and is_involution(perm):
        readings = {"fst.to_numpy_ndarray()": fst.to_numpy_ndarray}
        # pyarrow before 26 exports no tensor extension through DLPack
        # (ArrowTypeError, noted by test_pyarrow_dlpack_takes_max_version).
        if refusal(lambda: np.from_dlpack(fst)) is None:
            readings["fst.__dlpack__"] = lambda: np.from_dlpack(fst)
        for name, read in readings.items():
            got = read()
            assert got.shape == reference.shape, name
            assert got.tobytes() == np.ascontiguousarray(reference).tobytes(), name


def test_pyarrow_permuted_tensor_reproducer_from_limitations():
    """The reproducer in docs/limitations.md: pyarrow's own DLPack and NumPy
    readings of a permuted 3-D cell, against the Arrow definition."""
    shape, perm = (3, 4, 5), [2, 0, 1]
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(120, dtype=np.int32)), 60)
    fst = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.int32(), shape, permutation=perm), storage
    )
    expected = np.arange(120, dtype=np.int32).reshape(2, *shape).transpose(0, 3, 1, 2)
    for route in (fst, pa.chunked_array([fst]), OnlyArrowArray(fst)):
        d = DLPackArray(route)
        assert d.shape == (2, 5, 3, 4)
        np.testing.assert_array_equal(np.asarray(d), expected)
    np.testing.assert_array_equal(np.asarray(from_dlpack(fst)), expected)
    # pyarrow 26 gets the shape right and the values wrong; a later pyarrow
    # that fixes it agrees with everyone.
    theirs = fst.to_numpy_ndarray()
    assert theirs.shape == expected.shape
    if not np.array_equal(theirs, expected):
        # One reading of pyarrow's, wherever it is read.
        assert np.array_equal(theirs, fst.to_tensor().to_numpy())
        if refusal(lambda: np.from_dlpack(fst)) is None:  # pyarrow < 26 has no such export
            assert np.array_equal(theirs, np.from_dlpack(fst))


# -- nulls: one error, naming them, on every route --------------------------------


def _null_cases():
    i32 = pa.int32()
    fsl_values = pa.FixedSizeListArray.from_arrays(pa.array([1, None, 3, 4], i32), 2)
    fsl_rows = pa.array([[1, 2], None], pa.list_(i32, 2))
    tensor = pa.fixed_shape_tensor(i32, [2])
    tensor3d = pa.fixed_shape_tensor(i32, [1, 2, 1], permutation=[2, 0, 1])
    return {
        "primitive": pa.array([1, None, 3], i32),
        "float": pa.array([1.5, None], pa.float64()),
        "bool": pa.array([True, None]),
        "bool8": pa.ExtensionArray.from_storage(pa.bool8(), pa.array([1, None], pa.int8())),
        "list values": fsl_values,
        "list rows": fsl_rows,
        "tensor cell values": pa.ExtensionArray.from_storage(tensor, fsl_values),
        "tensor null cell": pa.ExtensionArray.from_storage(tensor, fsl_rows),
        "3-D tensor cell values": pa.ExtensionArray.from_storage(tensor3d, fsl_values),
        "sliced, null inside": pa.array([None, 1, None, 2], i32).slice(1, 2),
    }


def null_routes(obj):
    chunked = pa.chunked_array([obj], type=obj.type)
    routes = {
        "DLPackArray(obj)": lambda: DLPackArray(obj),
        "from_dlpack(obj)": lambda: from_dlpack(obj),
        "DLPackArray(chunked)": lambda: DLPackArray(chunked),
        "chunked, second chunk": lambda: DLPackArray(
            pa.chunked_array([obj.slice(0, 0), obj], type=obj.type)
        ),
    }
    routes.update({r.name: r.make for r in arrow_routes(obj)})
    routes.update({r.name: r.make for r in arrow_routes(chunked, label="chunked ")})
    na = _optional("nanoarrow")
    if na is not None:
        routes["DLPackArray(nanoarrow)"] = lambda: DLPackArray(na.Array(obj))
    return routes


@pytest.mark.parametrize("case", list(_null_cases()))
def test_arrow_nulls_raise_our_value_error_on_every_route(case):
    obj = _null_cases()[case]
    for name, make in null_routes(obj).items():
        with pytest.raises(
            ValueError, match=r"cannot import an Arrow array with nulls: .* null"
        ) as info:
            make()
        # Ours, not the producer's (pyarrow's ArrowInvalid is a ValueError too).
        assert type(info.value) is ValueError, (name, type(info.value))


def test_polars_nulls_raise_our_value_error():
    pl = require("polars", "an Arrow stream producer")
    s = pl.Series([1, None, 3], dtype=pl.Int32)
    for make in (lambda: DLPackArray(s), lambda: DLPackArray(OnlyArrowStream(s))):
        with pytest.raises(ValueError, match="with nulls") as info:
            make()
        assert type(info.value) is ValueError


def test_nulls_outside_the_window_do_not_count_on_any_route():
    arr = pa.array([None, 1, 2, None], pa.int32()).slice(1, 2)
    for name, make in null_routes(arr).items():
        assert np.asarray(make()).tolist() == [1, 2], name


# -- precedence ---------------------------------------------------------------------


class DLPackAndArrow(OnlyDLPack):
    """Another library's object speaking both DLPack and Arrow."""

    def __arrow_c_array__(self, requested_schema=None):
        return DLPackArray(self.obj).__arrow_c_array__(requested_schema)


def test_other_objects_keep_dlpack_before_arrow():
    # Only pyarrow's arrays are Arrow data by definition; for anything else
    # DLPack describes the object itself (Arrow would see a 0-d value as a
    # column of one row).
    d = DLPackArray(DLPackAndArrow(np.array(2.5)))
    assert d.shape == () and float(np.asarray(d)) == 2.5
