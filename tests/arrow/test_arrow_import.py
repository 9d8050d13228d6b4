"""Arrow -> DLPackArray: any producer of the Arrow PyCapsule interface becomes a
tensor for NumPy and PyTorch without a copy (primitive, fixed-size-list and
fixed_shape_tensor arrays, offsets and permutations honoured); nulls, device
data and unsupported types are refused clearly; multi-chunk streams are
concatenated into one copy, or refused with copy=False; the import precedence
puts Arrow after DLPack and the array interfaces and before the buffer
protocol."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from arrow_ctypes import ArrowDeviceArray, struct_of
from conftest import require, require_torch

from dlpackarray import DLPackArray

pa = require("pyarrow", "the reference Arrow producer")


class ArrayOnly:
    """Exposes nothing but ``__arrow_c_array__`` (so the Arrow path is taken)."""

    def __init__(self, src):
        self.src = src

    def __arrow_c_array__(self, requested_schema=None):
        return self.src.__arrow_c_array__(requested_schema)


class DeviceArrayOnly:
    def __init__(self, src, device_type=None):
        self.src = src
        self.device_type = device_type

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        schema, array = self.src.__arrow_c_device_array__(requested_schema)
        if self.device_type is not None:
            struct_of(array, ArrowDeviceArray).device_type = self.device_type
        return schema, array


class StreamOnly:
    def __init__(self, src):
        self.src = pa.chunked_array([src])

    def __arrow_c_stream__(self, requested_schema=None):
        return self.src.__arrow_c_stream__(requested_schema)


def values_address(arr) -> int:
    return arr.buffers()[1].address + arr.offset * arr.type.bit_width // 8


def spec_tensor(arr) -> np.ndarray:
    """FixedShapeTensorArray as the canonical extension defines it (see
    test_arrow_export.spec_tensor)."""
    shape = list(arr.type.shape)
    perm = arr.type.permutation or list(range(len(shape)))
    values = arr.storage.flatten().to_numpy(zero_copy_only=False)
    return values.reshape([len(arr), *shape]).transpose([0, *(p + 1 for p in perm)])


@pytest.mark.parametrize("wrap", [ArrayOnly, DeviceArrayOnly, StreamOnly])
@pytest.mark.parametrize(
    "dtype", ["int8", "uint16", "int32", "uint64", "float16", "float32", "float64"]
)
def test_primitive_with_offset_is_zero_copy(wrap, dtype):
    src = pa.array(np.arange(50).astype(dtype))[7:31]
    d = DLPackArray(wrap(src))
    assert d.shape == (24,) and d.dtype == dtype and d.readonly
    assert d.data_ptr + d.byte_offset == values_address(src)
    np.testing.assert_array_equal(np.from_dlpack(d), src.to_numpy())


def test_fixed_size_list_honours_parent_and_child_offsets():
    values = pa.array(np.arange(100, dtype=np.int32))[4:]  # child offset 4
    fsl = pa.FixedSizeListArray.from_arrays(values, 4)[2:10]  # parent offset 2
    nested = pa.FixedSizeListArray.from_arrays(fsl, 2)[1:3]  # grandparent offset 1
    d = DLPackArray(ArrayOnly(nested))
    assert d.shape == (2, 2, 4)
    expected = np.array(nested.to_pylist(), dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(d), expected)
    assert d.data_ptr == values.buffers()[1].address + (4 + (2 + 2) * 4) * 4


@pytest.mark.parametrize("perm", [None, [1, 0, 2], [2, 0, 1], [1, 2, 0]])
def test_fixed_shape_tensor_with_permutation_and_offset(perm):
    shape = [2, 3, 4]
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(5 * 24, dtype=np.float64)), 24)
    ftype = pa.fixed_shape_tensor(pa.float64(), shape, permutation=perm)
    arr = pa.ExtensionArray.from_storage(ftype, storage)[1:4]
    d = DLPackArray(DeviceArrayOnly(arr))
    expected = spec_tensor(arr)
    assert d.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(d), expected)
    assert d.data_ptr == storage.values.buffers()[1].address + 24 * 8  # row 1, no copy


def test_pyarrow_fixed_shape_tensor_array_directly():
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    fst = pa.FixedShapeTensorArray.from_numpy_ndarray(x)
    d = DLPackArray(fst)
    np.testing.assert_array_equal(np.asarray(d), fst.to_numpy_ndarray())


def test_torch_sees_arrow_memory_without_copy():
    torch = require_torch()
    src = pa.array(np.arange(64, dtype=np.float32))
    t = torch.from_dlpack(DLPackArray(ArrayOnly(src)))
    assert t.data_ptr() == values_address(src)
    assert t.tolist() == src.to_pylist()


def test_record_batch_column_and_chunked_array():
    batch = pa.record_batch({"a": np.arange(5.0), "b": np.arange(5, dtype=np.int8)})
    d = DLPackArray(ArrayOnly(batch.column(1)))
    assert d.data_ptr == values_address(batch.column(1))
    one_chunk = pa.chunked_array([batch.column(0)])
    d = DLPackArray(one_chunk)  # only __arrow_c_stream__
    assert d.data_ptr == values_address(batch.column(0))


def test_nulls_are_refused_naming_the_count():
    for src in (
        pa.array([1.0, None, 3.0, None]),
        pa.array([[1, None], [3, 4]], pa.list_(pa.int64(), 2)),
    ):
        with pytest.raises(ValueError, match=r"2 null\(s\)|1 null\(s\)"):
            DLPackArray(ArrayOnly(src))
    # Also through the pyarrow object itself, whose __dlpack__ refuses first.
    with pytest.raises(ValueError, match=r"has 2 null\(s\) among 4"):
        DLPackArray(pa.array([1.0, None, 3.0, None]))
    # Nulls outside the sliced window do not count.
    d = DLPackArray(ArrayOnly(pa.array([None, 1.0, 2.0])[1:]))
    assert np.asarray(d).tolist() == [1.0, 2.0]


def test_multi_chunk_stream_is_one_copy_or_refused():
    chunked = pa.chunked_array(
        [np.arange(3.0), np.arange(3.0, 7.0), np.array([], dtype=np.float64)]
    )
    d = DLPackArray(chunked)
    assert np.asarray(d).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert not d.readonly  # a fresh copy of ours
    with pytest.raises(BufferError, match="2 non-empty chunks.*copy=False"):
        DLPackArray(chunked, copy=False)


def test_multi_chunk_fixed_shape_tensors_concatenate():
    x = np.arange(4 * 6, dtype=np.int16).reshape(4, 2, 3)
    fst = pa.FixedShapeTensorArray.from_numpy_ndarray(x)
    d = DLPackArray(pa.chunked_array([fst[:1], fst[1:]]))
    np.testing.assert_array_equal(np.asarray(d), x)


def test_empty_stream_is_an_empty_tensor():
    d = DLPackArray(pa.chunked_array([], type=pa.list_(pa.float32(), 3)))
    assert d.shape == (0, 3) and d.dtype == "float32"


def test_bit_packed_booleans_are_unpacked_into_a_copy():
    src = pa.array([True, False, True, True, False, True, False, False, True, True])[1:]
    d = DLPackArray(src)  # pyarrow's __dlpack__ refuses; Arrow unpacks
    assert d.dtype == "bool" and np.asarray(d).tolist() == src.to_pylist()
    with pytest.raises(BufferError, match="bit-packed booleans.*copy=False"):
        DLPackArray(ArrayOnly(src), copy=False)


def test_bool8_is_zero_copy():
    src = pa.array(np.array([1, 0, 1], dtype=np.int8), pa.int8())
    b8 = pa.ExtensionArray.from_storage(pa.bool8(), src)
    d = DLPackArray(ArrayOnly(b8))
    assert d.dtype == "bool" and d.data_ptr == values_address(src)


@pytest.mark.parametrize(
    "src,match",
    [
        (lambda: pa.array(["a", "b"]), "'u' \\(string\\)"),
        (lambda: pa.array([1, 2]).dictionary_encode(), "dictionary"),
        (lambda: pa.array([[1], [2, 3]]), "'\\+l' \\(list\\)"),
        (lambda: pa.array([1, 2], pa.timestamp("s")), "timestamp"),
    ],
)
def test_unsupported_types_are_refused_by_name(src, match):
    with pytest.raises(TypeError, match=match):
        DLPackArray(ArrayOnly(src()))


def test_record_batch_is_refused_as_a_struct():
    with pytest.raises(TypeError, match="struct"):
        DLPackArray(pa.record_batch({"a": [1.0]}))


def test_device_array_on_a_device_without_sync_event_support_is_refused():
    # CUDA device arrays are imported (waiting on their sync_event):
    # test_arrow_cuda_import.py, against the fake driver.
    with pytest.raises(BufferError, match=r"device type 10 \(ROCm, id -1\)"):
        DLPackArray(DeviceArrayOnly(pa.array([1.0, 2.0]), device_type=10))


def test_consumed_capsule_is_refused():
    schema, array = pa.array([1.0]).__arrow_c_array__()

    class Replay:
        def __arrow_c_array__(self, requested_schema=None):
            return schema, array

    DLPackArray(Replay())
    with pytest.raises(ValueError, match="already been consumed"):
        DLPackArray(Replay())


def test_polars_series_to_numpy_and_torch_zero_copy():
    pl = require("polars", "an Arrow stream producer")
    torch = require_torch()
    s = pl.Series(np.arange(100, dtype=np.float64))
    d = DLPackArray(s)
    assert d.data_ptr == s.to_numpy().ctypes.data  # polars' own buffer
    assert torch.from_dlpack(d).data_ptr() == d.data_ptr
    np.testing.assert_array_equal(np.asarray(d), s.to_numpy())


def test_nanoarrow_array_single_and_multi_chunk():
    na = require("nanoarrow", "a minimal Arrow producer")
    a = na.Array(np.arange(6, dtype=np.int32))
    d = DLPackArray(a)
    assert np.asarray(d).tolist() == list(range(6))
    assert d.data_ptr == na.c_array(a).buffers[1]
    chunked = na.Array(pa.chunked_array([[1, 2], [3]]))
    d = DLPackArray(chunked)  # __arrow_c_array__ refuses: read through the stream
    assert np.asarray(d).tolist() == [1, 2, 3]


# -- lifetimes -----------------------------------------------------------------------


def test_import_keeps_the_arrow_array_until_the_last_consumer_dies():
    torch = require_torch()
    src = np.arange(32.0)
    ref = weakref.ref(src)
    exported = DLPackArray(src)
    del src
    d = DLPackArray(ArrayOnly(exported))  # our own export: its release drops `src`
    del exported
    t = torch.from_dlpack(d)
    del d
    gc.collect()
    assert ref() is not None and t.sum().item() == sum(range(32))
    del t
    gc.collect()
    assert ref() is None  # released exactly when the last user went


# -- precedence ------------------------------------------------------------------------


class RawBytesAndArrow(bytes):
    """A column whose buffer protocol shows the raw values buffer (every byte,
    untyped) while Arrow says which float32 values it holds: importing through
    the buffer protocol would lose type, offset and length."""

    def __new__(cls, arr):
        self = super().__new__(cls, arr.buffers()[1].to_pybytes())
        self.arr = arr
        return self

    def __arrow_c_array__(self, requested_schema=None):
        return self.arr.__arrow_c_array__(requested_schema)


def test_arrow_comes_before_the_buffer_protocol():
    arr = pa.array(np.arange(10, dtype=np.float32))[2:5]
    obj = RawBytesAndArrow(arr)
    assert memoryview(obj).nbytes == 40  # what the buffer protocol alone would give
    d = DLPackArray(obj)
    assert d.dtype == "float32" and np.asarray(d).tolist() == [2.0, 3.0, 4.0]
    assert d.data_ptr == values_address(arr)


class ZeroDimWithArrow:
    """A 0-d array that also exports Arrow, where it can only be a length-1
    column: the array interface describes the object itself."""

    def __init__(self, value):
        self.value = np.array(value)
        self.__array_interface__ = self.value.__array_interface__

    def __arrow_c_array__(self, requested_schema=None):
        return DLPackArray(self.value).__arrow_c_array__(requested_schema)


def test_array_interfaces_and_dlpack_come_before_arrow():
    d = DLPackArray(ZeroDimWithArrow(3.5))
    assert d.shape == () and float(np.asarray(d)) == 3.5
    # DLPackArray itself speaks both; DLPack (here: the DLPackArray fast path)
    # keeps the 0-d shape, Arrow alone would give (1,).
    assert DLPackArray(DLPackArray(np.float64(2.0))).shape == ()
    assert DLPackArray(ArrayOnly(DLPackArray(np.float64(2.0)))).shape == (1,)


def test_arrow_methods_follow_changes_to_the_class():
    """Which Arrow methods a type has is cached per type; a class
    whose methods are replaced, added or deleted after an import is read
    through its new methods, never a stale answer."""

    class Producer:
        def __init__(self, src):
            self.src = src

        def __arrow_c_array__(self, requested_schema=None):
            return self.src.__arrow_c_array__(requested_schema)

    first = pa.array(np.arange(4, dtype=np.float32))
    second = pa.array(np.arange(10, 16, dtype=np.int64))
    obj = Producer(first)
    for _ in range(3):  # cached from here on
        assert np.asarray(DLPackArray(obj)).tolist() == [0.0, 1.0, 2.0, 3.0]

    # A replaced method is the one called.
    def replaced(self, requested_schema=None):
        return second.__arrow_c_array__(requested_schema)

    Producer.__arrow_c_array__ = replaced
    d = DLPackArray(obj)
    assert d.dtype == "int64" and np.asarray(d).tolist() == [10, 11, 12, 13, 14, 15]

    # A device method added later takes precedence over the array method.
    calls = []

    def device_array(self, requested_schema=None, **kwargs):
        calls.append("device")
        return first.__arrow_c_device_array__(requested_schema)

    Producer.__arrow_c_device_array__ = device_array
    assert np.asarray(DLPackArray(obj)).tolist() == [0.0, 1.0, 2.0, 3.0] and calls == ["device"]
    del Producer.__arrow_c_device_array__

    # A stream added next to a refusing array method is read instead.
    def refuse(self, requested_schema=None):
        raise NotImplementedError("only as a stream")

    Producer.__arrow_c_array__ = refuse

    def stream(self, requested_schema=None):
        return pa.chunked_array([second]).__arrow_c_stream__(requested_schema)

    Producer.__arrow_c_stream__ = stream
    assert np.asarray(DLPackArray(obj)).tolist() == [10, 11, 12, 13, 14, 15]

    # Without any Arrow method the object is refused, and a subclass that
    # adds one back is a type of its own.
    del Producer.__arrow_c_array__, Producer.__arrow_c_stream__
    with pytest.raises(TypeError, match="cannot wrap a 'Producer' object"):
        DLPackArray(obj)

    class Again(Producer):
        def __arrow_c_array__(self, requested_schema=None):
            return first.__arrow_c_array__(requested_schema)

    assert np.asarray(DLPackArray(Again(None))).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match="cannot wrap a 'Producer' object"):
        DLPackArray(obj)


def test_tensor_metadata_is_read_afresh_for_each_array():
    """The tensor metadata parse is remembered per thread: a
    sequence of tensor types, repeated, permuted, of the same byte length,
    and malformed, imports each one as its own metadata says."""
    from arrow_forge import Forge, extension, producer

    def tensor(shape, perm):
        k = int(np.prod(shape))
        storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(3 * k, dtype=np.int16)), k)
        ftype = pa.fixed_shape_tensor(pa.int16(), shape, permutation=perm)
        return pa.ExtensionArray.from_storage(ftype, storage)

    def malformed():
        f = Forge()
        meta = extension(b"arrow.fixed_shape_tensor", b'{"shape":[2,3],"permutation":[1,1]}')
        return producer(
            "__arrow_c_array__",
            f.pair(
                [{"format": b"+w:6", "metadata": meta}, {"format": b"s"}],
                [{"format": b"+w:6"}, {"format": b"s"}],
            ),
        ), f

    cases = [([2, 3], None), ([3, 2], None), ([2, 3], [1, 0]), ([2, 3], None), ([6], None)]
    for shape, perm in cases + cases[::-1]:
        arr = tensor(shape, perm)
        np.testing.assert_array_equal(np.asarray(DLPackArray(ArrayOnly(arr))), spec_tensor(arr))
        obj, _forge = malformed()
        with pytest.raises(ValueError, match="is not a permutation"):
            DLPackArray(obj)
