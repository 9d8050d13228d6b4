"""DLPackArray -> Arrow through the PyCapsule interface, checked against pyarrow,
polars, duckdb and nanoarrow: values bit-exact, pointers equal wherever the
export is zero-copy, capsule names, device fields, requested schemas, copies
and lifetimes (release callbacks exactly once, from any thread)."""

from __future__ import annotations

import ctypes
import gc
import threading
import weakref

import numpy as np
import pytest
from arrow_ctypes import (
    DEVICE_STREAM_GET_NEXT,
    DEVICE_STREAM_GET_SCHEMA,
    RELEASE_ARRAY,
    RELEASE_SCHEMA,
    ArrowArray,
    ArrowDeviceArray,
    ArrowDeviceArrayStream,
    ArrowSchema,
    capsule_name,
    metadata_dict,
    move_array,
    struct_of,
)
from conftest import assert_clean_exit, require, run_python
from hypothesis import given
from hypothesis import strategies as st

from dlpackarray import DLPackArray

pa = require("pyarrow", "the reference Arrow consumer")

ARROW_DTYPES = [
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
]  # fmt: skip


def values_address(arr) -> int:
    """Address of the first value of a pyarrow primitive array (offset applied)."""
    buf = arr.buffers()[1]
    return buf.address + arr.offset * arr.type.bit_width // 8


def tensor_values(arr):
    """The primitive values array under a FixedShapeTensorArray."""
    return arr.storage.values if hasattr(arr, "storage") else arr.values


def spec_tensor(arr) -> np.ndarray:
    """A FixedShapeTensorArray as NumPy, read the way the canonical extension
    defines it: cells stored C-ordered in the physical ``shape``, logical
    dimension i = physical dimension ``permutation[i]``.  (pyarrow 26's
    ``to_numpy_ndarray`` agrees for permutations that are their own inverse
    only.)"""
    shape = list(arr.type.shape)
    perm = arr.type.permutation or list(range(len(shape)))
    values = arr.storage.flatten().to_numpy(zero_copy_only=False)
    phys = values.reshape([len(arr), *shape])
    return phys.transpose([0, *(p + 1 for p in perm)])


def sample(dtype: str, shape) -> np.ndarray:
    n = int(np.prod(shape))
    raw = np.random.default_rng(7).integers(
        0, 255, size=n * np.dtype(dtype).itemsize, dtype=np.uint8
    )
    return raw.view(dtype).reshape(shape)


# -- mapping and zero-copy ---------------------------------------------------------


@pytest.mark.parametrize("dtype", ARROW_DTYPES)
def test_1d_primitive_is_zero_copy_and_bit_exact(dtype):
    a = sample(dtype, (37,))
    out = pa.array(DLPackArray(a))
    assert out.type == pa.from_numpy_dtype(a.dtype)
    assert values_address(out) == a.ctypes.data
    assert out.to_numpy(zero_copy_only=True).tobytes() == a.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint64"])
def test_nd_c_contiguous_becomes_fixed_shape_tensor_zero_copy(dtype):
    a = sample(dtype, (4, 3, 5))
    out = pa.array(DLPackArray(a))
    assert isinstance(out.type, pa.FixedShapeTensorType)
    assert out.type.shape == [3, 5] and out.type.permutation in (None, [0, 1])
    assert len(out) == 4
    assert values_address(tensor_values(out)) == a.ctypes.data
    np.testing.assert_array_equal(out.to_numpy_ndarray(), a)


def test_dense_permuted_tensor_is_zero_copy_through_permutation_when_asked():
    """copy=False, or a request for arrow.fixed_shape_tensor, exports permuted
    cells as they are, with the permutation; the default is a logical-order
    copy (tests/arrow/test_arrow_tensor_order.py)."""
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    a = base.transpose(0, 3, 1, 2)  # cells permuted, rows still outermost
    d = DLPackArray(a)
    tensor = pa.fixed_shape_tensor(pa.float64(), [5, 3, 4]).__arrow_c_schema__()
    for kwargs in ({"copy": False}, {"requested_schema": tensor}):
        out = pa.Array._import_from_c_capsule(*d.__arrow_c_array__(**kwargs))
        assert out.type.shape == [3, 4, 5]
        assert out.type.permutation == [2, 0, 1]
        assert values_address(tensor_values(out)) == base.ctypes.data
        np.testing.assert_array_equal(spec_tensor(out), a)
    out = pa.array(d)
    assert out.type.shape == [5, 3, 4] and out.type.permutation is None
    assert values_address(tensor_values(out)) != base.ctypes.data
    np.testing.assert_array_equal(spec_tensor(out), a)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(20.0)[::2],  # gaps
        lambda: np.arange(10.0)[::-1],  # negative stride
        lambda: np.broadcast_to(np.arange(3.0), (4, 3)),  # zero stride
        lambda: np.arange(24.0).reshape(4, 6)[:, 1:5],  # rows with gaps
        lambda: np.asfortranarray(np.arange(12.0).reshape(3, 4)),  # rows not outermost
    ],
    ids=["gaps", "negative", "broadcast", "row-gaps", "fortran"],
)
def test_layouts_arrow_cannot_describe_are_copied_or_refused(make):
    a = make()
    d = DLPackArray(a)
    out = pa.array(d)
    got = out.to_numpy_ndarray() if a.ndim > 1 else out.to_numpy()
    np.testing.assert_array_equal(got, a)
    with pytest.raises(BufferError, match="needs a copy.*copy=False"):
        d.__arrow_c_array__(copy=False)


def test_copy_true_always_copies():
    a = np.arange(8.0)
    schema, array = DLPackArray(a).__arrow_c_array__(copy=True)
    out = pa.Array._import_from_c_capsule(schema, array)
    assert values_address(out) != a.ctypes.data
    np.testing.assert_array_equal(out.to_numpy(), a)


def test_zero_d_is_a_length_one_array():
    out = pa.array(DLPackArray(np.float32(2.5)))
    assert out.type == pa.float32() and out.to_pylist() == [2.5]


def test_bool_is_bool8_zero_copy_or_bit_packed_on_request():
    a = np.array([True, False, True, True, False, False, True, False, True])
    out = pa.array(DLPackArray(a))
    assert out.type == pa.bool8()
    assert values_address(out.storage) == a.ctypes.data
    assert out.to_pylist() == a.tolist()
    packed = pa.array(DLPackArray(a), type=pa.bool_())  # a requested schema of "b"
    assert packed.type == pa.bool_() and packed.to_pylist() == a.tolist()
    with pytest.raises(BufferError, match="packing copy"):
        DLPackArray(a).__arrow_c_array__(pa.bool_().__arrow_c_schema__(), copy=False)


def test_nd_bool_is_a_tensor_of_bool8():
    a = np.array([[True, False], [False, True], [True, True]])
    out = pa.array(DLPackArray(a))
    assert out.type.value_type == pa.bool8()
    assert out.storage.flatten().storage.to_numpy().tolist() == a.astype(np.int8).ravel().tolist()


def test_nested_fixed_size_lists_on_request():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    want = pa.list_(pa.list_(pa.int32(), 4), 3)
    out = pa.array(DLPackArray(a), type=want)
    assert out.type == want
    assert out.to_pylist() == a.tolist()
    assert values_address(out.flatten().flatten()) == a.ctypes.data


def test_requested_schema_of_wrong_depth_or_kind_raises():
    d = DLPackArray(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="nests 1 fixed-size list level"):
        d.__arrow_c_array__(pa.list_(pa.float64(), 12).__arrow_c_schema__())
    with pytest.raises(ValueError, match="struct"):
        d.__arrow_c_array__(pa.struct([("a", pa.float64())]).__arrow_c_schema__())
    with pytest.raises(TypeError, match="arrow_schema"):
        d.__arrow_c_array__(b"not a capsule")


def test_requested_other_primitive_is_best_effort():
    # Conversions are not a transform facility: the producer answers with its
    # own type, which the consumer may then cast.
    a = np.arange(4, dtype=np.int64)
    schema, array = DLPackArray(a).__arrow_c_array__(pa.int32().__arrow_c_schema__())
    assert struct_of(schema, ArrowSchema).format == b"l"


@pytest.mark.parametrize("dtype", ["bfloat16", "complex64", "complex128", "float8_e4m3fn"])
def test_types_arrow_cannot_carry_raise_naming_the_dtype(dtype):
    if dtype.startswith(("bfloat", "float8")):
        ml_dtypes = require("ml_dtypes", "bfloat16/float8 sources")
        a = np.zeros(3, dtype=getattr(ml_dtypes, dtype))
    else:
        a = np.zeros(3, dtype=dtype)
    d = DLPackArray(a)
    for call in (d.__arrow_c_schema__, d.__arrow_c_array__, d.__arrow_c_device_stream__):
        with pytest.raises(TypeError, match=f"dtype {dtype} has no Arrow equivalent"):
            call()


# -- capsules, device fields, keywords ---------------------------------------------


def test_capsule_names_and_fields():
    d = DLPackArray(np.arange(6.0).reshape(2, 3))
    assert capsule_name(d.__arrow_c_schema__()) == "arrow_schema"
    schema, array = d.__arrow_c_array__()
    assert (capsule_name(schema), capsule_name(array)) == ("arrow_schema", "arrow_array")
    s = struct_of(schema, ArrowSchema)
    assert s.format == b"+w:3" and s.n_children == 1
    meta = metadata_dict(s)
    assert meta[b"ARROW:extension:name"] == b"arrow.fixed_shape_tensor"
    assert meta[b"ARROW:extension:metadata"] == b'{"shape":[3]}'
    assert s.children[0].contents.format == b"g"
    arr = struct_of(array, ArrowArray)
    assert (arr.length, arr.null_count, arr.offset, arr.n_buffers) == (2, 0, 0, 1)
    assert arr.children[0].contents.length == 6
    assert capsule_name(d.__arrow_c_stream__()) == "arrow_array_stream"
    assert capsule_name(d.__arrow_c_device_stream__()) == "arrow_device_array_stream"


def test_device_array_of_host_data_is_cpu_minus_one_without_event():
    a = np.arange(5, dtype=np.uint16)
    schema, darray = DLPackArray(a).__arrow_c_device_array__()
    assert capsule_name(darray) == "arrow_device_array"
    dev = struct_of(darray, ArrowDeviceArray)
    assert (dev.device_type, dev.device_id, dev.sync_event) == (1, -1, None)
    assert list(dev.reserved) == [0, 0, 0]
    assert dev.array.buffers[1] == a.ctypes.data
    out = pa.Array._import_from_c_device_capsule(schema, darray)
    assert out.to_pylist() == a.tolist()


def test_device_methods_refuse_unknown_keywords_unless_none():
    d = DLPackArray(np.arange(3.0))
    d.__arrow_c_device_array__(future_keyword=None)
    d.__arrow_c_device_stream__(future_keyword=None)
    for method in (d.__arrow_c_device_array__, d.__arrow_c_device_stream__):
        with pytest.raises(NotImplementedError, match="future_keyword"):
            method(future_keyword=1)


def test_device_stream_yields_one_chunk_then_ends():
    a = np.arange(10, dtype=np.int32)
    capsule = DLPackArray(a).__arrow_c_device_stream__()
    stream = struct_of(capsule, ArrowDeviceArrayStream)
    assert stream.device_type == 1
    schema = ArrowSchema()
    assert DEVICE_STREAM_GET_SCHEMA(stream.get_schema)(ctypes.byref(stream), schema) == 0
    assert schema.format == b"i"
    RELEASE_SCHEMA(schema.release)(schema)
    first, second = ArrowDeviceArray(), ArrowDeviceArray()
    get_next = DEVICE_STREAM_GET_NEXT(stream.get_next)
    assert get_next(ctypes.byref(stream), first) == 0
    assert (first.array.length, first.device_type, first.device_id) == (10, 1, -1)
    assert first.array.buffers[1] == a.ctypes.data
    assert get_next(ctypes.byref(stream), second) == 0
    assert not second.array.release  # end of stream
    RELEASE_ARRAY(first.array.release)(ctypes.byref(first.array))


def test_non_host_data_offers_only_device_methods():
    # What the device methods make of CUDA data (device, sync events, copies)
    # is tested against the fake driver in test_arrow_cuda_export.py.
    import dlpack_ctypes as dc

    p = dc.Producer(
        None, shape=(4,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 1), data=0x10000,
        device=(dc.KDL_CUDA, 0),
    )  # fmt: skip
    d = DLPackArray(p.capsule())
    for method in (d.__arrow_c_array__, d.__arrow_c_stream__):
        with pytest.raises(BufferError, match="__arrow_c_device_array__"):
            method()


def test_devices_without_sync_event_support_are_refused_by_the_device_methods():
    import dlpack_ctypes as dc

    p = dc.Producer(
        None, shape=(4,), strides=(1,), dtype=(dc.KDL_FLOAT, 32, 1), data=0x10000,
        device=(10, 0),  # ROCm: HIP events are not supported
    )  # fmt: skip
    d = DLPackArray(p.capsule())
    for method in (d.__arrow_c_device_array__, d.__arrow_c_device_stream__):
        with pytest.raises(BufferError, match=r"device \(10, 0\).*events are not supported"):
            method()


# -- real consumers ----------------------------------------------------------------


def test_pyarrow_table_record_batch_and_chunked_array():
    a = np.arange(12.0).reshape(4, 3)
    v = np.arange(4, dtype=np.int64)
    table = pa.table({"t": DLPackArray(a), "v": DLPackArray(v)})
    np.testing.assert_array_equal(table.column("t").chunk(0).to_numpy_ndarray(), a)
    batch = pa.record_batch({"v": DLPackArray(v)})
    assert values_address(batch.column(0)) == v.ctypes.data
    chunked = pa.chunked_array(DLPackArray(v))
    assert chunked.num_chunks == 1 and values_address(chunked.chunk(0)) == v.ctypes.data


def test_polars_series_and_dataframe():
    pl = require("polars", "an Arrow stream consumer")
    a = np.arange(1000, dtype=np.float32)
    s = pl.Series(DLPackArray(a))
    assert s.dtype == pl.Float32 and s.to_numpy().tobytes() == a.tobytes()
    # polars keeps the Arrow buffer: its NumPy view is our memory.
    assert s.to_numpy().ctypes.data == a.ctypes.data
    df = pl.DataFrame({"x": DLPackArray(a), "y": DLPackArray(a[::-1])})
    assert df["y"].to_list() == a[::-1].tolist()
    t = pl.Series(DLPackArray(np.arange(6.0).reshape(2, 3)))
    assert len(t) == 2


def test_duckdb_sums_through_the_arrow_stream():
    duckdb = require("duckdb", "an Arrow stream consumer running SQL")
    d = DLPackArray(np.arange(1, 101, dtype=np.int64))  # noqa: F841 -- found by name
    assert duckdb.sql("SELECT sum(x) FROM d AS t(x)").fetchall() == [(5050,)]
    f = DLPackArray(np.linspace(0, 1, 11))  # noqa: F841
    assert duckdb.sql("SELECT count(*), max(x) FROM f AS t(x)").fetchall() == [(11, 1.0)]


def test_nanoarrow_reads_array_and_stream():
    na = require("nanoarrow", "a minimal Arrow consumer")
    a = np.arange(7, dtype=np.uint32)
    arr = na.Array(DLPackArray(a))
    assert arr.to_pylist() == a.tolist()
    assert na.c_array(DLPackArray(a)).buffers[1] == a.ctypes.data  # zero-copy
    stream = na.ArrayStream(DLPackArray(a))
    assert stream.read_all().to_pylist() == a.tolist()


# -- lifetimes -------------------------------------------------------------------------


class Source:
    """A weak-referenceable buffer exporter: its death shows the release ran."""

    def __init__(self, arr):
        self.arr = arr
        self.__array_interface__ = arr.__array_interface__


def test_consumer_outlives_wrapper_and_source():
    src = Source(np.arange(100, dtype=np.float64))
    ref = weakref.ref(src)
    out = pa.array(DLPackArray(src))
    del src
    gc.collect()
    assert ref() is not None  # the Arrow array keeps it alive
    assert out.to_pylist() == list(map(float, range(100)))
    del out
    gc.collect()
    assert ref() is None


def test_unconsumed_capsules_release_their_source():
    src = Source(np.arange(4.0))
    ref = weakref.ref(src)
    d = DLPackArray(src)
    del src
    caps = [d.__arrow_c_array__(), d.__arrow_c_stream__(), d.__arrow_c_device_array__()]
    caps.append(d.__arrow_c_device_stream__())
    del d
    gc.collect()
    assert ref() is not None
    del caps
    gc.collect()
    assert ref() is None


def _moved_array(src_obj):
    d = DLPackArray(src_obj)
    _, array = d.__arrow_c_array__()
    moved = move_array(array)
    del d, array
    return moved


def test_release_runs_once_from_a_python_thread_without_the_gil():
    src = Source(np.arange(16.0))
    ref = weakref.ref(src)
    moved = _moved_array(src)
    del src
    gc.collect()
    assert ref() is not None
    release = RELEASE_ARRAY(moved.release)
    # ctypes drops the GIL around the call: the callback must take it itself.
    t = threading.Thread(target=release, args=(ctypes.byref(moved),))
    t.start()
    t.join()
    assert moved.release is None  # marked released, so it cannot run twice
    gc.collect()
    assert ref() is None


def test_release_runs_from_a_non_python_thread():
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "pthread_create"):
        pytest.skip("no pthread_create in the C library")
    src = Source(np.arange(16.0))
    ref = weakref.ref(src)
    moved = _moved_array(src)
    del src
    gc.collect()
    tid = ctypes.c_ulong()
    # The release callback is the thread's start routine: a thread Python has
    # never seen, holding no thread state, drops the last reference.
    libc.pthread_create.argtypes = [
        ctypes.POINTER(ctypes.c_ulong),
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    assert libc.pthread_create(ctypes.byref(tid), None, moved.release, ctypes.addressof(moved)) == 0
    libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
    assert libc.pthread_join(tid, None) == 0
    assert moved.release is None
    gc.collect()
    assert ref() is None


def test_child_moved_out_and_released_alone_keeps_data_valid():
    a = np.arange(12.0).reshape(3, 4)
    src = Source(a)
    ref = weakref.ref(src)
    moved = _moved_array(src)
    del src
    child_ptr = moved.children[0]
    child = ArrowArray()
    ctypes.memmove(ctypes.addressof(child), child_ptr, ctypes.sizeof(ArrowArray))
    child_ptr.contents.release = None
    RELEASE_ARRAY(moved.release)(ctypes.byref(moved))  # parent first
    gc.collect()
    assert ref() is not None  # the moved child still holds the data
    values = ctypes.cast(child.buffers[1], ctypes.POINTER(ctypes.c_double))
    assert [values[i] for i in range(12)] == list(map(float, range(12)))
    RELEASE_ARRAY(child.release)(ctypes.byref(child))
    gc.collect()
    assert ref() is None


def test_release_after_interpreter_shutdown_does_not_crash():
    # A consumer that outlives the interpreter (a C++ object released from an
    # atexit handler or a static destructor) must leak, never crash.
    proc = run_python(
        "import numpy as np, pyarrow as pa\n"
        "from dlpackarray import DLPackArray\n"
        "keep = pa.array(DLPackArray(np.arange(1000.0)))\n"
        "import dlpackarray\n"
        "dlpackarray._keep = keep\n"
    )
    assert_clean_exit(proc)


@given(
    st.lists(st.integers(0, 3), min_size=2, max_size=4).filter(lambda s: 0 in s),
    st.data(),
)
def test_arrays_with_a_zero_extent_are_contiguous_whatever_their_strides(shape, data):
    """No element, nothing misplaced: C- and F-contiguous as NumPy says, so
    every protocol exports them as they are."""
    strides = [data.draw(st.sampled_from([-16, 0, 8, 24, 800])) for _ in shape]
    a = np.lib.stride_tricks.as_strided(np.zeros(4), shape, strides)
    d = DLPackArray(a)
    assert d.strides == tuple(s // 8 for s in strides)  # what the checks must see past
    assert (d.c_contiguous, d.f_contiguous) == (a.flags.c_contiguous, a.flags.f_contiguous)
    assert d.c_contiguous and d.f_contiguous
    schema, array = d.__arrow_c_array__(copy=False)
    out = pa.Array._import_from_c_capsule(schema, array)
    assert len(out) == shape[0]
    np.testing.assert_array_equal(np.asarray(DLPackArray(out)).reshape(shape), a)
    nested = pa.list_(pa.float64(), 1)
    for _ in shape[2:]:
        nested = pa.list_(nested, 1)
    d.__arrow_c_array__(requested_schema=nested.__arrow_c_schema__(), copy=False)
    view = memoryview(d)
    assert view.c_contiguous and view.f_contiguous and view.shape == tuple(shape)


def test_rows_beyond_int32_list_sizes_are_refused():
    """Arrow list sizes are int32: '+w:2147483648' is no format.  A broadcast
    view has the shape without the memory."""
    big = DLPackArray(np.broadcast_to(np.zeros(1, np.int8), (1, 2**31)))
    for export in (
        big.__arrow_c_schema__,
        big.__arrow_c_array__,
        big.__arrow_c_stream__,
        big.__arrow_c_device_array__,
        lambda: big.__arrow_c_array__(copy=False),
    ):
        with pytest.raises(ValueError, match=r"2147483648 elements.*at most 2\*\*31 - 1"):
            export()
    nested = DLPackArray(np.broadcast_to(np.zeros(1, np.int8), (1, 2, 2**31)))
    request = pa.list_(pa.list_(pa.int8(), 1), 1).__arrow_c_schema__()
    with pytest.raises(ValueError, match="2147483648 elements"):
        nested.__arrow_c_array__(requested_schema=request)
    # The largest list size Arrow has is exported as one.
    edge = DLPackArray(np.broadcast_to(np.zeros(1, np.int8), (1, 2**31 - 1)))
    assert pa.DataType._import_from_c_capsule(edge.__arrow_c_schema__()).storage_type == (
        pa.list_(pa.int8(), 2**31 - 1)
    )
